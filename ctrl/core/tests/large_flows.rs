//! L0: large-flow reports through the core's one entry point: a report
//! that flags a shared detector slot never adds a flow (a typed note says
//! why), a clean one does and the placement decides at once, and the
//! shared-slot report then refreshes the known flow.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::path::PathBuf;

use metaroce_core::place::LargeFlowReport;
use metaroce_core::{Core, CoreConfig, Input, Mode, NoteKind};

fn core() -> Core {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/mininet-2x2.yaml");
    let topo = metaroce_topo::load_file(&path).unwrap();
    let mut core = Core::new(topo, CoreConfig::default(), Mode::Act).unwrap();
    core.decide(0);
    core
}

fn report(collision: bool) -> Input {
    // h1 → h3, first seen leaving leaf1 by its uplink port 3.
    Input::LargeFlow(LargeFlowReport {
        switch: 0,
        src: Ipv4Addr::new(10, 0, 1, 1),
        dst: Ipv4Addr::new(10, 0, 2, 1),
        sport: 49152,
        qp: 17,
        egress_port: 3,
        bytes: 1_000_000,
        window_ns: 1_000_000,
        collision,
    })
}

#[test]
fn a_shared_slot_never_adds_a_flow_and_a_clean_report_does() {
    let mut core = core();
    let step = core.handle(1_000, &report(true));
    let ignored: Vec<_> = step.notes.iter().filter(|n| n.kind == NoteKind::LargeFlowIgnored).collect();
    assert_eq!(ignored.len(), 1, "{:?}", step.notes);
    assert!(ignored[0].reason.contains("shared detector slot"), "{}", ignored[0].reason);
    assert_eq!(core.placement().flow_count(), 0);
    assert!(!step.ran, "nothing to decide on");

    let step = core.handle(2_000, &report(false));
    assert!(step.ran && step.placement.is_some(), "a new flow is placed at once");
    assert_eq!(core.placement().flow_count(), 1);
    assert!(step.notes.iter().any(|n| n.kind == NoteKind::FlowMove), "{:?}", step.notes);

    let step = core.handle(3_000, &report(true));
    assert!(step.notes.iter().all(|n| n.kind != NoteKind::LargeFlowIgnored), "{:?}", step.notes);
    assert_eq!(core.placement().flow_count(), 1, "it refreshes the known flow");
}
