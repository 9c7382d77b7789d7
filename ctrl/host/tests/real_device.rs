//! Reads the machine's own RDMA devices (a NIC or rdma_rxe) when it has
//! any; otherwise says so in one line and passes.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use metaroce_host::doctor::{diagnose, DoctorOptions};
use metaroce_host::netlink::{KernelNicStats, NicStats};
use metaroce_host::{Sampler, Sysfs};

#[test]
fn reads_the_real_rdma_devices() {
    let sysfs = Sysfs::new("/sys");
    let devices = sysfs.devices().unwrap_or_default();
    if devices.is_empty() {
        println!("skipped: no RDMA device or rdma_rxe under /sys/class/infiniband");
        return;
    }
    let s = Sampler::new(sysfs, Arc::new(KernelNicStats)).sample();
    assert_eq!(s.devices, devices);
    assert!(!s.ports.is_empty(), "every RDMA device has a port");
    assert!(s.ports.iter().all(|p| p.state.is_some()), "port state is readable: {:?}", s.problems);
    assert!(s.counters.keys().any(|k| k.source.is_rdma()), "some RDMA counter is readable: {:?}", s.problems);
    let checks = diagnose(&s, &s, std::time::Duration::from_secs(1), &DoctorOptions::default());
    println!("{}", metaroce_host::doctor::render(&checks));
}

/// The netlink requests go to the live kernel and come back as counters,
/// "not supported", or a named error; never a panic or a hang.
#[test]
fn netlink_requests_answer_for_every_netdev() {
    let netdevs = metaroce_host::sysfs::list_dir(std::path::Path::new("/sys/class/net")).unwrap_or_default();
    for n in netdevs.iter().take(8) {
        let pause = KernelNicStats.pause(n);
        let pfc = KernelNicStats.pfc(n);
        println!("{n}: pause {pause:?}, pfc {pfc:?}");
        if let Ok(Some(stats)) = pfc {
            assert_eq!(stats.len(), 16, "8 priorities, tx and rx");
        }
    }
}
