//! Shared by the host tests: fixture roots and a NIC statistics source
//! whose counters the test sets.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use metaroce_host::fixture;
use metaroce_host::netlink::{NicStats, Stats};
use metaroce_host::{NetlinkError, Sampler, Sysfs};

/// Pause and PFC counters per netdev, set by the test.
#[derive(Debug, Default)]
pub struct FakeNic {
    pub pause: Mutex<BTreeMap<String, Stats>>,
    pub pfc: Mutex<BTreeMap<String, Stats>>,
}

impl FakeNic {
    pub fn set_pfc(&self, netdev: &str, prio: u8, tx: u64, rx: u64) {
        let mut m = self.pfc.lock().unwrap_or_else(|e| e.into_inner());
        let s = m.entry(netdev.to_string()).or_default();
        s.insert(format!("tx_pfc_prio{prio}"), tx);
        s.insert(format!("rx_pfc_prio{prio}"), rx);
    }
    pub fn set_pause(&self, netdev: &str, tx: u64, rx: u64) {
        let mut m = self.pause.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(netdev.to_string(), [("tx_pause_frames".into(), tx), ("rx_pause_frames".into(), rx)].into());
    }
}

impl NicStats for FakeNic {
    fn pause(&self, netdev: &str) -> Result<Option<Stats>, NetlinkError> {
        Ok(self.pause.lock().unwrap_or_else(|e| e.into_inner()).get(netdev).cloned())
    }
    fn pfc(&self, netdev: &str) -> Result<Option<Stats>, NetlinkError> {
        Ok(self.pfc.lock().unwrap_or_else(|e| e.into_inner()).get(netdev).cloned())
    }
}

pub const MLX5: &str = "mlx5_0";
pub const MLX5_NETDEV: &str = "enp1s0f0np0";
pub const RXE: &str = "rxe0";
pub const RXE_NETDEV: &str = "eth1";

/// A root with an mlx5 device and a Soft-RoCE device, both at MTU 9000.
pub fn two_devices() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    fixture::write_mlx5(dir.path(), MLX5, MLX5_NETDEV, 9000).expect("mlx5 fixture");
    fixture::write_rxe(dir.path(), RXE, RXE_NETDEV, 9000).expect("rxe fixture");
    dir
}

pub fn sampler(root: &Path, nic: &Arc<FakeNic>) -> Sampler {
    Sampler::new(Sysfs::new(root), nic.clone())
}

pub fn hw(device: &str, name: &str) -> String {
    format!("class/infiniband/{device}/ports/1/hw_counters/{name}")
}
