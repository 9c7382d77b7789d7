//! The fabric model every part of metaroce reads: the topology YAML format,
//! its validation, and the valley-free, capacity-weighted next-hop groups
//! computed from it.
//!
//! ```no_run
//! let topo = metaroce_topo::load_file("topologies/mininet-2x2.yaml".as_ref())?;
//! let routing = metaroce_topo::Routing::compute(&topo);
//! # Ok::<(), metaroce_topo::TopoError>(())
//! ```
//!
//! This crate is pure: no I/O beyond reading the file, no clocks, no
//! network. The controller, the simulator and the Mininet launcher all build
//! on it.

mod decode;
pub mod emit;
mod error;
pub mod gen;
mod model;
pub mod render;
pub mod routing;
pub mod spec;
pub mod units;
mod validate;
pub mod yaml;

use std::io::Read;
use std::path::Path;

pub use decode::{MAX_HOSTS, MAX_LINKS, MAX_SWITCHES};
pub use error::{Diagnostic, TopoError};
pub use model::{
    Adjacency, Defaults, Endpoint, Fabric, Host, HostId, Ipv4Net, Link, LinkId, LinkRefError, MacAddr,
    NodeRef, Role, Switch, SwitchId, Topology,
};
pub use routing::{Group, GroupId, Member, NextHop, Route, RouteChange, Routing, RoutingOptions};

/// Largest topology file read, in bytes. A 2,048-switch fabric with all
/// its hosts is a few MiB.
pub const MAX_FILE_BYTES: u64 = 32 << 20;

/// Reads and validates a topology file.
pub fn load_file(path: &Path) -> Result<Topology, TopoError> {
    let io = |source| TopoError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > MAX_FILE_BYTES {
        return Err(TopoError::TooLarge { path: path.to_path_buf(), size, limit: MAX_FILE_BYTES });
    }
    // Read at most one byte past the limit, in case the file grows meanwhile.
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(TopoError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit: MAX_FILE_BYTES,
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| TopoError::Invalid {
        origin: path.display().to_string(),
        diagnostics: vec![Diagnostic {
            path: String::new(),
            pos: None,
            message: format!(
                "file is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        }],
    })?;
    load_str(&text, &path.display().to_string())
}

/// Parses and validates topology text; `origin` names it in errors.
pub fn load_str(text: &str, origin: &str) -> Result<Topology, TopoError> {
    let invalid = |diagnostics| TopoError::Invalid { origin: origin.to_string(), diagnostics };
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(invalid(vec![Diagnostic {
            path: String::new(),
            pos: None,
            message: format!("text is {} bytes, more than the limit of {MAX_FILE_BYTES}", text.len()),
        }]));
    }
    let root = yaml::parse(text).map_err(|e| {
        invalid(vec![Diagnostic { path: String::new(), pos: Some(e.pos), message: e.message }])
    })?;
    let mut diags = decode::Diags::default();
    let raw = decode::topology(&mut diags, &root);
    match validate::assemble(&mut diags, raw) {
        Some(topo) if diags.0.is_empty() => Ok(topo),
        _ => Err(invalid(diags.0)),
    }
}
