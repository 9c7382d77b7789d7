//! Errors of loading a topology.

use std::fmt;
use std::path::PathBuf;

use crate::yaml::Pos;

/// One problem in a topology file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where in the document, like `links[3].b`; empty for the whole file.
    pub path: String,
    /// Line and column, where the parser knows them.
    pub pos: Option<Pos>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(pos) = self.pos {
            write!(f, "{pos}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Why a topology could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    #[error("cannot read topology file {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("topology file {} is {size} bytes, more than the limit of {limit} bytes", path.display())]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    #[error("topology {origin} has {} problem{}", diagnostics.len(), if diagnostics.len() == 1 { "" } else { "s" })]
    Invalid { origin: String, diagnostics: Vec<Diagnostic> },
}

impl TopoError {
    /// The problems, each as `origin:line:col: path: message`, the way
    /// compilers print them so editors can jump to them.
    pub fn report(&self) -> String {
        match self {
            TopoError::Invalid { origin, diagnostics } => {
                let mut out = String::new();
                for d in diagnostics {
                    out.push_str(origin);
                    // `file:line:col: what`, and `file: what` for the whole file.
                    out.push_str(if d.pos.is_some() { ":" } else { ": " });
                    out.push_str(&d.to_string());
                    out.push('\n');
                }
                out
            }
            other => format!("{other}\n"),
        }
    }
}
