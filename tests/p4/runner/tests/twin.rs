//! L0: every target-neutral vector in `tests/p4/cases/` on the simulator's
//! pipeline twin, in virtual time (no BMv2, no root). Cases marked
//! `target: bmv2` are skipped with a line saying so.

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
fn the_twins_queue_model_also_passes_the_bmv2_queue_cases() {
    // Cases marked `target: bmv2` rely on BMv2's egress queue timing. The
    // twin models a queue by its rate and capacity in virtual time, with
    // the depth a packet leaves behind at dequeue (BMv2's deq_qdepth), and
    // is held to those cases here as well: their ranges are the behaviour
    // both share.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cases: Vec<_> = load_dir(&dir.join("../cases"))
        .unwrap()
        .into_iter()
        .filter(|c| c.target == CaseTarget::Bmv2)
        .collect();
    assert!(!cases.is_empty(), "no case is marked target: bmv2");
    for c in &mut cases {
        c.target = CaseTarget::Any;
    }
    let mut twin = TwinTarget::new(&dir.join("../../../p4src/build")).unwrap_or_else(|e| panic!("{e:#}"));
    let tally = run_all(&mut twin, &cases);
    assert!(tally.failed.is_empty(), "failed on the twin: {:#?}", tally.failed);
    assert_eq!(tally.passed.len(), cases.len());
}
