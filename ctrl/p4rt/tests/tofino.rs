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

/// The parts the fixture script packs.
fn sample() -> TofinoConfig {
    let mut tofino_bin: Vec<u8> = (0..=255u8).cycle().take(768).collect();
    tofino_bin.extend_from_slice(&[0x00, 0xff]);
    TofinoConfig {
        program: "main".into(),
        tofino_bin,
        context_json: br#"{"program_name": "main.p4", "schema_version": "1.0"}"#.to_vec(),
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
    assert_eq!(&d[..8], &[4, 0, 0, 0, b'm', b'a', b'i', b'n']);
    assert_eq!(&d[8..12], &770u32.to_le_bytes());
    let ctx = 12 + 770;
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
