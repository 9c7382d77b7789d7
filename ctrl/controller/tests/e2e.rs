//! L2 end to end: the controller daemon against in-process P4Runtime
//! switches on 127.0.0.1. It installs the baseline, a congestion digest on
//! a spine's downlink makes the upstream leaf move weight to the other
//! spine, the cool-down restores it, metrics and events say so, and a
//! restarted controller finds everything in place and writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{installed, pipeline, wait_for};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metaroce_controller::daemon::{self, Config};
use metaroce_controller::mode::Mode;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_pipeline::{names, Entry, Key, RouteTarget};

fn topology(addrs: &[SocketAddr]) -> metaroce_topo::Topology {
    let yaml = format!(
        r#"
name: e2e-2x2
fabric: {{flowlet_timeout: 5ms, queue_high: 40pkt, queue_low: 10pkt, ecn_threshold: 20pkt}}
defaults: {{link: {{bandwidth: 100Mbps}}, host: {{nic_rate: 100Mbps}}}}
switches:
  - {{name: leaf1,  role: leaf,  device_id: 1, p4rt: "{}", subnet: 10.0.1.0/24}}
  - {{name: leaf2,  role: leaf,  device_id: 2, p4rt: "{}", subnet: 10.0.2.0/24}}
  - {{name: spine1, role: spine, device_id: 3, p4rt: "{}"}}
  - {{name: spine2, role: spine, device_id: 4, p4rt: "{}"}}
hosts:
  - {{name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}}
  - {{name: h3, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}}
links:
  - {{a: "leaf1:3", b: "spine1:1"}}
  - {{a: "leaf1:4", b: "spine2:1"}}
  - {{a: "leaf2:3", b: "spine1:2"}}
  - {{a: "leaf2:4", b: "spine2:2"}}
"#,
        addrs[0], addrs[1], addrs[2], addrs[3]
    );
    metaroce_topo::load_str(&yaml, "e2e").unwrap()
}

/// Weights by port of leaf1's route toward 10.0.2.0/24.
fn weights_toward_leaf2(state: &BTreeMap<Key, Entry>) -> Option<BTreeMap<u16, u32>> {
    Some(
        metaroce_pipeline::route_weights(state, std::net::Ipv4Addr::new(10, 0, 2, 0), 24)?
            .into_iter()
            .collect(),
    )
}

fn crossing(switch_id: u32, port: u16, depth: u32, seq: u32, up: bool) -> p4::P4Data {
    let bits = |v: u64, n: usize| p4::P4Data {
        data: Some(p4::p4_data::Data::Bitstring(v.to_be_bytes()[8 - n..].to_vec())),
    };
    p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
            members: vec![
                bits(u64::from(switch_id), 4),
                bits(u64::from(port), 2),
                bits(u64::from(depth), 4),
                bits(1000, 6),
                bits(u64::from(seq), 4),
                bits(u64::from(up), 1),
            ],
        })),
    }
}

async fn http_get(addr: SocketAddr, path: &str) -> String {
    common::http_text(addr, "GET", path, None, "").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn congestion_moves_upstream_weights_and_restores() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("METAROCE_LOG").unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
    let p = pipeline();
    let (switches, addrs, stop) = common::fabric().await;
    let topo = topology(&addrs);
    let listen = common::free_addr();
    let events = tempfile_path("events.jsonl");
    let mut cfg = Config::new(topo.clone(), p.clone());
    cfg.mode = Mode::Act;
    cfg.listen = Some(listen);
    cfg.events = Some(events.clone());
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));

    // Baseline: leaf1 spreads 10.0.2.0/24 evenly over both spines.
    wait_for("baseline on leaf1", 10, || async {
        weights_toward_leaf2(&installed(addrs[0], 1, &p).await)
            .is_some_and(|w| w.len() == 2 && w[&3] == w[&4])
    })
    .await;
    for (i, sw) in switches.iter().enumerate() {
        assert_eq!(sw.pipeline_pushes(), 1, "switch {i}");
    }

    // spine1's downlink to leaf2 (port 2) congests.
    let digest_id = p.info().digests.id_of(names::QUEUE_DIGEST).unwrap();
    let spine1_node = topo.switches[2].int_node_id;
    // The data plane sets its congested register and raises the digest.
    let congested_reg = p.info().registers.id_of(names::PORT_CONGESTED).unwrap();
    assert!(switches[2].set_register_cell(congested_reg, 2, vec![1]));
    assert!(switches[2].emit_digest(digest_id, crossing(spine1_node, 2, 45, 1, true)));
    wait_for("leaf1 to move weight to spine2", 10, || async {
        weights_toward_leaf2(&installed(addrs[0], 1, &p).await).is_some_and(|w| w[&4] > w[&3])
    })
    .await;
    let metrics = http_get(listen, "/metrics").await;
    assert!(metrics.contains("metaroce_reroutes_total{reason=\"congestion\"}"), "{metrics}");
    assert!(metrics.contains("metaroce_digests_total{switch=\"spine1\"} 1"), "{metrics}");
    // The status API refreshes at most every 500 ms.
    wait_for("the congestion map to show the hot port", 5, || async {
        http_get(listen, "/api/v1/congestion").await.contains("\"congested\":true")
    })
    .await;

    // It cools down: weights go back to the baseline step by step.
    assert!(switches[2].set_register_cell(congested_reg, 2, vec![0]));
    assert!(switches[2].emit_digest(digest_id, crossing(spine1_node, 2, 5, 2, false)));
    wait_for("leaf1 to restore", 15, || async {
        weights_toward_leaf2(&installed(addrs[0], 1, &p).await).is_some_and(|w| w[&4] == w[&3])
    })
    .await;
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let log = std::fs::read_to_string(&events).unwrap();
    assert!(log.contains("\"kind\":\"derate\"") && log.contains("\"kind\":\"restore\""), "{log}");
    // The first rewrite on leaf1 after the digest carries its reaction time.
    let reacted =
        log.lines().filter(|l| l.contains("\"kind\":\"write\"") && l.contains("\"switch\":\"leaf1\""));
    assert!(
        reacted.clone().any(|l| !l.contains("\"reaction_ms\":null")),
        "no reaction time recorded:\n{log}"
    );

    // A restarted controller reads the state back and writes nothing.
    let before = installed(addrs[0], 1, &p).await;
    let events2 = tempfile_path("events2.jsonl");
    let mut cfg = Config::new(topo.clone(), p.clone());
    cfg.mode = Mode::Act;
    cfg.events = Some(events2.clone());
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    wait_for("all four switches up again", 10, || async {
        std::fs::read_to_string(&events2).unwrap_or_default().matches("\"kind\":\"switch_up\"").count() == 4
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let log = std::fs::read_to_string(&events2).unwrap();
    assert!(!log.contains("\"kind\":\"write\""), "a restart must not rewrite anything:\n{log}");
    assert_eq!(installed(addrs[0], 1, &p).await, before);
    assert!(switches.iter().all(|s| s.pipeline_pushes() == 1), "the pipeline is not pushed again");
    let _ = stop.send(true);
}

/// The status and `metaroce_switch_primary` follow the very first
/// arbitration answer (the one `connect` waits for), not only later ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_primary_after_the_first_arbitration() {
    let p = pipeline();
    let (_switches, addrs, stop) = common::fabric().await;
    let topo = topology(&addrs);
    let listen = common::free_addr();
    let mut cfg = Config::new(topo, p);
    cfg.listen = Some(listen);
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    wait_for("every switch programmed", 10, || async {
        http_get(listen, "/api/v1/status").await.matches("\"programmed\":true").count() == 4
    })
    .await;
    let status = http_get(listen, "/api/v1/status").await;
    assert_eq!(status.matches("\"primary\":true").count(), 4, "{status}");
    assert!(!status.contains("\"primary\":false"), "{status}");
    let metrics = http_get(listen, "/metrics").await;
    for name in ["leaf1", "leaf2", "spine1", "spine2"] {
        let line = format!("metaroce_switch_primary{{switch=\"{name}\"}} 1");
        assert!(metrics.contains(&line), "no {line} in\n{metrics}");
    }
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let _ = stop.send(true);
}

fn tempfile_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("metaroce-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// A host that runs `metaroce host export` (here over a fixture sysfs tree)
/// shows up in the congestion map with its devices, and in /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_exporters_are_scraped_into_the_congestion_map() {
    use metaroce_host::netlink::NoNicStats;
    use metaroce_host::{exporter, fixture, Collector, Sampler, Sysfs};
    let root = tempfile_path("sysfs");
    let _ = std::fs::remove_dir_all(&root);
    fixture::write_mlx5(&root, "mlx5_0", "eth0", 9000).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let exporter_addr = listener.local_addr().unwrap();
    let collector = Collector::new(Sampler::new(Sysfs::new(&root), Arc::new(NoNicStats)), "h1");
    let (stop_exp, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(exporter::serve(listener, Duration::from_millis(50), collector, async move {
        let _ = stopped.await;
    }));

    let p = pipeline();
    let (_switches, addrs, stop) = common::fabric().await;
    let mut topo = topology(&addrs);
    topo.hosts[0].exporter = Some(exporter_addr.to_string());
    let listen = common::free_addr();
    let mut cfg = Config::new(topo, p);
    cfg.listen = Some(listen);
    cfg.host_scrape_interval = Duration::from_millis(100);
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    wait_for("h1 in the congestion map", 10, || async {
        let c = http_get(listen, "/api/v1/congestion").await;
        c.contains("\"host\":\"h1\"") && c.contains("mlx5_0") && c.contains("\"up\":true")
    })
    .await;
    let m = http_get(listen, "/metrics").await;
    assert!(m.contains("metaroce_host_exporter_up{host=\"h1\"} 1"), "{m}");
    assert!(
        m.contains("metaroce_host_congestion_rate{host=\"h1\",device=\"mlx5_0\",signal=\"cnp_sent\"}"),
        "{m}"
    );
    // The exporter goes away: the host is shown down, the controller goes on.
    let _ = stop_exp.send(());
    wait_for("h1 down", 10, || async {
        http_get(listen, "/metrics").await.contains("metaroce_host_exporter_up{host=\"h1\"} 0")
    })
    .await;
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let _ = stop.send(true);
}

async fn http_post(addr: SocketAddr, path: &str, token: &str, body: &str) -> String {
    http_send(addr, "POST", path, token, body).await
}

async fn http_send(addr: SocketAddr, method: &str, path: &str, token: &str, body: &str) -> String {
    common::http_text(addr, method, path, Some(token), body).await
}

/// A link monitor reports spine1–leaf1 down through the API: leaf1 routes
/// everything toward leaf2 over spine2 at once; reported up, both spines
/// carry it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_link_failure_is_routed_around_at_once() {
    let p = pipeline();
    let (_switches, addrs, stop) = common::fabric().await;
    let topo = topology(&addrs);
    let listen = common::free_addr();
    let tokens = tempfile_path("links-tokens");
    let token = "operator-token-for-the-link-test";
    std::fs::write(&tokens, format!("operator {token}\n")).unwrap();
    let mut cfg = Config::new(topo.clone(), p.clone());
    cfg.mode = Mode::Act;
    cfg.listen = Some(listen);
    cfg.tokens = Some(tokens);
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    wait_for("baseline on leaf1", 10, || async {
        weights_toward_leaf2(&installed(addrs[0], 1, &p).await).is_some_and(|w| w.len() == 2)
    })
    .await;
    wait_for("the API", 5, || async { http_get(listen, "/healthz").await.contains("200") }).await;

    let answer = http_post(listen, "/api/v1/links", token, r#"{"link":"spine1:1","state":"down"}"#).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // One next hop left: the route points at it directly, or at a group of one.
    wait_for("leaf1 to leave spine1 out", 5, || async {
        let st = installed(addrs[0], 1, &p).await;
        let direct = match st.get(&Key::Route(u32::from(std::net::Ipv4Addr::new(10, 0, 2, 0)), 24)) {
            Some(Entry::Route { target: RouteTarget::Nhop(n), .. }) => {
                matches!(st.get(&Key::Nhop(*n)), Some(Entry::Nhop { port: 4, .. }))
            }
            _ => false,
        };
        direct || weights_toward_leaf2(&st).is_some_and(|w| w.keys().eq([&4]))
    })
    .await;
    let metrics = http_send(listen, "GET", "/metrics", token, "").await;
    assert!(metrics.contains("metaroce_reroutes_total{reason=\"link_down\"} 1"), "{metrics}");
    assert!(metrics.contains("metaroce_unreachable_leaf_pairs 0"), "{metrics}");

    // With leaf1–spine1 down, leaf2–spine2 down too would leave leaf1 and
    // leaf2 without a path: refused, naming the pairs, unless forced.
    let cut = r#"{"link":"spine2:2","state":"down"}"#;
    let refused = http_post(listen, "/api/v1/links", token, cut).await;
    assert!(refused.starts_with("HTTP/1.1 409"), "{refused}");
    assert!(
        refused.contains("leaf1→leaf2, leaf2→leaf1") && refused.contains("nothing was changed. Send"),
        "{refused}"
    );
    let forced = r#"{"link":"spine2:2","state":"down","force":true}"#;
    let answer = http_post(listen, "/api/v1/links", token, forced).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""cut_off":[["leaf1","leaf2"],["leaf2","leaf1"]]"#), "{answer}");
    assert!(answer.contains(r#""unreachable_pairs":2"#), "{answer}");
    let metrics = http_send(listen, "GET", "/metrics", token, "").await;
    assert!(metrics.contains("metaroce_unreachable_leaf_pairs 2"), "{metrics}");
    let events = http_send(listen, "GET", "/api/v1/events", token, "").await;
    assert!(
        events.contains("link_down_refused") && events.contains("2 leaf pairs cut off: leaf1→leaf2"),
        "{events}"
    );
    let answer = http_post(listen, "/api/v1/links", token, r#"{"link":"leaf2:4","state":"up"}"#).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains(r#""unreachable_pairs":0"#), "{answer}");

    let answer = http_post(listen, "/api/v1/links", token, r#"{"link":"leaf1:3","state":"up"}"#).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    wait_for("leaf1 to use both spines again", 5, || async {
        weights_toward_leaf2(&installed(addrs[0], 1, &p).await)
            .is_some_and(|w| w.len() == 2 && w[&3] == w[&4])
    })
    .await;
    let bad = http_post(listen, "/api/v1/links", token, r#"{"link":"leaf1:1","state":"down"}"#).await;
    assert!(bad.starts_with("HTTP/1.1 400") && bad.contains("leads to a host"), "{bad}");
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let _ = stop.send(true);
}
