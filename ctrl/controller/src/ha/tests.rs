//! The election's decisions against the in-memory service, in virtual time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::fake::{FakeElector, FakeEtcd};
use super::task::{self, LeaseClock, TaskConfig};
use super::*;

const TTL: Duration = Duration::from_secs(1);

struct Candidate {
    rx: watch::Receiver<HaState>,
    stop: watch::Sender<bool>,
    client: FakeElector,
    task: tokio::task::JoinHandle<()>,
}

fn candidate(etcd: &FakeEtcd, name: &str) -> Candidate {
    let client = etcd.client();
    let (tx, rx) = watch::channel(HaState::standby(name));
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(task::run(client.clone(), TaskConfig::new(name, TTL), tx, stop_rx));
    Candidate { rx, stop, client, task }
}

/// Waits (in virtual time) until `c` has `role`; returns when that was.
async fn until(c: &mut Candidate, role: Role) -> Instant {
    tokio::time::timeout(Duration::from_secs(30), c.rx.wait_for(|s| s.role == role)).await.unwrap().unwrap();
    Instant::now()
}

#[tokio::test(start_paused = true)]
async fn a_lone_candidate_leads_with_an_election_id_above_every_standby() {
    let etcd = FakeEtcd::default();
    let mut a = candidate(&etcd, "a");
    until(&mut a, Role::Leader).await;
    let s = a.rx.borrow().clone();
    assert_eq!(s.leader.as_deref(), Some("a"));
    assert_eq!(s.term, Term { election_id: leader_election_id(s.revision.unwrap()), writes: true });
    assert!(s.term.election_id > standby_election_id("a"));
    assert!(s.term.election_id > u128::from(u64::MAX), "above every standby id");
    assert_eq!(s.changes, 1);
}

#[tokio::test(start_paused = true)]
async fn a_standby_takes_over_within_the_lease_when_the_leader_dies_and_outranks_it() {
    let etcd = FakeEtcd::default();
    let mut a = candidate(&etcd, "a");
    until(&mut a, Role::Leader).await;
    let mut b = candidate(&etcd, "b");
    tokio::time::timeout(Duration::from_secs(5), b.rx.wait_for(|s| s.leader.as_deref() == Some("a")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.rx.borrow().role, Role::Standby);
    assert!(!b.rx.borrow().term.writes);
    let old_id = a.rx.borrow().term.election_id;
    // SIGKILL: the task vanishes, nothing renews its lease.
    a.task.abort();
    let died = Instant::now();
    let elected = until(&mut b, Role::Leader).await;
    let took = elected - died;
    assert!(took <= TTL + Duration::from_millis(50), "took {took:?}");
    assert!(b.rx.borrow().term.election_id > old_id, "a newer leader outranks an older one");
}

#[tokio::test(start_paused = true)]
async fn a_leader_cut_off_from_etcd_stands_down_before_a_standby_is_elected() {
    let etcd = FakeEtcd::default();
    let mut a = candidate(&etcd, "a");
    until(&mut a, Role::Leader).await;
    let mut b = candidate(&etcd, "b");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // When each change happened, in virtual time.
    let mut arx = a.rx.clone();
    let demoted = tokio::spawn(async move {
        arx.wait_for(|s| s.role == Role::Standby).await.unwrap();
        Instant::now()
    });
    a.client.cut(true);
    let cut = Instant::now();
    until(&mut b, Role::Leader).await;
    let elected = b.rx.borrow().elected_at.unwrap();
    let demoted = demoted.await.unwrap();
    assert!(demoted - cut <= TTL, "stood down within its lease: {:?}", demoted - cut);
    assert!(demoted <= elected, "never two leaders: a stood down at {demoted:?}, b elected at {elected:?}");
    let s = a.rx.borrow().clone();
    assert!(!s.term.writes);
    assert_eq!(s.changes, 2);
    assert!(s.reason.contains("lease"), "{}", s.reason);
    // Back in touch, it campaigns again and waits behind b.
    a.client.cut(false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(a.rx.borrow().role, Role::Standby);
    assert_eq!(a.rx.borrow().leader.as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn a_stopped_leader_resigns_so_its_standby_takes_over_at_once() {
    let etcd = FakeEtcd::default();
    let mut a = candidate(&etcd, "a");
    until(&mut a, Role::Leader).await;
    let mut b = candidate(&etcd, "b");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopped = Instant::now();
    a.stop.send(true).unwrap();
    let elected = until(&mut b, Role::Leader).await;
    assert!(elected - stopped < Duration::from_millis(100), "{:?}", elected - stopped);
    tokio::time::timeout(Duration::from_secs(1), a.task).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn without_etcd_a_candidate_stays_standby_and_retries() {
    let etcd = FakeEtcd::default();
    let client = etcd.client();
    client.cut(true);
    let (tx, mut rx) = watch::channel(HaState::standby("a"));
    let (_stop, stop_rx) = watch::channel(false);
    tokio::spawn(task::run(client.clone(), TaskConfig::new("a", TTL), tx, stop_rx));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(rx.borrow().role, Role::Standby);
    client.cut(false);
    tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|s| s.role == Role::Leader))
        .await
        .unwrap()
        .unwrap();
}

#[test]
fn the_lease_clock_counts_from_the_renewal_sent() {
    let t0 = Instant::now();
    let mut c = LeaseClock::new(TTL, t0);
    assert!(!c.lapsed(t0 + Duration::from_millis(999)));
    assert!(c.lapsed(t0 + TTL));
    c.renewed(t0 + Duration::from_millis(400));
    // An answer to an older renewal does not move it back.
    c.renewed(t0 + Duration::from_millis(200));
    assert_eq!(c.deadline(), t0 + Duration::from_millis(1400));
}

#[test]
fn urls_parse_or_say_what_is_wrong() {
    assert_eq!(parse_url("etcd://127.0.0.1:2379").unwrap(), vec!["http://127.0.0.1:2379"]);
    assert_eq!(parse_url("etcd://a:1,b:2/").unwrap(), vec!["http://a:1", "http://b:2"]);
    for bad in ["http://a:1", "etcd://a", "etcd://a:0", "etcd://:1", "etcd://a:1,", "etcd://a:x"] {
        let e = parse_url(bad).unwrap_err().to_string();
        assert!(e.contains("--ha"), "{bad}: {e}");
    }
}

#[test]
fn standby_ids_are_distinct_per_name_and_below_every_leader() {
    let (a, b) = (standby_election_id("ctl-a"), standby_election_id("ctl-b"));
    assert_ne!(a, b);
    assert!(a > 4 && b > 4, "above the ids `controller snapshot` reads with");
    assert!(a < leader_election_id(1) && b < leader_election_id(1));
    assert!(leader_election_id(7) < leader_election_id(8));
}

#[tokio::test]
async fn a_standby_refuses_commands_naming_the_leader() {
    use crate::obs::{Command, Metrics};
    let metrics = Metrics::new();
    let mut st = HaState::standby("b");
    st.leader = Some("a".into());
    let (_tx, rx) = watch::channel(st);
    let f = Follower::new(Some(rx), &metrics);
    assert!(!f.writes());
    assert!(metrics.encode().contains("metaroce_ha_role{role=\"standby\"} 1"));
    let (reply, answer) = tokio::sync::oneshot::channel();
    let (claim, _claimed) = tokio::sync::oneshot::channel();
    assert!(f.gate(Command::SetMode { mode: crate::mode::Mode::Act, claim, reply }).is_none());
    let refused = answer.await.unwrap().unwrap_err();
    assert_eq!(refused, crate::obs::CommandError::Standby { leader: Some("a".into()), leader_url: None });
    assert_eq!(refused.status(), 409);
    let msg = refused.to_string();
    assert!(msg.contains("standby") && msg.contains("the leader is a"), "{msg}");
    assert_eq!(f.status()["role"], "standby");
}

#[test]
fn campaign_values_carry_the_url_after_the_name() {
    assert_eq!(campaign_value("a", None), "a");
    assert_eq!(parse_campaign_value("a"), ("a".to_string(), None));
    let v = campaign_value("ctl-a", Some("http://ctl-a:9100"));
    assert_eq!(parse_campaign_value(&v), ("ctl-a".to_string(), Some("http://ctl-a:9100".to_string())));
    assert_eq!(listen_url("10.0.0.5:9100".parse().ok()).as_deref(), Some("http://10.0.0.5:9100"));
    assert_eq!(listen_url("[::1]:9100".parse().ok()).as_deref(), Some("http://[::1]:9100"));
    assert_eq!(listen_url("0.0.0.0:9100".parse().ok()), None);
    assert_eq!(listen_url(None), None);
}

#[tokio::test(start_paused = true)]
async fn a_standby_sends_clients_to_the_url_the_leader_campaigned_with() {
    use crate::obs::{Command, Metrics};
    let etcd = FakeEtcd::default();
    let client = etcd.client();
    let (tx, mut a) = watch::channel(HaState::standby("a"));
    let (_stop, stop_rx) = watch::channel(false);
    let mut cfg = TaskConfig::new("a", TTL);
    cfg.url = Some("http://ctl-a:9100".into());
    tokio::spawn(task::run(client, cfg, tx, stop_rx));
    tokio::time::timeout(Duration::from_secs(30), a.wait_for(|s| s.role == Role::Leader))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.borrow().leader_url.as_deref(), Some("http://ctl-a:9100"));
    let mut b = candidate(&etcd, "b");
    tokio::time::timeout(Duration::from_secs(5), b.rx.wait_for(|s| s.leader_url.is_some()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.rx.borrow().leader.as_deref(), Some("a"));

    let metrics = Metrics::new();
    let f = Follower::new(Some(b.rx.clone()), &metrics);
    let (claim, _claimed) = tokio::sync::oneshot::channel();
    let (reply, answer) = tokio::sync::oneshot::channel();
    let cmd = Command::RemoveJob { name: "j".into(), received: Instant::now(), claim, reply };
    assert!(f.gate(cmd).is_none());
    let refusal = answer.await.unwrap().unwrap_err();
    assert_eq!(refusal.status, 409);
    assert_eq!(refusal.body["leader"], "a");
    assert_eq!(refusal.body["leader_url"], "http://ctl-a:9100");
    assert!(refusal.body["error"].as_str().unwrap().contains("at http://ctl-a:9100"), "{}", refusal.body);
    assert_eq!(f.status()["leader_url"], "http://ctl-a:9100");
}
