//! L0: every vector file in `tests/p4/cases/` loads, every packet in it
//! builds, and the schema's checks catch what they should. Runs
//! everywhere; the BMv2 run is the `metaroce-p4-vectors` binary
//! (`make test-p4-vectors`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use metaroce_p4_vectors::case::{load_dir, Action};
use metaroce_p4_vectors::check::{check, Observed, Sent};

fn cases_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases")
}

#[test]
fn every_vector_loads_and_builds() {
    let cases = load_dir(&cases_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert!(cases.len() >= 10, "only {} cases", cases.len());
    for c in &cases {
        for s in &c.steps {
            if let Action::Send { packet, repeat, .. } = &s.action {
                let base = packet.written();
                for i in 0..repeat.count {
                    packet.build(&repeat.overrides(i, &base)).unwrap_or_else(|e| panic!("{}: {e}", c.name));
                }
            }
        }
        // An empty observation fails every case that expects something.
        let expects_something = !c.expect.outputs.is_empty()
            || !c.expect.digests.is_empty()
            || c.expect.counters.iter().any(|k| !k.packets.contains(0))
            || !c.expect.registers.is_empty();
        assert!(expects_something, "{} expects nothing checkable", c.name);
        assert!(!check(&c.expect, &Observed::default()).is_empty(), "{} passes with no observation", c.name);
    }
}

#[test]
fn a_case_passes_on_its_own_expected_bytes_and_fails_on_a_changed_byte() {
    let cases = load_dir(&cases_dir()).unwrap();
    let c = cases.iter().find(|c| c.name == "forward_udp_to_host").expect("forward_udp_to_host");
    let out = &c.expect.outputs[0];
    let built = out.packet.build(&BTreeMap::new()).unwrap();
    let mut obs = Observed {
        outputs: vec![Sent { port: 1, bytes: built.bytes.clone(), meta: vec![] }],
        ..Default::default()
    };
    for k in &c.expect.counters {
        for i in &k.index {
            obs.counters.insert((k.name.clone(), *i), 0);
        }
    }
    assert_eq!(check(&c.expect, &obs), Vec::<String>::new());
    // IPv4 checksum of the expected packet is right: summing the header gives 0.
    assert_eq!(metaroce_p4_vectors::packet::csum16(&built.bytes[14..34]), 0);
    obs.outputs[0].bytes[22] ^= 1; // TTL
    let f = check(&c.expect, &obs);
    assert!(f.iter().any(|m| m.contains("ipv4.ttl")), "{f:?}");
    obs.outputs[0].bytes[22] ^= 1;
    obs.outputs[0].port = 2;
    assert!(!check(&c.expect, &obs).is_empty());
}
