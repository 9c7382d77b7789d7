//! Batched table inserts per second through the driver into the
//! in-process P4Runtime server over TCP on 127.0.0.1, and into BMv2 when
//! `simple_switch_grpc` and a compiled program are present. Prints the
//! figures; asserts nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use metaroce_p4rt::entity::{delete, insert};
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::{P4Info, Session, SessionConfig};

const ENTRIES: u32 = 100_000;
const BATCH: usize = 1_000;
const ROUNDS: usize = 3;

fn entries(info: &P4Info) -> Vec<p4::TableEntry> {
    (0..ENTRIES)
        .map(|i| {
            let addr = 0x0a00_0000u32 + i;
            info.table_entry("ipv4_lpm")
                .unwrap()
                .lpm("dst_addr", addr, 32)
                .unwrap()
                .action("set_group", &[("group", ((i % 1000) as u16).into())])
                .unwrap()
                .build()
        })
        .collect()
}

async fn run(session: &Session, info: &P4Info, target: &str) {
    let list = entries(info);
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        let ups: Vec<p4::Update> = list.iter().cloned().map(insert).collect();
        let t = Instant::now();
        session.write_batched(ups, BATCH).await.unwrap();
        best = best.min(t.elapsed());
        let dels: Vec<p4::Update> = list.iter().cloned().map(delete).collect();
        session.write_batched(dels, BATCH).await.unwrap();
    }
    let rate = f64::from(ENTRIES) / best.as_secs_f64();
    println!(
        "p4rt inserts/{target}: {ENTRIES} LPM entries in batches of {BATCH}: best of {ROUNDS} {:.1} ms = {rate:.0} entries/s (target >= 100000)",
        best.as_secs_f64() * 1e3
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let info =
            P4Info::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/test.p4info.txt"))
                .unwrap();
        let switch = Switch::new(SwitchOptions::default());
        let (addr, _task) =
            switch.bind("127.0.0.1:0".parse().unwrap(), std::future::pending()).await.unwrap();
        let session = Session::connect(SessionConfig::new(format!("http://{addr}"), 1)).await.unwrap();
        session.wait_primary().await.unwrap();
        session.set_pipeline(&info, &Bmv2Json(vec![]), None).await.unwrap();
        run(&session, &info, "in-process TCP").await;
        drop(session);
        let memory = Switch::new(SwitchOptions::default());
        let session = Session::connect_with(SessionConfig::new("in-memory", 1), memory.in_memory_channel())
            .await
            .unwrap();
        session.wait_primary().await.unwrap();
        session.set_pipeline(&info, &Bmv2Json(vec![]), None).await.unwrap();
        run(&session, &info, "in-process in-memory").await;
    });
    println!("p4rt inserts/bmv2: skipped: {}", bmv2_missing());
}

/// What is missing for the BMv2 run (the metaroce program is not compiled
/// yet, so there is no device config to load).
fn bmv2_missing() -> String {
    let grpc =
        std::env::var("SIMPLE_SWITCH_GRPC").unwrap_or_else(|_| "/opt/p4/bin/simple_switch_grpc".into());
    if !std::path::Path::new(&grpc).exists() {
        return format!("{grpc} not found (set SIMPLE_SWITCH_GRPC)");
    }
    "no compiled program with the bench table in p4src/build/".into()
}
