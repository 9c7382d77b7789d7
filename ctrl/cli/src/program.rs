//! Which P4 program the controller pushes and `sim serve` runs: the v1model
//! build compiled into the binary, unless files are named with
//! `--p4info`/`--device-config` or `METAROCE_P4INFO`/`METAROCE_DEVICE_CONFIG`.
//! A Tofino build is always read from files.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use metaroce_pipeline::{builtin, Pipeline, PipelineError};

use crate::Exit;

/// The program arguments of the controller's commands.
#[derive(Debug, Args)]
pub struct ProgramArgs {
    /// P4Info of the program (text or binary); its architecture (v1model or tna) sets the target
    /// and its units. Give it with --device-config, from the same build [default: the v1model
    /// program built into this binary; with --tofino p4src/build/tofino/main.p4info.txtpb].
    #[arg(long, env = "METAROCE_P4INFO", value_name = "FILE")]
    pub p4info: Option<PathBuf>,
    /// Target device config: BMv2 JSON, or for Tofino a bf-p4c output directory (tofino.bin,
    /// context.json) or a packed p4.tmp.P4DeviceConfig [default: the built-in program's BMv2
    /// JSON; with --tofino p4src/build/tofino].
    #[arg(long, env = "METAROCE_DEVICE_CONFIG", value_name = "PATH")]
    pub device_config: Option<PathBuf>,
    /// Load the Tofino build (p4src/build/tofino/ unless --p4info/--device-config say where)
    /// instead of the BMv2 one: the device config is packed for the SDE's P4Runtime server
    /// (program name, tofino.bin, context.json).
    #[arg(long)]
    pub tofino: bool,
}

/// The program arguments of `sim serve`, whose switches run the v1model
/// program only.
#[derive(Debug, Args)]
pub struct ServeProgramArgs {
    /// P4Info the switches run; a controller must push the same program. Give it with
    /// --device-config [default: the v1model program built into this binary].
    #[arg(long, env = "METAROCE_P4INFO", value_name = "FILE")]
    pub p4info: Option<PathBuf>,
    /// BMv2 JSON of the same build as --p4info [default: the built-in program's].
    #[arg(long, env = "METAROCE_DEVICE_CONFIG", value_name = "FILE")]
    pub device_config: Option<PathBuf>,
}

/// Where the program comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Builtin,
    Files { p4info: PathBuf, device_config: PathBuf },
}

impl Source {
    /// The program named by the arguments. A P4Info without its device
    /// config (or the reverse) is refused for v1model: pairing one file
    /// with the other half of the built-in program could push a BMv2 JSON
    /// that does not match the P4Info.
    pub fn of(
        p4info: Option<PathBuf>,
        device_config: Option<PathBuf>,
        tofino: bool,
    ) -> Result<Source, String> {
        if tofino {
            let dir = PathBuf::from("p4src/build/tofino");
            return Ok(Source::Files {
                p4info: p4info.unwrap_or_else(|| dir.join("main.p4info.txtpb")),
                device_config: device_config.unwrap_or(dir),
            });
        }
        match (p4info, device_config) {
            (None, None) => Ok(Source::Builtin),
            (Some(p4info), Some(device_config)) => Ok(Source::Files { p4info, device_config }),
            (Some(_), None) | (None, Some(_)) => {
                Err("--p4info and --device-config (or METAROCE_P4INFO and METAROCE_DEVICE_CONFIG) name one \
                 build together: give both, or neither for the v1model program built into this binary"
                    .into())
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::Builtin => builtin::NAME.to_string(),
            Source::Files { p4info, device_config } => {
                format!("{}, {}", p4info.display(), device_config.display())
            }
        }
    }
}

impl ProgramArgs {
    pub fn source(&self) -> Result<Source, String> {
        Source::of(self.p4info.clone(), self.device_config.clone(), self.tofino)
    }
}

impl ServeProgramArgs {
    pub fn source(&self) -> Result<Source, String> {
        Source::of(self.p4info.clone(), self.device_config.clone(), false)
    }
}

/// Loads and checks the program, or prints why not and gives the exit
/// code: 2 for arguments that do not go together, 3 for a file that
/// cannot be read, 1 for a program that does not fit.
pub fn load(source: Result<Source, String>) -> Result<Arc<Pipeline>, Exit> {
    use PipelineError as E;
    let source = source.map_err(|e| {
        eprintln!("error: {e}");
        Exit::Usage
    })?;
    let loaded = match &source {
        Source::Builtin => Pipeline::builtin(),
        Source::Files { p4info, device_config } => Pipeline::load(p4info, device_config),
    };
    let chain = |e: PipelineError| {
        anyhow::Error::new(e).chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": ")
    };
    match loaded {
        Ok(p) => Ok(Arc::new(p)),
        Err(e @ (E::P4Info(metaroce_p4rt::P4InfoError::Io { .. }) | E::DeviceConfig { .. })) => {
            eprintln!(
                "error: cannot load the program ({}): {}; pass --p4info and --device-config \
                 (or set METAROCE_P4INFO and METAROCE_DEVICE_CONFIG), or neither for the built-in program",
                source.describe(),
                chain(e)
            );
            Err(Exit::Failure)
        }
        Err(e @ E::Mismatch { .. }) => {
            eprintln!("error: {} does not fit this controller: {e}", source.describe());
            Err(Exit::Invalid)
        }
        // Refused before anything is written to a switch.
        Err(e) => {
            eprintln!("error: {}: {}", source.describe(), chain(e));
            Err(Exit::Invalid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_program_is_the_default_and_files_come_in_pairs() {
        assert_eq!(Source::of(None, None, false), Ok(Source::Builtin));
        let (p, d) = (PathBuf::from("a.txtpb"), PathBuf::from("a.json"));
        assert_eq!(
            Source::of(Some(p.clone()), Some(d.clone()), false),
            Ok(Source::Files { p4info: p.clone(), device_config: d.clone() })
        );
        for (p, d) in [(Some(p), None), (None, Some(d))] {
            let e = Source::of(p, d, false).unwrap_err();
            assert!(e.contains("give both"), "{e}");
        }
        // Tofino is never built in.
        let Ok(Source::Files { p4info, device_config }) = Source::of(None, None, true) else {
            panic!("tofino needs files")
        };
        assert!(p4info.ends_with("tofino/main.p4info.txtpb") && device_config.ends_with("tofino"));
        assert!(load(Ok(Source::Builtin)).is_ok());
    }
}
