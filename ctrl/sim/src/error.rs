//! Errors of loading a scenario and of running it.

use std::path::PathBuf;

use metaroce_topo::TopoError;

/// One problem in a scenario file, with where it is: the same type the
/// topology loader reports, so both print alike.
pub use metaroce_topo::Diagnostic;

/// Why a scenario could not be loaded, or a run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot read scenario file {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("scenario {origin} has {} problem{}", diagnostics.len(), if diagnostics.len() == 1 { "" } else { "s" })]
    Invalid { origin: String, diagnostics: Vec<Diagnostic> },
    #[error("topology {} of scenario {origin} did not load", path.display())]
    Topology {
        origin: String,
        path: PathBuf,
        #[source]
        source: TopoError,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SimError {
    /// Every problem on its own line as `origin:line:col: path: message`, so
    /// editors can jump to them; other errors as one line with their causes.
    pub fn report(&self) -> String {
        match self {
            SimError::Invalid { origin, diagnostics } => {
                // `file:line:col: what`, and `file: what` for the whole file.
                let sep = |d: &Diagnostic| if d.pos.is_some() { ":" } else { ": " };
                diagnostics.iter().map(|d| format!("{origin}{}{d}\n", sep(d))).collect()
            }
            SimError::Topology { source, .. } => format!("{self}\n{}", source.report()),
            other => {
                let mut out = other.to_string();
                let mut cause = std::error::Error::source(other);
                while let Some(c) = cause {
                    out.push_str(&format!(": {c}"));
                    cause = c.source();
                }
                out.push('\n');
                out
            }
        }
    }
}
