//! Reaction time of the whole loop on a 64-switch fabric under a digest
//! storm: from a threshold digest reaching the controller to the group
//! rewrite it causes being acknowledged by the switch (the P4Runtime Write
//! that points the routes' `nhop_group` entries at the new selector group
//! answered; deleting the old group follows), measured by the controller itself (`reaction_ms` of
//! each write event). The switches are the driver's in-process P4Runtime
//! servers on 127.0.0.1, so the figures are the controller's own cost plus
//! loopback gRPC, not a switch's table-update time.
//!
//! Storm: 10,000 digests/s for 5 s on the 768 spine→leaf downlinks. Most
//! re-assert a port's state (queues hovering at a threshold); every 50 ms
//! a probe turns one more downlink hot, which makes the 47 other leaves
//! move weight away from it. The policy reacts at once (`hold_up_ns` 0),
//! so the reaction time is the loop's own: digest decode, view, decision,
//! desired state, diff and the acknowledged Write.
//!
//! Then placement: 100 jobs registered through the job API one at a time,
//! and 100 large-flow digests of new (unannounced) elephants, each placed by
//! the planner with steer entries. For these the bench reports the
//! controller's own share (the request or digest in → the first steer
//! Write sent, without the switch's acknowledgement) beside the
//! acknowledged figure and the switch-ack floor, and where that share goes:
//! waiting for the state task (`queue`, with the job's validation),
//! deciding (`decide`), waiting for the switch's agent (`dispatch`) and the
//! agent's desired state and diff (`prepare`).
//!
//! The runtime's workers are pinned, one per CPU, as `metaroce controller
//! run --pin-workers` runs them (see `metaroce_controller::runtime` for
//! why); `-- --unpinned` runs tokio's default instead.
//!
//! The storm is the only input by default: registers are polled once an
//! hour. `-- --poll-ms N` polls every switch's registers every N ms, as a
//! running controller does (100 ms by default), and `--register-ms N` makes
//! every register Read or Write take N ms at the switch, as BMv2's Thrift
//! register access does: together they show whether a reaction waits for
//! a register poll.
//!
//! Run with `cargo bench -p metaroce-controller --bench reaction`; it prints
//! figures and asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metaroce_controller::daemon::{self, Config};
use metaroce_controller::mode::Mode;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_pipeline::{names, Pipeline};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;

// As the `metaroce` binary runs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RATE: u64 = 10_000;
const SCHED: &str = "scheduler-token-of-the-reaction-bench";
const VIEW: &str = "viewer-token-of-the-reaction-bench-01";
const SECONDS: u64 = 5;
/// Jobs, then large-flow digests, placed one at a time: enough that the
/// printed p99 is a percentile (of 200 job writes, 100 digests' writes),
/// not the largest of a few dozen.
const PLACEMENT_PROBES: usize = 100;

fn base_port() -> u16 {
    'outer: for base in (20_000u16..60_000).step_by(997) {
        for i in 1..=64 {
            if std::net::TcpListener::bind(("127.0.0.1", base + i)).is_err() {
                continue 'outer;
            }
        }
        return base;
    }
    panic!("no free range of 64 ports on 127.0.0.1");
}

fn digest(node: u32, port: u16, seq: u32, up: bool) -> p4::P4Data {
    let bits = |v: u64, n: usize| p4::P4Data {
        data: Some(p4::p4_data::Data::Bitstring(v.to_be_bytes()[8 - n..].to_vec())),
    };
    p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
            members: vec![
                bits(u64::from(node), 4),
                bits(u64::from(port), 2),
                bits(if up { 50 } else { 5 }, 4),
                bits(u64::from(seq), 6),
                bits(u64::from(seq), 4),
                bits(u64::from(up), 1),
            ],
        })),
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// "p50=… ms p99=… ms" of sorted milliseconds.
fn p50_p99(sorted: &[f64]) -> String {
    format!("p50={:.3} ms p99={:.3} ms", percentile(sorted, 0.5), percentile(sorted, 0.99))
}

/// The value of `--name N` (milliseconds) on the command line, if given.
fn arg_ms(name: &str) -> Option<Duration> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    let v = args.get(i + 1).and_then(|v| v.parse::<f64>().ok()).filter(|v| *v >= 0.0);
    Some(Duration::from_secs_f64(v.unwrap_or_else(|| panic!("{name} takes a number of milliseconds")) / 1e3))
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test` runs benches once without --bench: skip the storm.
    }
    // Workers pinned, one per CPU, as `metaroce controller run
    // --pin-workers` runs them; `--unpinned` measures tokio's default.
    let pin = !std::env::args().any(|a| a == "--unpinned");
    let built = metaroce_controller::runtime::build(pin).unwrap();
    match &built.pinned {
        Some(cpus) => println!("runtime: {} workers pinned to CPUs {cpus:?} (as --pin-workers)", cpus.len()),
        None => println!("runtime: tokio's default, workers unpinned (--unpinned)"),
    }
    built.runtime.block_on(run());
}

async fn run() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    let p = Arc::new(Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap());
    let mut common = Common::new("bench-64", Bandwidth::gbps(400));
    common.p4rt_base_port = base_port();
    common.thrift_base_port = None;
    let topo = gen::leaf_spine(&common, 48, 16, 2, 1).unwrap();
    assert_eq!(topo.switches.len(), 64);
    // The storm is the only input unless register polls are asked for.
    let poll_interval = arg_ms("--poll-ms").unwrap_or(Duration::from_secs(3600));
    let register_latency = arg_ms("--register-ms").unwrap_or(Duration::ZERO);
    println!("register polls every {poll_interval:?}, each register access taking {register_latency:?} at the switch");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut switches = Vec::new();
    for sw in &topo.switches {
        let s = Switch::new(SwitchOptions {
            device_id: sw.device_id,
            registers_via_p4runtime: true,
            register_latency,
            ..Default::default()
        });
        let mut rx = stop_rx.clone();
        s.bind(sw.p4rt.parse().unwrap(), async move {
            let _ = rx.wait_for(|v| *v).await;
        })
        .await
        .unwrap();
        switches.push(s);
    }
    let events = std::env::temp_dir().join(format!("metaroce-bench-reaction-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&events);
    let mut cfg = Config::new(topo.clone(), p.clone());
    cfg.mode = Mode::Act;
    cfg.events = Some(events.clone());
    let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    cfg.listen = Some(listen);
    cfg.poll_interval = poll_interval;
    cfg.core.policy.hold_up_ns = 0;
    let tokens = std::env::temp_dir().join(format!("metaroce-bench-tokens-{}", std::process::id()));
    std::fs::write(&tokens, format!("scheduler {SCHED}\nviewer {VIEW}\n")).unwrap();
    cfg.tokens = Some(tokens);
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    // Wait for the baseline on every switch.
    let t0 = Instant::now();
    loop {
        let log = std::fs::read_to_string(&events).unwrap_or_default();
        if log.matches("\"kind\":\"write\"").count() >= 64 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "baseline not installed in 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("baseline on 64 switches installed in {:.2} s", t0.elapsed().as_secs_f64());

    let digest_id = p.info().digests.id_of(names::QUEUE_DIGEST).unwrap();
    let congested = p.info().registers.id_of(names::PORT_CONGESTED).unwrap();
    let spines: Vec<usize> = (48..64).collect();
    let mut downlinks: Vec<(usize, u16)> = Vec::new();
    for &s in &spines {
        downlinks.extend(topo.adjacency(s).iter().map(|a| (s, a.port)));
    }
    // Noise: digests that re-assert a port's current state (a queue
    // hovering at its threshold, re-reported at the switch's digest rate).
    // Probes: every 50 ms one more downlink goes hot and stays hot; each
    // makes the 47 other leaves move weight away from it.
    let mut hot = vec![false; downlinks.len()];
    let mut seq = vec![0u32; topo.switches.len()];
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    let total = RATE * SECONDS;
    let mut sent = 0u64;
    let mut probes = 0usize;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    while sent < total {
        ticker.tick().await;
        let elapsed = start.elapsed();
        if (elapsed.as_millis() as usize) / 50 >= probes && probes < downlinks.len() {
            let k = (probes * 37) % downlinks.len();
            let (s, port) = downlinks[k];
            hot[k] = true;
            seq[s] += 1;
            switches[s].set_register_cell(congested, usize::from(port), vec![1]);
            switches[s].emit_digest(digest_id, digest(topo.switches[s].int_node_id, port, seq[s], true));
            probes += 1;
            sent += 1;
        }
        let due = (elapsed.as_secs_f64() * RATE as f64) as u64;
        while sent < due.min(total) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % downlinks.len() as u64) as usize;
            let (s, port) = downlinks[k];
            seq[s] += 1;
            switches[s].emit_digest(digest_id, digest(topo.switches[s].int_node_id, port, seq[s], hot[k]));
            sent += 1;
        }
    }
    let storm = start.elapsed();
    let storm_cpu = cpu_seconds() - cpu_before;
    // Then quiet probes: one new hot downlink every 200 ms and nothing else,
    // to separate the loop's own latency from queueing behind the storm.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let quiet_from = std::time::SystemTime::now();
    let quiet_cpu_before = cpu_seconds();
    for q in 0..20usize {
        let mut k = (probes + q) * 53 % downlinks.len();
        while hot[k] {
            k = (k + 1) % downlinks.len();
        }
        hot[k] = true;
        let (s, port) = downlinks[k];
        seq[s] += 1;
        switches[s].set_register_cell(congested, usize::from(port), vec![1]);
        switches[s].emit_digest(digest_id, digest(topo.switches[s].int_node_id, port, seq[s], true));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Everything the process did in the quiet part (ticks included), per probe.
    let quiet_cpu_ms = (cpu_seconds() - quiet_cpu_before) * 1e3 / 20.0;
    let quiet_from_ns =
        quiet_from.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (jobs_from_ns, digests_from_ns) = placement_probes(&topo, &p, &switches, listen).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let metrics = http_get(listen, "/metrics").await;
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let floor = rpc_floor(&topo, &p).await;
    let _ = stop_tx.send(true);

    let log = std::fs::read_to_string(&events).unwrap();
    let mut reaction: Vec<f64> = Vec::new();
    let mut quiet: Vec<f64> = Vec::new();
    // Per causing digest: the first switch to acknowledge, i.e. the
    // single-write reaction time.
    let mut first: std::collections::BTreeMap<u64, f64> = std::collections::BTreeMap::new();
    let mut writes = 0usize;
    let mut write_ms: Vec<f64> = Vec::new();
    // Per stage of a reaction, under the storm and without it.
    let mut stages: std::collections::BTreeMap<(bool, String), Vec<f64>> = std::collections::BTreeMap::new();
    // Placement reactions: (sent, acked) per phase.
    let (mut job_sent, mut job_acked, mut lf_sent, mut lf_acked) = (vec![], vec![], vec![], vec![]);
    // Where the controller's share of a placement goes, per stage up to the Write sent.
    let mut place_stages: std::collections::BTreeMap<(&str, String), Vec<f64>> =
        std::collections::BTreeMap::new();
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let ts = v["ts_unix_ns"].as_u64().unwrap_or(0);
        if v["kind"] == "write" && ts >= jobs_from_ns {
            let (Some(sent), Some(acked)) =
                (v["details"]["controller_ms"].as_f64(), v["details"]["reaction_ms"].as_f64())
            else {
                continue;
            };
            let phase = if ts >= digests_from_ns {
                lf_sent.push(sent);
                lf_acked.push(acked);
                "large flow"
            } else {
                job_sent.push(sent);
                job_acked.push(acked);
                "job"
            };
            if let Some(st) = v["details"]["reaction_stages_ms"].as_object() {
                for (k, x) in st.iter().filter(|(k, _)| *k != "write") {
                    place_stages.entry((phase, k.clone())).or_default().extend(x.as_f64());
                }
            }
            continue;
        }
        if v["kind"] == "write" {
            writes += 1;
            if let Some(w) = v["details"]["write_ms"].as_f64() {
                write_ms.push(w);
            }
            if let Some(r) = v["details"]["reaction_ms"].as_f64() {
                let cause = v["details"]["cause_unix_us"].as_u64().unwrap_or(0) / 100;
                let e = first.entry(cause).or_insert(r);
                *e = e.min(r);
                let is_quiet = v["ts_unix_ns"].as_u64().unwrap_or(0) >= quiet_from_ns;
                if is_quiet {
                    quiet.push(r);
                } else {
                    reaction.push(r);
                }
                if let Some(st) = v["details"]["reaction_stages_ms"].as_object() {
                    for (k, x) in st {
                        stages.entry((is_quiet, k.clone())).or_default().extend(x.as_f64());
                    }
                }
            }
        }
    }
    reaction.sort_by(f64::total_cmp);
    quiet.sort_by(f64::total_cmp);
    let mut first: Vec<f64> = first.into_values().collect();
    first.sort_by(f64::total_cmp);
    write_ms.sort_by(f64::total_cmp);
    let derates = log.matches("\"kind\":\"derate\"").count();
    println!(
        "storm: {sent} digests in {:.2} s ({:.0}/s) on {} spine downlinks, {probes} probes",
        storm.as_secs_f64(),
        sent as f64 / storm.as_secs_f64(),
        downlinks.len()
    );
    println!("derate changes: {derates}; switch writes: {writes}");
    println!(
        "process CPU during the storm: {storm_cpu:.2} s in {:.2} s ({:.0}% of 2 cores; controller, 64 servers and the storm itself)",
        storm.as_secs_f64(),
        100.0 * storm_cpu / storm.as_secs_f64() / 2.0
    );
    println!(
        "reaction digest→write acked, every upstream switch, under the storm: n={} {} max={:.3} ms (target p99 <= 1 ms)",
        reaction.len(),
        p50_p99(&reaction),
        reaction.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "reaction without the storm (20 probes): n={} {} max={:.3} ms",
        quiet.len(),
        p50_p99(&quiet),
        quiet.last().copied().unwrap_or(f64::NAN)
    );
    println!("first switch acknowledged per causing digest: n={} {}", first.len(), p50_p99(&first));
    for ((is_quiet, stage), v) in &mut stages {
        v.sort_by(f64::total_cmp);
        println!("  stage {stage:>8} ({}): {}", if *is_quiet { "quiet" } else { "storm" }, p50_p99(v));
    }
    for v in [&mut job_sent, &mut job_acked, &mut lf_sent, &mut lf_acked] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "placement, job registered (API) → steer Write sent, controller's share, every switch: n={} {} max={:.3} ms (target p99 <= 1 ms)",
        job_sent.len(),
        p50_p99(&job_sent),
        job_sent.last().copied().unwrap_or(f64::NAN)
    );
    println!("placement, job registered → steer Write acknowledged: {}", p50_p99(&job_acked));
    println!(
        "placement, large-flow digest in → steer Write sent, controller's share: n={} {} max={:.3} ms (target p99 <= 1 ms)",
        lf_sent.len(),
        p50_p99(&lf_sent),
        lf_sent.last().copied().unwrap_or(f64::NAN)
    );
    println!("placement, large-flow digest in → steer Write acknowledged: {}", p50_p99(&lf_acked));
    for ((phase, stage), v) in &mut place_stages {
        v.sort_by(f64::total_cmp);
        println!(
            "  stage {stage:>8} ({phase}): {} max={:.3} ms",
            p50_p99(v),
            v.last().copied().unwrap_or(f64::NAN)
        );
    }
    let (n, p50, p99) = histogram_quantiles(&metrics, "metaroce_placement_duration_seconds");
    println!(
        "planner decisions: n={n} p50<={:.3} ms p99<={:.3} ms (histogram bucket bounds)",
        p50 * 1e3,
        p99 * 1e3
    );
    let (n, p50, p99) = histogram_quantiles(&metrics, "metaroce_decision_duration_seconds");
    println!("decisions: n={n} p50<={:.3} ms p99<={:.3} ms (histogram bucket bounds)", p50 * 1e3, p99 * 1e3);
    println!("write pass per switch: {}", p50_p99(&write_ms));
    println!("floor, one acked Write on an idle switch: {}", p50_p99(&floor.single));
    println!(
        "floor, {} switches each doing {} sequential acked Writes at once (no controller): switch done {}, wave done p50={:.3} ms",
        floor.switches,
        FLOOR_PHASES,
        p50_p99(&floor.per_switch),
        percentile(&floor.wave, 0.5)
    );
    println!(
        "CPU per reaction without the storm: {quiet_cpu_ms:.1} ms of process CPU per probe (controller and 64 servers, 200 ms of ticks included); the floor's writes alone: {:.1} ms per wave",
        floor.wave_cpu_ms
    );
}

/// Placement probes, 100 ms apart: [`PLACEMENT_PROBES`] jobs (one host
/// pair across two leaves each, both directions: two leaves steer), then
/// as many large-flow digests of new elephants at the leaves. Returns
/// when each phase began (unix ns).
async fn placement_probes(
    topo: &metaroce_topo::Topology,
    p: &Pipeline,
    switches: &[Switch],
    listen: std::net::SocketAddr,
) -> (u64, u64) {
    let unix_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    };
    // Probe i pairs leaf i % 24 with one of the leaves 24-47, a different
    // one for each round of 24: every pair is new (hosts h{leaf}-{k}, two a leaf).
    let pair = |i: usize| (i % 24, 24 + (i % 24 + i / 24) % 24);
    let jobs_from = unix_ns();
    for i in 0..PLACEMENT_PROBES {
        let (la, lb) = pair(i);
        let (a, b) = (&topo.hosts[la * 2], &topo.hosts[lb * 2]);
        let body = format!(
            r#"{{"name": "job-{i}", "pattern": "all-to-all", "hosts": ["{}", "{}"], "bytes": 1000000}}"#,
            a.name, b.name
        );
        let answer = http_post(listen, "/api/v1/jobs", SCHED, &body).await;
        assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let digests_from = unix_ns();
    let digest_id = p.info().digests.id_of(names::LARGE_FLOW_DIGEST).unwrap();
    for i in 0..PLACEMENT_PROBES {
        // Second hosts of the leaves: no job owns that pair.
        let (la, lb) = pair(i);
        let (a, b) = (&topo.hosts[la * 2 + 1], &topo.hosts[lb * 2 + 1]);
        let leaf = a.leaf;
        let port = topo.adjacency(leaf)[0].port;
        let d =
            large_flow(topo.switches[leaf].int_node_id, a.ip, b.ip, 49152, 100 + i as u32, port, 1_000_000);
        switches[leaf].emit_digest(digest_id, d);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (jobs_from, digests_from)
}

/// A large-flow digest as the program raises it (`large_flow_digest_t`).
fn large_flow(
    node: u32,
    src: std::net::Ipv4Addr,
    dst: std::net::Ipv4Addr,
    sport: u16,
    qp: u32,
    port: u16,
    bytes: u32,
) -> p4::P4Data {
    let bits = |v: u128, n: usize| p4::P4Data {
        data: Some(p4::p4_data::Data::Bitstring(v.to_be_bytes()[16 - n..].to_vec())),
    };
    let flow = u128::from(u32::from(src)) << 72
        | u128::from(u32::from(dst)) << 40
        | u128::from(sport) << 24
        | u128::from(qp);
    p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
            members: vec![
                bits(u128::from(node), 4),
                bits(flow, 13),
                bits(u128::from(port), 2),
                bits(u128::from(bytes), 4),
                bits(1000, 4),
                bits(1, 2),
                bits(0, 1),
                bits(1, 6),
            ],
        })),
    }
}

async fn http_post(addr: std::net::SocketAddr, path: &str, token: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else { return String::new() };
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out
}

/// Sequential acknowledged Writes per switch in a make-before-break
/// rewrite until new flowlets take the new weights: the new selector
/// group, then the route's `nhop_group` entry pointed at it.
const FLOOR_PHASES: usize = 2;

/// What the loopback P4Runtime writes alone cost on this machine.
struct Floor {
    switches: usize,
    single: Vec<f64>,
    per_switch: Vec<f64>,
    wave: Vec<f64>,
    /// Process CPU per wave (client and servers), in ms.
    wave_cpu_ms: f64,
}

/// The reaction's floor without the controller: the leaves (the switches a
/// probe rewrites) each write `FLOOR_PHASES` acknowledged Writes one after
/// the other, all at once, as the agents do; and one switch alone.
async fn rpc_floor(topo: &metaroce_topo::Topology, p: &Pipeline) -> Floor {
    use metaroce_p4rt::{Session, SessionConfig};
    use metaroce_pipeline::Entry;
    let leaves: Vec<usize> = (0..47).collect();
    let mut sessions = Vec::new();
    for &s in &leaves {
        let sw = &topo.switches[s];
        let mut cfg = SessionConfig::new(format!("http://{}", sw.p4rt), sw.device_id);
        cfg.election_id = 1000;
        let session = Session::connect(cfg).await.unwrap();
        let _events = session.subscribe().unwrap();
        session.wait_primary().await.unwrap();
        sessions.push((Arc::new(session), _events));
    }
    // A keyless default rewritten: a real Write the server applies (the
    // controller is stopped, so what it holds no longer matters).
    let updates: Vec<Arc<p4::Update>> = leaves
        .iter()
        .map(|&s| {
            let e = Entry::Config { switch_id: topo.switches[s].int_node_id, flowlet_timeout_us: 100 };
            Arc::new(p.update(p4::update::Type::Modify, &e).unwrap())
        })
        .collect();
    let mut single = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        sessions[0].0.write(vec![(*updates[0]).clone()]).await.unwrap();
        single.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (mut per_switch, mut wave) = (Vec::new(), Vec::new());
    let cpu_before = cpu_seconds();
    for _ in 0..20 {
        let t = Instant::now();
        let tasks: Vec<_> = sessions
            .iter()
            .zip(&updates)
            .map(|((s, _), u)| {
                let (s, u) = (s.clone(), u.clone());
                tokio::spawn(async move {
                    for _ in 0..FLOOR_PHASES {
                        s.write(vec![(*u).clone()]).await.unwrap();
                    }
                    t.elapsed().as_secs_f64() * 1e3
                })
            })
            .collect();
        for task in tasks {
            per_switch.push(task.await.unwrap());
        }
        wave.push(t.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for v in [&mut single, &mut per_switch, &mut wave] {
        v.sort_by(f64::total_cmp);
    }
    // The waves' CPU, less the 20 ms pauses between them (idle).
    let wave_cpu_ms = (cpu_seconds() - cpu_before) * 1e3 / 20.0;
    Floor { switches: leaves.len(), single, per_switch, wave, wave_cpu_ms }
}

/// User and system CPU time of this process so far (from /proc; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    // Fields after the command name (which may hold spaces): utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    // Clock ticks are 100 per second on Linux.
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else { return String::new() };
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {VIEW}\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out
}

/// (count, p50 bound, p99 bound) of an OpenMetrics histogram without labels.
fn histogram_quantiles(text: &str, name: &str) -> (u64, f64, f64) {
    let mut buckets: Vec<(f64, u64)> = text
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&format!("{name}_bucket{{le=\""))?;
            let (le, v) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, v.trim().parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last().map_or(0, |b| b.1);
    let q = |f: f64| buckets.iter().find(|b| b.1 as f64 >= f * total as f64).map_or(f64::NAN, |b| b.0);
    (total, q(0.5), q(0.99))
}
