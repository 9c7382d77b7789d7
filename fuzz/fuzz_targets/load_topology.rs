//! Any bytes given to the topology loader produce a topology or a located
//! error: never a panic, a hang or unbounded memory. Valid results are
//! also routed, since a loaded topology promises to be routable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(topo) = metaroce_topo::load_str(text, "fuzz") {
        let routing = metaroce_topo::Routing::compute(&topo);
        let _ = routing.totals();
    }
});
