//! Reading the kernel's RDMA and netdev files under a sysfs root.
//!
//! The root is `/sys` on a host and a fixture directory in tests
//! (`--sysfs-root`); every path below is `<root>/class/...`. Nothing here
//! fails as a whole: each unreadable or garbled file is returned as a
//! [`ReadError`] naming it, and the rest is still read.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::ReadError;

/// One GID table entry of a port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gid {
    pub index: u32,
    pub gid: String,
    /// `RoCE v2`, `IB/RoCE v1`, ...
    pub kind: String,
    pub netdev: Option<String>,
}

impl Gid {
    /// A RoCE v2 GID in use (the all-zero GID marks an empty slot).
    pub fn is_roce_v2(&self) -> bool {
        self.kind.trim().eq_ignore_ascii_case("RoCE v2") && self.gid.chars().any(|c| c != '0' && c != ':')
    }
}

/// A sysfs tree rooted somewhere.
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn ib_dir(&self) -> PathBuf {
        self.root.join("class/infiniband")
    }

    pub fn port_dir(&self, device: &str, port: u32) -> PathBuf {
        self.ib_dir().join(device).join("ports").join(port.to_string())
    }

    pub fn net_dir(&self, netdev: &str) -> PathBuf {
        self.root.join("class/net").join(netdev)
    }

    /// RDMA device names, sorted; an absent `class/infiniband` is no devices.
    pub fn devices(&self) -> Result<Vec<String>, ReadError> {
        list_dir(&self.ib_dir())
    }

    /// Port numbers of a device, ascending.
    pub fn ports(&self, device: &str) -> Result<Vec<u32>, ReadError> {
        let mut ports: Vec<u32> = list_dir(&self.ib_dir().join(device).join("ports"))?
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        ports.sort_unstable();
        Ok(ports)
    }

    /// The GID table; unset entries (which the kernel refuses to read) are skipped.
    pub fn gids(&self, device: &str, port: u32) -> Vec<Gid> {
        let dir = self.port_dir(device, port);
        let Ok(names) = list_dir(&dir.join("gids")) else { return Vec::new() };
        let mut out: Vec<Gid> = names
            .iter()
            .filter_map(|n| {
                let index: u32 = n.parse().ok()?;
                let gid = read_text(&dir.join("gids").join(n)).ok()?;
                // Empty slots read as all zeros; skip their attribute files
                // (mlx5 has 256 slots per port, read on every poll).
                if !gid.chars().any(|c| c != '0' && c != ':') {
                    return None;
                }
                let kind = read_text(&dir.join("gid_attrs/types").join(n)).ok()?;
                let netdev = read_text(&dir.join("gid_attrs/ndevs").join(n)).ok().filter(|s| !s.is_empty());
                Some(Gid { index, gid, kind, netdev })
            })
            .collect();
        out.sort_by_key(|g| g.index);
        out
    }

    /// The netdev a port runs over: from its GID table, else the PCI
    /// device's `net/` directory (mlx5), else rxe's `parent` file.
    pub fn port_netdev(&self, device: &str, gids: &[Gid]) -> Option<String> {
        if let Some(n) = gids.iter().find_map(|g| g.netdev.clone()) {
            return Some(n);
        }
        let dev = self.ib_dir().join(device);
        if let Some(n) = list_dir(&dev.join("device/net")).ok().and_then(|v| v.into_iter().next()) {
            return Some(n);
        }
        read_text(&dev.join("parent")).ok().filter(|s| !s.is_empty())
    }

    /// Every counter file in `dir`, with the files that could not be read.
    /// `Ok` with nothing when the directory does not exist.
    pub fn counters(&self, dir: &Path) -> Result<(BTreeMap<String, u64>, Vec<ReadError>), ReadError> {
        let mut values = BTreeMap::new();
        let mut errors = Vec::new();
        for name in list_dir(dir)? {
            let path = dir.join(&name);
            match read_counter(&path) {
                Ok(v) => {
                    values.insert(name, v);
                }
                Err(e) => errors.push(e),
            }
        }
        Ok((values, errors))
    }
}

/// Entry names of a directory, sorted; a missing directory is empty.
pub fn list_dir(dir: &Path) -> Result<Vec<String>, ReadError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir, e)),
    };
    let mut names: Vec<String> =
        entries.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect();
    names.sort();
    Ok(names)
}

/// A file's text, trimmed.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).map_err(|e| io_error(path, e))
}

/// A counter file: one unsigned decimal number.
pub fn read_counter(path: &Path) -> Result<u64, ReadError> {
    let text = read_text(path)?;
    text.parse().map_err(|_| ReadError::Garbage {
        path: path.to_path_buf(),
        content: text.chars().take(40).collect(),
    })
}

fn io_error(path: &Path, source: std::io::Error) -> ReadError {
    if source.kind() == ErrorKind::PermissionDenied {
        return ReadError::Permission { path: path.to_path_buf(), source };
    }
    ReadError::Io { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_name_the_file_and_the_fix() {
        let e = io_error(Path::new("/sys/x/np_cnp_sent"), std::io::Error::from(ErrorKind::PermissionDenied));
        assert_eq!(
            e.to_string(),
            "permission denied reading /sys/x/np_cnp_sent (run as root, or give the exporter read access)"
        );
        let e = io_error(Path::new("/sys/y"), std::io::Error::from(ErrorKind::InvalidInput));
        assert_eq!(e.to_string(), "cannot read /sys/y");
    }
}
