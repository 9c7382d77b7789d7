//! L0: a job that announces its senders' queue pairs (`src_qp`) gets
//! the drain rule's `qp_pair` entries at each sender's leaf at once,
//! exact and without any pairing digest, and loses them with the job.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use metaroce_core::{Core, CoreConfig, Mode};
use metaroce_pipeline::Entry;
use serde_json::json;

fn core() -> Core {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/leaf-spine-4x4.yaml");
    let topo = metaroce_topo::load_file(&path).unwrap();
    let mut core = Core::new(topo, CoreConfig::default(), Mode::Act).unwrap();
    core.decide(0);
    core
}

fn pairs_at(core: &Core, switch: &str) -> Vec<Entry> {
    let s = core.topology().switches.iter().position(|x| x.name == switch).unwrap();
    core.plan(s).map(|p| p.pairs.to_vec()).unwrap_or_default()
}

#[test]
fn announced_queue_pairs_are_written_at_the_senders_leaf_and_go_with_the_job() {
    let mut core = core();
    let body = json!({"name": "ring", "bytes": 1048576, "flows": [
        {"src": "h1-1", "dst": "h2-1", "sport": 49152, "qp": 17, "src_qp": 33},
        {"src": "h2-1", "dst": "h1-1", "sport": 49152, "qp": 34, "src_qp": 18},
        {"src": "h3-1", "dst": "h4-1", "sport": 49152, "qp": 40}
    ]});
    core.register_job(0, &body).unwrap();
    core.decide(0);
    let ip = |h: &str| core.topology().hosts.iter().find(|x| x.name == h).unwrap().ip;
    // h1-1 sends to h2-1 with QP 33; h2-1's ACKs come back to it with 33.
    assert_eq!(
        pairs_at(&core, "leaf1"),
        vec![Entry::QpPair { src: ip("h2-1"), dst: ip("h1-1"), ack_qp: 33, data_qp: 17 }]
    );
    assert_eq!(
        pairs_at(&core, "leaf2"),
        vec![Entry::QpPair { src: ip("h1-1"), dst: ip("h2-1"), ack_qp: 18, data_qp: 34 }]
    );
    // A flow without its sender's QP is left to the learning.
    assert!(pairs_at(&core, "leaf3").is_empty());
    assert_eq!(core.pairing().announced_len(), 2);
    core.remove_job("ring").unwrap();
    core.decide(1_000_000);
    assert!(pairs_at(&core, "leaf1").is_empty());
    assert!(pairs_at(&core, "leaf2").is_empty());
    assert!(core.pairing().is_empty());
}
