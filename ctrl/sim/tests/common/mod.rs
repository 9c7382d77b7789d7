//! Helpers shared by the integration tests: generated fabrics and
//! scenarios written inline.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use metaroce_sim::{scenario, ModeRun, RoutingMode, Scenario, SimError};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Routing, Topology};

pub fn leaf_spine(leaves: usize, spines: usize, hosts: usize, gbps: u64) -> Topology {
    gen::leaf_spine(&Common::new("test", Bandwidth::gbps(gbps)), leaves, spines, hosts, 1).unwrap()
}

/// A shipped scenario (`scenarios/NAME`), and its topology's routing.
pub fn shipped(name: &str) -> (scenario::Loaded, Routing) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name);
    let l = scenario::load_file(&path).unwrap_or_else(|e| panic!("{}", e.report()));
    let routing = Routing::compute(&l.topology);
    (l, routing)
}

pub fn scenario(topo: &Topology, yaml: &str) -> Scenario {
    match scenario::load_str(yaml, "test.yaml", topo) {
        Ok(s) => s,
        Err(e) => panic!("{}", e.report()),
    }
}

pub fn run(topo: &Topology, sc: &Scenario, mode: RoutingMode) -> ModeRun {
    let routing = Routing::compute(topo);
    metaroce_sim::run_mode(topo, &routing, sc, mode, &mut |_| {}).unwrap()
}

/// Completion time of job `j` in µs; panics if it did not finish.
pub fn completion(run: &ModeRun, j: usize) -> f64 {
    let s = &run.summary;
    assert!(s.stopped.is_none(), "run stopped: {:?}", s.stopped);
    s.jobs[j].completion_us.unwrap()
}

pub fn wire(bytes: u64, mtu: u64) -> u64 {
    bytes + bytes.div_ceil(mtu) * u64::from(metaroce_sim::ROCE_HEADER_BYTES)
}

/// The problems a scenario has on a 2x2 leaf-spine, as printed; panics if
/// it is accepted or fails some other way.
pub fn problems(yaml: &str) -> String {
    let topo = leaf_spine(2, 2, 2, 100);
    match scenario::load_str(yaml, "bad.yaml", &topo) {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(e @ SimError::Invalid { .. }) => e.report(),
        Err(other) => panic!("unexpected error kind: {other}"),
    }
}
