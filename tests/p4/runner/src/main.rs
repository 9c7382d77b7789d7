//! `metaroce-p4-vectors [--target bmv2|twin] [--only NAME]... [--cases DIR] [--build DIR]`:
//! loads `tests/p4/cases/` (or DIR) and runs every case on the target.
//! On BMv2 (the default) it needs `simple_switch_grpc`, the compiled
//! program and root, and otherwise prints one line saying what is missing;
//! the simulator's pipeline twin needs only the compiled program's P4Info
//! and skips the cases marked `target: bmv2`.
//! Exit codes: 0 all ran cases passed (or skipped), 1 a case failed, 2 the
//! vectors or the arguments are wrong.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use metaroce_p4_vectors::bmv2::find_tools;
use metaroce_p4_vectors::case::load_dir;
use metaroce_p4_vectors::target::{run_all, Bmv2, Target};
use metaroce_p4_vectors::twin::TwinTarget;

const USAGE: &str =
    "usage: metaroce-p4-vectors [--target bmv2|twin] [--only CASE]... [--cases DIR] [--build DIR]";

fn repo() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    p.canonicalize().unwrap_or(p)
}

fn main() -> ExitCode {
    let repo = repo();
    let mut only = vec![];
    let mut cases_dir = repo.join("tests/p4/cases");
    let mut build = repo.join("p4src/build");
    let mut target = "bmv2".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--only", Some(n)) => only.push(n),
            ("--cases", Some(d)) => cases_dir = d.into(),
            ("--build", Some(d)) => build = d.into(),
            ("--target", Some(t)) if t == "bmv2" || t == "twin" => target = t,
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let cases = match load_dir(&cases_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let cases: Vec<_> = cases.into_iter().filter(|c| only.is_empty() || only.contains(&c.name)).collect();
    if cases.is_empty() {
        eprintln!("error: no case matches {only:?}");
        return ExitCode::from(2);
    }
    if !build.join("main.json").is_file() || !build.join("main.p4info.txtpb").is_file() {
        println!(
            "skip: P4 vectors on {target} (no compiled program: p4src/build/main.json and main.p4info.txtpb; run make p4)"
        );
        return ExitCode::SUCCESS;
    }
    let made: anyhow::Result<Box<dyn Target>> = if target == "twin" {
        TwinTarget::new(&build).map(|t| Box::new(t) as Box<dyn Target>)
    } else if build.join("PENDING").is_file() {
        println!("skip: P4 vectors on BMv2 (p4src/build/ is not p4c's output of p4src/ yet: see p4src/build/PENDING)");
        return ExitCode::SUCCESS;
    } else {
        let tools = match find_tools() {
            Ok(t) => t,
            Err(why) => {
                println!("skip: P4 vectors on BMv2 ({why})");
                return ExitCode::SUCCESS;
            }
        };
        Bmv2::new(tools, &build, &repo.join("target/p4-vectors")).map(|t| Box::new(t) as Box<dyn Target>)
    };
    let mut t = match made {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let tally = run_all(t.as_mut(), &cases);
    println!("{} passed, {} failed, {} skipped", tally.passed.len(), tally.failed.len(), tally.skipped.len());
    if tally.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
