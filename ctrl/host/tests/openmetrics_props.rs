//! The exposition text round-trips whatever the names and values are, and
//! the parser the controller runs on an exporter's answer never panics.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use metaroce_host::openmetrics::{decode, parse, render, Snapshot};
use metaroce_host::sample::{CounterKey, Source};
use proptest::prelude::*;

fn source() -> impl Strategy<Value = Source> {
    prop::sample::select(Source::ALL.to_vec())
}

fn key() -> impl Strategy<Value = CounterKey> {
    // Names with the characters that need escaping in label values.
    ("[a-z0-9_\"\\\\\n ]{1,12}", "[a-z0-9_]{1,8}", 1u32..4, source()).prop_map(
        |(name, device, port, source)| CounterKey {
            device,
            port: source.is_rdma().then_some(port),
            source,
            name,
        },
    )
}

proptest! {
    #[test]
    fn render_then_parse_gives_the_same_counters(
        counters in prop::collection::btree_map(key(), any::<u64>(), 0..20),
        rate in 0.0f64..1e12,
    ) {
        let rates: BTreeMap<CounterKey, f64> = counters.keys().map(|k| (k.clone(), rate)).collect();
        let snap = Snapshot { host: "h\"1".into(), ports: Vec::new(), counters: counters.clone(), rates: rates.clone(), problems: 0 };
        let lines = parse(&render(&snap)).unwrap();
        let (_, _, got_counters, got_rates) = decode(&lines);
        prop_assert_eq!(got_counters, counters);
        prop_assert_eq!(got_rates, rates);
    }

    #[test]
    fn parse_never_panics(text in "(?s).{0,400}") {
        let _ = parse(&text);
    }

    #[test]
    fn parse_never_panics_on_near_valid_lines(
        lines in prop::collection::vec("[a-z_]{1,6}(\\{[a-z]{1,3}=\"[^\"]{0,5}\"?,?\\}?)? ?[0-9a-zNa.e+-]{0,6}", 0..10)
    ) {
        let _ = parse(&lines.join("\n"));
    }
}
