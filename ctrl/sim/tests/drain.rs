//! metaroce moves a flow only when nothing of it is in flight: on go-back-N
//! NICs it never reorders (failover apart), on generated fabrics and
//! seeds, while flowlets moved at gaps do reorder under PFC.

mod common;

use common::{leaf_spine, run, scenario};
use metaroce_sim::RoutingMode;
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;

/// An incast into h1-1 beside a permutation whose receivers share its
/// leaf: PFC pauses hold packets in the spines for longer than any gap.
fn incast_beside_a_bystander(seed: u64) -> String {
    format!(
        "seed: {seed}
nic: {{ordering: go-back-n}}
control:
  policy: {{hold_up: 200us, step_interval: 200us, hold_down: 2ms}}
jobs:
  - {{name: incast, pattern: incast, target: h1-1, hosts: [h2-1, h2-2, h3-1, h3-2, h4-1, h4-2], size: 512KiB, iterations: 2, compute: 300us}}
  - {{name: bystander, pattern: permutation, hosts: [h2-3, h3-3, h1-2, h1-3], shift: 2, size: 1MiB, chunk: 128KiB, iterations: 2, compute: 300us}}
"
    )
}

#[test]
fn metaroce_never_reorders_where_flowlets_do() {
    let topo = leaf_spine(4, 4, 4, 100);
    let mut flowlet_reordered = 0;
    for seed in 1..=3 {
        let sc = scenario(&topo, &incast_beside_a_bystander(seed));
        let m = run(&topo, &sc, RoutingMode::Metaroce).summary;
        assert!(m.stopped.is_none() && m.unfinished_messages == 0, "seed {seed}");
        assert_eq!(m.out_of_order.packets, 0, "seed {seed}: {:?}", m.out_of_order);
        assert_eq!(m.out_of_order.naks, 0, "seed {seed}");
        let d = m.moves.drain.expect("the drain rule runs on go-back-N NICs");
        assert!(d.fresh > 0, "seed {seed}: flows drain between chunks: {d:?}");
        assert_eq!(d.stale_acks, 0, "seed {seed}: the engine's ACKs are never stale: {d:?}");
        // The controller's steer entries do land (at drained packets).
        assert!(m.moves.landed.as_ref().is_some_and(|l| l.count > 0), "seed {seed}: {:?}", m.moves);
        let f = run(&topo, &sc, RoutingMode::Flowlet).summary;
        flowlet_reordered += f.out_of_order.packets;
        assert_eq!(
            f.out_of_order.packets, f.out_of_order.by_cause["flowlet"],
            "seed {seed}: {:?}",
            f.out_of_order
        );
    }
    assert!(flowlet_reordered > 0, "flowlets re-picked at gaps reorder under PFC");
}

#[test]
fn placed_permutations_on_three_tiers_never_reorder() {
    let topo = gen::fat_tree(&Common::new("ft4", Bandwidth::gbps(100)), 4).unwrap();
    for seed in 1..=3 {
        for announce in [false, true] {
            let sc = scenario(
                &topo,
                &format!(
                    "seed: {seed}
modes: [metaroce]
nic: {{ordering: go-back-n}}
jobs:
  - {{name: p, pattern: permutation, hosts: all, size: 1MiB, chunk: 256KiB, placement: shuffled, iterations: 2, compute: 200us, announce: {announce}}}
"
                ),
            );
            let m = run(&topo, &sc, RoutingMode::Metaroce).summary;
            assert!(m.stopped.is_none(), "seed {seed}");
            assert_eq!(m.out_of_order.packets, 0, "seed {seed} announce {announce}: {:?}", m.out_of_order);
        }
    }
}

/// Issue "Moves that never reorder", item 3: on message-based traffic a
/// decided move lands within one chunk. Each chunk is posted when the one
/// before is acknowledged, so the flow drains at every chunk boundary: a
/// switch forwards at most the rest of the chunk in flight on the old
/// path once the entry is there, never more than one chunk's packets.
#[test]
fn a_move_on_chunked_traffic_lands_within_one_chunk() {
    let fabrics = [
        leaf_spine(4, 4, 4, 100),
        leaf_spine(4, 2, 4, 100),
        gen::fat_tree(&Common::new("ft4", Bandwidth::gbps(100)), 4).unwrap(),
    ];
    // 128 KiB chunks of 4 KiB packets.
    let chunk_pkts = 32;
    let mut landed = 0;
    for topo in &fabrics {
        for seed in 1..=3 {
            let sc = scenario(
                topo,
                &format!(
                    "seed: {seed}
modes: [metaroce]
nic: {{ordering: go-back-n}}
jobs:
  - {{name: p, pattern: permutation, hosts: all, size: 4MiB, chunk: 128KiB, placement: shuffled, iterations: 2, compute: 100us}}
"
                ),
            );
            let m = run(topo, &sc, RoutingMode::Metaroce).summary;
            assert!(m.stopped.is_none() && m.unfinished_messages == 0, "{} seed {seed}", topo.name);
            assert_eq!(m.out_of_order.packets, 0, "{} seed {seed}", topo.name);
            if let Some([_, _, max]) = m.moves.packets_before_landing {
                assert!(max <= chunk_pkts, "{} seed {seed}: {max} packets before a write landed", topo.name);
            }
            landed += m.moves.landed.map_or(0, |d| d.count);
        }
    }
    assert!(landed > 0, "moves were made and landed");
}

#[test]
fn a_failover_still_moves_at_once_and_is_counted_as_one() {
    let topo = leaf_spine(2, 2, 2, 100);
    let sc = scenario(
        &topo,
        "nic: {ordering: go-back-n}
events:
  - {at: 100us, link_down: \"leaf1:3\"}
jobs:
  - {name: p, pattern: permutation, hosts: [h1-1, h1-2, h2-1, h2-2], shift: 2, size: 2MiB}
",
    );
    let m = run(&topo, &sc, RoutingMode::Metaroce).summary;
    assert!(m.stopped.is_none() && m.unfinished_messages == 0);
    let c = &m.out_of_order.by_cause;
    assert_eq!(m.out_of_order.packets, c["failover"] + c["loss"], "{:?}", m.out_of_order);
    assert_eq!(c["steer"] + c["flowlet"], 0, "no planned move reorders: {:?}", m.out_of_order);
}
