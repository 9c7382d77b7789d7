//! L3: the driver against BMv2's P4Runtime server (`simple_switch_grpc`)
//! with a compiled program. Skips, saying what is missing, where BMv2 or
//! the program is absent. Program-independent: pipeline push with cookie,
//! wildcard reads, and register reads through the Thrift fallback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::session::{Bmv2Json, PipelineOutcome};
use metaroce_p4rt::thrift::ThriftConfig;
use metaroce_p4rt::{P4Info, Session, SessionConfig};

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn binary() -> Option<PathBuf> {
    let p = PathBuf::from(
        std::env::var("SIMPLE_SWITCH_GRPC").unwrap_or_else(|_| "/opt/p4/bin/simple_switch_grpc".into()),
    );
    p.exists().then_some(p)
}

/// `(p4info, bmv2 json)` from `$METAROCE_P4INFO`/`$METAROCE_BMV2_JSON`
/// or the first pair in `p4src/build/`.
fn program() -> Option<(PathBuf, PathBuf)> {
    if let (Ok(i), Ok(j)) = (std::env::var("METAROCE_P4INFO"), std::env::var("METAROCE_BMV2_JSON")) {
        return Some((i.into(), j.into()));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir).ok()?.filter_map(|e| Some(e.ok()?.path())).collect();
    let info = files.iter().find(|f| f.to_string_lossy().ends_with(".p4info.txt"))?.clone();
    let json = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "json") && !f.to_string_lossy().contains("p4info"))?
        .clone();
    Some((info, json))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn bmv2_pipeline_reads_and_register_fallback() {
    let Some(bin) = binary() else {
        println!("skipped: simple_switch_grpc not found (set SIMPLE_SWITCH_GRPC)");
        return;
    };
    let Some((info_path, json_path)) = program() else {
        println!("skipped: no compiled program in p4src/build/ (set METAROCE_P4INFO and METAROCE_BMV2_JSON)");
        return;
    };
    let (grpc, thrift) = (free_port(), free_port());
    let _bmv2 = Kill(
        Command::new(bin)
            .args([
                "--no-p4",
                "--device-id",
                "1",
                "--thrift-port",
                &thrift.to_string(),
                "--",
                "--grpc-server-addr",
            ])
            .arg(format!("127.0.0.1:{grpc}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let info = P4Info::load(&info_path).unwrap();
    let json = std::fs::read(&json_path).unwrap();
    let mut cfg = SessionConfig::new(format!("http://127.0.0.1:{grpc}"), 1);
    cfg.connect_attempts = 40;
    cfg.backoff_max = Duration::from_millis(250);
    let s = Session::connect(cfg)
        .await
        .unwrap()
        .with_thrift(ThriftConfig::new(format!("127.0.0.1:{thrift}").parse().unwrap()));
    s.wait_primary().await.unwrap();
    assert_eq!(s.set_pipeline(&info, &Bmv2Json(json.clone()), None).await.unwrap(), PipelineOutcome::Pushed);
    assert_eq!(
        s.set_pipeline(&info, &Bmv2Json(json), None).await.unwrap(),
        PipelineOutcome::AlreadyInstalled
    );
    let entries = s.read(vec![p4::TableEntry::default().into()]).await.unwrap();
    println!("bmv2: {} table entries after push", entries.len());
    let first = info.registers.iter().next().and_then(|r| r.preamble.as_ref()).map(|p| p.name.clone());
    if let Some(name) = first {
        s.write_register(&info, &name, Some(0), 1).await.unwrap();
        assert_eq!(s.read_register(&info, &name, Some(0)).await.unwrap(), vec![(0, 1)]);
    }
}
