//! L0: every target-neutral vector in `tests/p4/cases/` on the simulator's
//! pipeline twin, in virtual time (no BMv2, no root). Cases marked
//! `target: bmv2` (none today) are skipped with a line saying so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use metaroce_p4_vectors::case::{load_dir, Target as CaseTarget};
use metaroce_p4_vectors::target::run_all;
use metaroce_p4_vectors::twin::TwinTarget;

#[test]
fn every_target_neutral_vector_passes_on_the_twin() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = load_dir(&dir.join("../cases")).unwrap_or_else(|e| panic!("{e}"));
    let mut twin = TwinTarget::new(&dir.join("../../../p4src/build")).unwrap_or_else(|e| panic!("{e:#}"));
    let tally = run_all(&mut twin, &cases);
    let neutral = cases.iter().filter(|c| c.target == CaseTarget::Any).count();
    println!(
        "twin: {} passed, {} failed, {} skipped",
        tally.passed.len(),
        tally.failed.len(),
        tally.skipped.len()
    );
    assert!(tally.failed.is_empty(), "failed on the twin: {:#?}", tally.failed);
    assert_eq!(tally.passed.len(), neutral, "every target-neutral case ran");
    assert_eq!(tally.skipped.len(), cases.len() - neutral);
}

#[test]
fn the_queue_cases_run_on_the_twin_too() {
    // The cases with an egress queue (threshold digests, the digest rate
    // limit, ECN marks, a sink that marks CE) are what the closed loop
    // depends on. The twin models a queue by its rate and capacity in
    // virtual time, with the depth a packet leaves behind at dequeue
    // (BMv2's deq_qdepth), so none is BMv2's alone: `--target twin`
    // skips nothing.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases: Vec<_> =
        load_dir(&dir.join("../cases")).unwrap().into_iter().filter(|c| !c.setup.queues.is_empty()).collect();
    assert!(cases.len() >= 5, "the queue cases: {:?}", cases.iter().map(|c| &c.name).collect::<Vec<_>>());
    assert!(cases.iter().all(|c| c.target == CaseTarget::Any), "a queue case is marked for one target");
    let mut twin = TwinTarget::new(&dir.join("../../../p4src/build")).unwrap_or_else(|e| panic!("{e:#}"));
    let tally = run_all(&mut twin, &cases);
    assert!(tally.failed.is_empty(), "failed on the twin: {:#?}", tally.failed);
    assert_eq!(tally.passed.len(), cases.len());
}
