//! The Tofino device config: its bytes match a fixture written without
//! metaroce code (`tests/data/make_tofino_fixture.py`), a truncated one or
//! one for another program is refused, and the in-process server told it
//! is a Tofino accepts only a device config for its program.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{config, data, rig};
use metaroce_p4rt::server::SwitchOptions;
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::tofino::{TofinoConfig, TofinoConfigError, TofinoDeviceConfig};
use metaroce_p4rt::Session;

/// A BSON string element, as bfas writes its header.
fn bson_string(key: &str, value: &str) -> Vec<u8> {
    let mut out = vec![0x02];
    out.extend_from_slice(key.as_bytes());
    out.push(0);
    out.extend_from_slice(&(value.len() as u32 + 1).to_le_bytes());
    out.extend_from_slice(value.as_bytes());
    out.push(0);
    out
}

/// The parts the fixture script packs: a small, whole bfas binary (H, B
/// and R records) and its context.
fn sample() -> TofinoConfig {
    let mut header = bson_string("program_name", "main");
    header.extend(bson_string("run_id", "0123456789abcdef"));
    let mut tofino_bin = vec![0, 0, 0, b'H'];
    tofino_bin.extend_from_slice(&(header.len() as u32 + 5).to_le_bytes());
    tofino_bin.extend(header);
    tofino_bin.push(0);
    tofino_bin.extend_from_slice(&[0, 0, 0, b'B']);
    tofino_bin.extend_from_slice(&0x0200_0000u64.to_le_bytes());
    tofino_bin.extend_from_slice(&32u32.to_le_bytes());
    tofino_bin.extend_from_slice(&192u32.to_le_bytes());
    tofino_bin.extend((0..=255u8).cycle().take(768));
    tofino_bin.extend_from_slice(&[0, 0, 0, b'R']);
    tofino_bin.extend_from_slice(&0x100u32.to_le_bytes());
    tofino_bin.extend_from_slice(&0xffu32.to_le_bytes());
    TofinoConfig {
        program: "main".into(),
        tofino_bin,
        context_json:
            br#"{"program_name": "main.p4", "run_id": "0123456789abcdef", "schema_version": "1.0"}"#.to_vec(),
    }
}

fn fixture() -> Vec<u8> {
    std::fs::read(data("tofino_device_config.bin")).unwrap()
}

#[test]
fn encoding_matches_the_independently_built_fixture() {
    assert_eq!(sample().encode().unwrap(), fixture());
    assert_eq!(TofinoConfig::decode(&fixture(), "main").unwrap(), sample());
}

#[test]
fn device_data_is_three_length_prefixed_parts() {
    let d = sample().device_data().unwrap();
    let bin = sample().tofino_bin.len();
    assert_eq!(&d[..8], &[4, 0, 0, 0, b'm', b'a', b'i', b'n']);
    assert_eq!(&d[8..12], &(bin as u32).to_le_bytes());
    let ctx = 12 + bin;
    assert_eq!(&d[ctx..ctx + 4], &(sample().context_json.len() as u32).to_le_bytes());
    assert_eq!(d.len(), ctx + 4 + sample().context_json.len());
}

#[test]
fn truncated_configs_are_refused() {
    let d = sample().device_data().unwrap();
    for cut in [0, 3, 6, 12, 100, d.len() - 1] {
        let err = TofinoConfig::parse_device_data(&d[..cut]).unwrap_err();
        assert!(matches!(err, TofinoConfigError::Truncated { .. }), "cut at {cut}: {err}");
    }
    let mut long = d.clone();
    long.push(0);
    assert!(matches!(TofinoConfig::parse_device_data(&long), Err(TofinoConfigError::Trailing(1))));
    // A length that runs far past the end (and would overflow an offset).
    let mut huge = d;
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(TofinoConfig::parse_device_data(&huge), Err(TofinoConfigError::Truncated { .. })));
    // The whole message cut short is not a P4DeviceConfig at all.
    let f = fixture();
    assert!(TofinoConfig::decode(&f[..f.len() - 10], "main").is_err());
}

#[test]
fn another_program_is_refused() {
    let err = TofinoConfig::decode(&fixture(), "other").unwrap_err();
    assert!(matches!(err, TofinoConfigError::OtherProgram { .. }), "{err}");
    assert!(err.to_string().contains("\"main\""), "{err}");
    let mut c = sample();
    c.context_json = br#"{"program_name": "switch.p4"}"#.to_vec();
    let err = c.check("main").unwrap_err();
    assert!(matches!(err, TofinoConfigError::OtherContext { .. }), "{err}");
    c.context_json = b"not json".to_vec();
    assert!(matches!(c.check("main"), Err(TofinoConfigError::Context(_))));
}

#[test]
fn a_build_directory_is_read_from_pipe() {
    let dir = std::env::temp_dir().join(format!("metaroce-tofino-{}", std::process::id()));
    let pipe = dir.join("pipe");
    std::fs::create_dir_all(&pipe).unwrap();
    std::fs::write(pipe.join("tofino.bin"), &sample().tofino_bin).unwrap();
    std::fs::write(pipe.join("context.json"), &sample().context_json).unwrap();
    assert_eq!(TofinoConfig::load_dir(&dir, "main").unwrap().encode().unwrap(), fixture());
    std::fs::remove_file(pipe.join("tofino.bin")).unwrap();
    let err = TofinoConfig::load_dir(&dir, "main").unwrap_err();
    assert!(matches!(err, TofinoConfigError::Missing { file: "tofino.bin", .. }), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_tofino_server_takes_only_its_programs_device_config() {
    let r = rig(SwitchOptions { tofino_program: Some("main".into()), ..Default::default() }).await;
    let s = Session::connect(config(&r.addr, 10)).await.unwrap();
    s.wait_primary().await.unwrap();
    let err = s.set_pipeline(&r.info, &Bmv2Json(b"{}".to_vec()), None).await.unwrap_err().to_string();
    assert!(err.contains("Tofino"), "{err}");
    let mut other = sample();
    other.program = "other".into();
    let err = s
        .set_pipeline(&r.info, &TofinoDeviceConfig(other.encode().unwrap()), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("not \"main\""), "{err}");
    s.set_pipeline(&r.info, &TofinoDeviceConfig(fixture()), None).await.unwrap();
}
