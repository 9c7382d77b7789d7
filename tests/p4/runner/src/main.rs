//! `metaroce-p4-vectors [--only NAME]... [--cases DIR] [--build DIR]`: loads
//! `tests/p4/cases/` (or DIR), and runs
//! every case on BMv2 `simple_switch_grpc` when it, the compiled program and
//! root are there; otherwise prints one line saying what is missing.
//! Exit codes: 0 all ran cases passed (or skipped), 1 a case failed, 2 the
//! vectors or the arguments are wrong.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use metaroce_p4_vectors::bmv2::{find_tools, PacketIo, Veths};
use metaroce_p4_vectors::case::load_dir;
use metaroce_p4_vectors::check::check;
use metaroce_p4_vectors::run::{run_case, Program};

fn repo() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    p.canonicalize().unwrap_or(p)
}

fn main() -> ExitCode {
    let repo = repo();
    let mut only = vec![];
    let mut cases_dir = repo.join("tests/p4/cases");
    let mut build = repo.join("p4src/build");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--only", Some(n)) => only.push(n),
            ("--cases", Some(d)) => cases_dir = d.into(),
            ("--build", Some(d)) => build = d.into(),
            _ => {
                eprintln!("usage: metaroce-p4-vectors [--only CASE]... [--cases DIR] [--build DIR]");
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
    let tools = match find_tools() {
        Ok(t) => t,
        Err(why) => {
            println!("skip: P4 vectors on BMv2 ({why})");
            return ExitCode::SUCCESS;
        }
    };
    if !build.join("main.json").is_file() || !build.join("main.p4info.txtpb").is_file() {
        println!("skip: P4 vectors on BMv2 (no compiled program: p4src/build/main.json and main.p4info.txtpb; run make p4)");
        return ExitCode::SUCCESS;
    }
    match run_all(&cases, &tools, &build, &repo.join("target/p4-vectors")) {
        Ok((passed, failed)) => {
            println!("{passed} passed, {failed} failed");
            if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_all(
    cases: &[metaroce_p4_vectors::case::Case],
    tools: &metaroce_p4_vectors::bmv2::Tools,
    build: &Path,
    logs: &Path,
) -> anyhow::Result<(usize, usize)> {
    use anyhow::Context;
    let prog = Program::load(build)?;
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let veths = Veths::create(&tools.ip)?;
    let mut io = PacketIo::open(&veths)?;
    let (mut passed, mut failed) = (0, 0);
    for case in cases {
        let log = logs.join(format!("{}.log", case.name));
        let outcome = rt.block_on(run_case(case, tools, &veths, &mut io, &prog, &log));
        let failures = match outcome {
            Ok(obs) => check(&case.expect, &obs),
            Err(e) => vec![format!("could not run: {e:#}")],
        };
        if failures.is_empty() {
            passed += 1;
            println!("pass: {}", case.name);
        } else {
            failed += 1;
            println!("FAIL: {} ({}; BMv2 log {})", case.name, case.file, log.display());
            for f in failures {
                println!("    {f}");
            }
        }
    }
    Ok((passed, failed))
}
