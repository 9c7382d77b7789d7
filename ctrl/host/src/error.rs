//! Errors of the host side, each naming the file, device or address
//! concerned. `Display` never repeats the source error.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Reading one sysfs file or directory.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("permission denied reading {} (run as root, or give the exporter read access)", path.display())]
    Permission {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {content:?} is not a counter (expected a whole number)", path.display())]
    Garbage { path: PathBuf, content: String },
}

impl ReadError {
    /// The file concerned.
    pub fn path(&self) -> &std::path::Path {
        match self {
            ReadError::Io { path, .. }
            | ReadError::Permission { path, .. }
            | ReadError::Garbage { path, .. } => path,
        }
    }
}

/// A netlink request to the kernel.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("netlink socket for {what}")]
    Socket {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the kernel refused the {what} request (errno {errno})")]
    Kernel { what: &'static str, errno: i32 },
    #[error("malformed {what} reply from the kernel")]
    Malformed { what: &'static str },
}

/// Running the exporter.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot listen on {addr} (is another exporter running there? pick another --listen)")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot append CSV to {}", path.display())]
    Csv {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the metrics server stopped")]
    Serve(#[source] std::io::Error),
}

/// Scraping one exporter.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("exporter address {addr:?} is not host:port")]
    Address { addr: String },
    #[error("cannot connect to exporter {addr}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("exporter {addr} did not answer within {after:?}")]
    Timeout { addr: String, after: Duration },
    #[error("reading from exporter {addr}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("exporter {addr} sent more than {limit} bytes")]
    TooLarge { addr: String, limit: usize },
    #[error("exporter {addr} answered {status:?}, not 200")]
    Status { addr: String, status: String },
    #[error("exporter {addr}, line {line}: {problem}")]
    Parse { addr: String, line: usize, problem: crate::openmetrics::LineError },
}
