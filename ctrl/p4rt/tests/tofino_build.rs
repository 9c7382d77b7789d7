//! The device config packed from the committed bf-p4c build
//! (`p4src/build/tofino/`: `pipe/tofino.bin`, `pipe/context.json`): it packs
//! and reads back whole, and the same files cut short, paired with another
//! compile's context, or named for another program are refused before
//! anything would be sent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use metaroce_p4rt::tofino::{TofinoConfig, TofinoConfigError};

fn build_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build/tofino")
}

fn committed() -> TofinoConfig {
    TofinoConfig::load_dir(&build_dir(), "main").unwrap()
}

#[test]
fn the_committed_build_packs_and_reads_back() {
    let c = committed();
    let bin = std::fs::read(build_dir().join("pipe/tofino.bin")).unwrap();
    let ctx = std::fs::read(build_dir().join("pipe/context.json")).unwrap();
    assert_eq!(c.tofino_bin, bin);
    assert_eq!(c.context_json, ctx);
    // A real build is megabytes, not a fixture's few hundred bytes.
    assert!(bin.len() > 100_000 && ctx.len() > 100_000, "{} / {}", bin.len(), ctx.len());
    let d = c.device_data().unwrap();
    assert_eq!(&d[..8], &[4, 0, 0, 0, b'm', b'a', b'i', b'n']);
    assert_eq!(&d[8..12], &(bin.len() as u32).to_le_bytes());
    assert_eq!(d.len(), (4 + 4) + (4 + bin.len()) + (4 + ctx.len()));
    assert_eq!(TofinoConfig::decode(&c.encode().unwrap(), "main").unwrap(), c);
}

#[test]
fn a_cut_tofino_bin_is_refused() {
    let whole = committed();
    let n = whole.tofino_bin.len();
    // Inside the header, inside the first blocks, inside the last register
    // write (records are at least 8 bytes after their tag).
    for cut in [0, 3, 10, 100, 1000, n / 2 + 1, n - 5, n - 1] {
        let mut c = whole.clone();
        c.tofino_bin.truncate(cut);
        let err = c.check("main").unwrap_err();
        let ok = if cut == 0 {
            matches!(err, TofinoConfigError::Empty { .. })
        } else {
            matches!(err, TofinoConfigError::Binary { .. })
        };
        assert!(ok, "cut at {cut} of {n}: {err}");
        // Packed and sent anyway, the receiving side refuses it too.
        if cut > 0 {
            let bytes = c.encode().unwrap();
            assert!(TofinoConfig::decode(&bytes, "main").is_err(), "cut at {cut}");
        }
    }
}

#[test]
fn a_cut_context_json_is_refused() {
    let whole = committed();
    for cut in [1, whole.context_json.len() / 2, whole.context_json.len() - 1] {
        let mut c = whole.clone();
        c.context_json.truncate(cut);
        assert!(matches!(c.check("main"), Err(TofinoConfigError::Context(_))), "cut at {cut}");
    }
}

#[test]
fn another_programs_config_is_refused() {
    let c = committed();
    // The build loaded for another program name.
    let err = TofinoConfig::load_dir(&build_dir(), "switch").unwrap_err();
    assert!(matches!(err, TofinoConfigError::OtherContext { .. }), "{err}");
    // Packed for this program, expected as another.
    let err = TofinoConfig::decode(&c.encode().unwrap(), "switch").unwrap_err();
    assert!(matches!(err, TofinoConfigError::OtherProgram { .. }), "{err}");
    // A tofino.bin whose header names another program.
    let mut other = c.clone();
    let at = other.tofino_bin.windows(5).position(|w| w == b"main\0").unwrap();
    assert!(at < 256, "the program name is in the header");
    other.tofino_bin[at..at + 4].copy_from_slice(b"mein");
    let err = other.check("main").unwrap_err();
    assert!(matches!(err, TofinoConfigError::OtherBinary { .. }), "{err}");
    assert!(err.to_string().contains("\"mein\""), "{err}");
}

#[test]
fn a_tofino_bin_with_another_compiles_context_is_refused() {
    let c = committed();
    let mut ctx: serde_json::Value = serde_json::from_slice(&c.context_json).unwrap();
    let run_id = ctx["run_id"].as_str().unwrap().to_owned();
    assert!(
        c.tofino_bin.windows(run_id.len()).any(|w| w == run_id.as_bytes()),
        "the binary carries {run_id}"
    );
    ctx["run_id"] = serde_json::Value::String("0000000000000000".into());
    let mut other = c.clone();
    other.context_json = serde_json::to_vec(&ctx).unwrap();
    let err = other.check("main").unwrap_err();
    assert!(matches!(err, TofinoConfigError::RunIds { .. }), "{err}");
}
