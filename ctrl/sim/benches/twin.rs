//! `make bench`: prints what the pipeline twin costs per packet (ingress
//! and egress on headers, as the fabric simulator calls them; and bytes in,
//! bytes out). Figures only; nothing here asserts on timing.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Instant;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::{Session, SessionConfig};
use metaroce_pipeline::{Entry, Pipeline, RouteTarget};
use metaroce_sim::twin::{Bth, Ethernet, Headers, Ipv4, Twin, Udp, Verdict, L4};

const ROUTES: u16 = 64;
const PACKETS: u32 = 200_000;

/// A leaf: `ROUTES` /24 routes, each to a group of 4 uplinks with weights.
fn entries() -> Vec<Vec<Entry>> {
    let mac = [2, 0, 0, 0, 0, 1];
    let mut nhops = vec![Entry::Config { switch_id: 1, flowlet_timeout_us: 50_000 }];
    let mut members = vec![];
    for port in 1..=4u16 {
        nhops.push(Entry::Nhop { id: port, port, src_mac: mac, dst_mac: mac });
        members.push(Entry::Member { id: u32::from(port), nhop: port });
        nhops.push(Entry::EgressPort {
            port,
            edge: false,
            mtu: 0,
            queue_high: 40,
            queue_low: 10,
            ecn_threshold: 20,
        });
    }
    let mut groups = vec![];
    let mut routes = vec![];
    for g in 1..=ROUTES {
        groups.push(Entry::Group { id: u32::from(g), members: vec![(1, 3), (2, 1), (3, 2), (4, 2)] });
        groups.push(Entry::GroupEntry { id: g, group: u32::from(g) });
        let prefix = Ipv4Addr::new(10, (g >> 8) as u8, g as u8, 0);
        routes.push(Entry::Route { prefix, len: 24, target: RouteTarget::Group(g) });
    }
    vec![nhops, members, groups, routes]
}

fn packet(i: u32) -> Headers {
    let dst = u32::from(Ipv4Addr::new(10, 0, (i % u32::from(ROUTES)) as u8 + 1, 1));
    Headers {
        eth: Ethernet { dst: [2, 0, 0, 0, 0, 1], src: [2, 0, 0, 0, 1, 1], ether_type: 0x0800 },
        ipv4: Some(Ipv4 {
            version: 4,
            ihl: 5,
            total_len: 1064,
            ttl: 64,
            protocol: 17,
            src: u32::from(Ipv4Addr::new(10, 9, 0, 1)),
            dst,
            ..Default::default()
        }),
        l4: Some(L4::Udp(Udp {
            src_port: 49152 + (i % 4096) as u16,
            dst_port: 4791,
            len: 1044,
            checksum: 0,
        })),
        bth: Some(Bth { head: 0x0400_ffff, dest_qp: i % 64, ..Default::default() }),
        // The fabric simulator carries no payload bytes.
        payload: vec![],
        ..Default::default()
    }
}

async fn twin() -> Option<Twin> {
    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    let p = Pipeline::load(&build.join("main.p4info.txtpb"), &build.join("main.json"))
        .map_err(|e| eprintln!("bench: {e}"))
        .ok()?;
    let sw = Switch::new(SwitchOptions::default());
    let s = Session::connect_with(SessionConfig::new("bench", 1), sw.in_memory_channel()).await.ok()?;
    s.wait_primary().await.ok()?;
    s.set_pipeline(p.info(), &Bmv2Json(p.device_config().to_vec()), None).await.ok()?;
    for batch in entries() {
        let ups: Vec<p4::Update> =
            batch.iter().filter_map(|e| p.update(p4::update::Type::Insert, e).ok()).collect();
        if let Err(e) = s.write(ups).await {
            eprintln!("bench: setup: {e}");
            return None;
        }
    }
    Twin::new(&p, sw).map_err(|e| eprintln!("bench: {e}")).ok()
}

fn report(label: &str, n: u32, t0: Instant) {
    let s = t0.elapsed().as_secs_f64();
    println!("twin {label}: {:.0} packets/s ({:.2} us per packet)", f64::from(n) / s, s * 1e6 / f64::from(n));
}

fn run(t: &mut Twin) {
    let headers: Vec<Headers> = (0..PACKETS).map(packet).collect();
    let t0 = Instant::now();
    for (i, h) in headers.iter().enumerate() {
        let mut h = h.clone();
        let now = 1_000_000 + i as u64;
        if let Ok(Verdict::Forward { port }) = t.ingress(5, &mut h, now) {
            let _ = t.egress(port, &mut h, (i % 50) as u32, now + 2);
        }
    }
    report("ingress + egress on headers (64 routes, 4-way weighted groups, flowlets)", PACKETS, t0);
    let frames: Vec<Vec<u8>> = headers
        .iter()
        .take(50_000)
        .map(|h| {
            let mut h = h.clone();
            h.payload = vec![0; 1024];
            h.deparse()
        })
        .collect();
    let t0 = Instant::now();
    for (i, f) in frames.iter().enumerate() {
        let _ = t.process(5, f, 2_000_000 + i as u64);
    }
    report("process, 1 KiB frames in and out", frames.len() as u32, t0);
}

fn main() {
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return eprintln!("bench: tokio: {e}"),
    };
    let Some(mut t) = rt.block_on(twin()) else { return };
    // Digests go through the server, whose timers need the runtime.
    let _guard = rt.enter();
    run(&mut t);
}
