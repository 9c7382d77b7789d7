//! Where cases run: BMv2 (`simple_switch_grpc` on veths, real time) or
//! the simulator's pipeline twin (in process, virtual time). Both hand
//! their [`Observed`] to [`crate::check::check`].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::bmv2::{PacketIo, Tools, Veths};
use crate::case::{Case, Target as CaseTarget};
use crate::check::{check, Observed};
use crate::run::{run_case, Program};

/// A switch implementation the vectors hold to.
pub trait Target {
    fn name(&self) -> &'static str;
    /// Why this target does not run `case`, if it does not.
    fn skips(&self, case: &Case) -> Option<String>;
    /// Plays one case from a fresh switch and returns what it did.
    fn run(&mut self, case: &Case) -> Result<Observed>;
}

/// BMv2 `simple_switch_grpc`: one process per case, data ports on veths.
#[derive(Debug)]
pub struct Bmv2 {
    rt: tokio::runtime::Runtime,
    tools: Tools,
    prog: Program,
    logs: PathBuf,
    // Dropped before the veths they read.
    io: PacketIo,
    veths: Veths,
}

impl Bmv2 {
    /// Creates the veths (root) and loads the program from `build`.
    pub fn new(tools: Tools, build: &Path, logs: &Path) -> Result<Self> {
        let prog = Program::load(build)?;
        std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
        let rt =
            tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
        let veths = Veths::create(&tools.ip)?;
        let io = PacketIo::open(&veths)?;
        Ok(Bmv2 { rt, tools, prog, logs: logs.to_owned(), io, veths })
    }

    /// BMv2's log of a case.
    pub fn log(&self, case: &Case) -> PathBuf {
        self.logs.join(format!("{}.log", case.name))
    }
}

impl Target for Bmv2 {
    fn name(&self) -> &'static str {
        "bmv2"
    }

    fn skips(&self, _case: &Case) -> Option<String> {
        None
    }

    fn run(&mut self, case: &Case) -> Result<Observed> {
        let log = self.log(case);
        self.rt.block_on(run_case(case, &self.tools, &self.veths, &mut self.io, &self.prog, &log))
    }
}

/// The cases a target runs and why it skips the others.
pub fn skip_reason(target: &dyn Target, case: &Case) -> Option<String> {
    match (case.target, target.name()) {
        (CaseTarget::Bmv2, name) if name != "bmv2" => {
            Some("target: bmv2 (relies on BMv2's queue timing)".to_owned())
        }
        _ => target.skips(case),
    }
}

/// The outcome of a run over many cases.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub passed: Vec<String>,
    pub failed: Vec<(String, Vec<String>)>,
    pub skipped: Vec<(String, String)>,
}

/// Runs every case on `target`, printing `pass:`, `FAIL:` (with every
/// difference) and `skip:` lines as it goes.
pub fn run_all(target: &mut dyn Target, cases: &[Case]) -> Tally {
    let mut t = Tally::default();
    for case in cases {
        if let Some(why) = skip_reason(target, case) {
            println!("skip: {} on {} ({why})", case.name, target.name());
            t.skipped.push((case.name.clone(), why));
            continue;
        }
        let failures = match target.run(case) {
            Ok(obs) => check(&case.expect, &obs),
            Err(e) => vec![format!("could not run: {e:#}")],
        };
        if failures.is_empty() {
            println!("pass: {}", case.name);
            t.passed.push(case.name.clone());
        } else {
            println!("FAIL: {} ({}, on {})", case.name, case.file, target.name());
            for f in &failures {
                println!("    {f}");
            }
            t.failed.push((case.name.clone(), failures));
        }
    }
    t
}
