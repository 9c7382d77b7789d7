//! The sampler, collector and doctor against fixture sysfs trees for mlx5
//! and Soft-RoCE: counters and netdevs found, wrap, hot-plug, a missing
//! device, a counter that vanishes mid-run, and garbage in a counter file.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use metaroce_host::doctor::{diagnose, DoctorOptions, Status};
use metaroce_host::fixture::{self, MLX5_COUNTERS, MLX5_HW_COUNTERS, RXE_HW_COUNTERS};
use metaroce_host::openmetrics::render;
use metaroce_host::sample::{CounterKey, Source};
use metaroce_host::Collector;

fn key(device: &str, name: &str) -> CounterKey {
    CounterKey { device: device.into(), port: Some(1), source: Source::IbHwCounters, name: name.into() }
}

#[test]
fn reads_mlx5_and_rxe_fixtures() {
    let root = two_devices();
    let nic = Arc::new(FakeNic::default());
    let s = sampler(root.path(), &nic).sample();
    assert_eq!(s.devices, vec![MLX5.to_string(), RXE.to_string()]);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert!(s.ports.iter().all(|p| p.active()));
    let netdevs: Vec<_> = s.ports.iter().map(|p| p.netdev.clone().unwrap_or_default()).collect();
    assert_eq!(netdevs, vec![MLX5_NETDEV, RXE_NETDEV]);
    let slots: Vec<u32> = s.ports[0].gids.iter().map(|g| g.index).collect();
    assert_eq!(slots, vec![0, 1, 2, 3], "the empty slot 4 is skipped");
    let count =
        |dev: &str, src: Source| s.counters.keys().filter(|k| k.device == dev && k.source == src).count();
    assert_eq!(count(MLX5, Source::IbCounters), MLX5_COUNTERS.len());
    assert_eq!(count(MLX5, Source::IbHwCounters), MLX5_HW_COUNTERS.len());
    assert_eq!(count(RXE, Source::IbCounters), 0, "Soft-RoCE has no counters/ directory");
    assert_eq!(count(RXE, Source::IbHwCounters), RXE_HW_COUNTERS.len());
    assert!(count(MLX5_NETDEV, Source::NetStatistics) > 0);
    assert_eq!(s.netdev(MLX5_NETDEV).map(|n| n.ecn.len()), Some(2));
    assert_eq!(s.netdev(RXE_NETDEV).map(|n| n.ecn.len()), Some(0));
}

#[test]
fn rxe_netdev_from_parent_when_gids_name_none() {
    let root = tempfile::tempdir().unwrap();
    fixture::write_rxe(root.path(), RXE, RXE_NETDEV, 1500).unwrap();
    std::fs::remove_dir_all(root.path().join("class/infiniband/rxe0/ports/1/gid_attrs/ndevs")).unwrap();
    let s = sampler(root.path(), &Arc::new(FakeNic::default())).sample();
    assert_eq!(s.ports[0].netdev.as_deref(), Some(RXE_NETDEV));
}

#[test]
fn rates_survive_a_32_bit_wrap() {
    let root = two_devices();
    let nic = Arc::new(FakeNic::default());
    let mut c = Collector::new(sampler(root.path(), &nic), "h1");
    fixture::set(root.path(), &hw(MLX5, "np_cnp_sent"), u64::from(u32::MAX) - 9).unwrap();
    c.poll_at(Duration::from_secs(1));
    fixture::set(root.path(), &hw(MLX5, "np_cnp_sent"), 30).unwrap();
    let snap = c.poll_at(Duration::from_secs(3));
    assert_eq!(snap.rates.get(&key(MLX5, "np_cnp_sent")), Some(&20.0), "40 counts over 2 s");
    assert!(snap.rates.values().all(|r| *r >= 0.0));
}

#[test]
fn missing_device_is_no_devices_not_an_error() {
    let root = tempfile::tempdir().unwrap();
    let nic = Arc::new(FakeNic::default());
    let mut c = Collector::new(sampler(root.path(), &nic), "h1");
    let snap = c.poll_at(Duration::from_secs(1));
    assert!(snap.counters.is_empty());
    assert_eq!(snap.problems, 0);
    assert!(render(&snap).ends_with("# EOF\n"));
    let s = sampler(root.path(), &nic).sample();
    let checks = diagnose(&s, &s, Duration::from_secs(1), &DoctorOptions::default());
    assert_eq!(checks[0].check, "rdma.devices");
    assert_eq!(checks[0].status, Status::Fail);
    assert!(checks[0].fix.as_deref().unwrap_or_default().contains("rdma link add"));
}

#[test]
fn hot_plug_and_unplug() {
    let root = tempfile::tempdir().unwrap();
    fixture::write_mlx5(root.path(), MLX5, MLX5_NETDEV, 9000).unwrap();
    let nic = Arc::new(FakeNic::default());
    let mut c = Collector::new(sampler(root.path(), &nic), "h1");
    assert!(!c.poll_at(Duration::from_secs(1)).counters.keys().any(|k| k.device == RXE));
    fixture::write_rxe(root.path(), RXE, RXE_NETDEV, 9000).unwrap();
    let snap = c.poll_at(Duration::from_secs(2));
    assert!(snap.counters.keys().any(|k| k.device == RXE), "a device added at run time is exported");
    std::fs::remove_dir_all(root.path().join("class/infiniband").join(MLX5)).unwrap();
    let snap = c.poll_at(Duration::from_secs(3));
    assert!(!snap.counters.keys().any(|k| k.device == MLX5));
    assert!(snap.counters.keys().any(|k| k.device == RXE));
}

#[test]
fn counter_vanishing_mid_run_leaves_the_rest() {
    let root = two_devices();
    let nic = Arc::new(FakeNic::default());
    let mut c = Collector::new(sampler(root.path(), &nic), "h1");
    let before = c.poll_at(Duration::from_secs(1)).counters.len();
    let path = root.path().join(hw(MLX5, "rp_cnp_handled"));
    std::fs::remove_file(&path).unwrap();
    let snap = c.poll_at(Duration::from_secs(2));
    assert_eq!(snap.counters.len(), before - 1);
    assert!(!snap.counters.contains_key(&key(MLX5, "rp_cnp_handled")));
    assert!(snap.rates.contains_key(&key(MLX5, "np_cnp_sent")), "other rates still computed");
    assert!(!render(&snap).contains("rp_cnp_handled"));
    fixture::set(root.path(), &hw(MLX5, "rp_cnp_handled"), 7).unwrap();
    let snap = c.poll_at(Duration::from_secs(3));
    assert_eq!(snap.counters.get(&key(MLX5, "rp_cnp_handled")), Some(&7), "back after it returns");
}

#[test]
fn garbage_and_unreadable_files_are_named_and_the_rest_served() {
    let root = two_devices();
    let nic = Arc::new(FakeNic::default());
    fixture::set(root.path(), &hw(MLX5, "out_of_sequence"), "not-a-number").unwrap();
    // A directory where a counter file should be: reading it fails like an unreadable file.
    let unreadable = root.path().join(hw(RXE, "send_err"));
    std::fs::remove_file(&unreadable).unwrap();
    std::fs::create_dir(&unreadable).unwrap();
    let mut c = Collector::new(sampler(root.path(), &nic), "h1");
    let snap = c.poll_at(Duration::from_secs(1));
    assert_eq!(snap.problems, 2);
    let s = sampler(root.path(), &nic).sample();
    let messages: Vec<&str> = s.problems.iter().map(|p| p.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("hw_counters/out_of_sequence") && m.contains("not a counter")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("hw_counters/send_err") && m.contains("cannot read")),
        "{messages:?}"
    );
    assert!(snap.counters.contains_key(&key(MLX5, "np_cnp_sent")));
    assert!(snap.counters.contains_key(&key(RXE, "sent_pkts")));
    assert!(render(&snap).contains("metaroce_host_read_problems{host=\"h1\"} 2"));
}

#[test]
fn doctor_passes_a_healthy_mlx5_host() {
    let root = tempfile::tempdir().unwrap();
    fixture::write_mlx5(root.path(), MLX5, MLX5_NETDEV, 9000).unwrap();
    let nic = Arc::new(FakeNic::default());
    nic.set_pfc(MLX5_NETDEV, 3, 10, 10);
    let s = sampler(root.path(), &nic).sample();
    let checks = diagnose(&s, &s, Duration::from_secs(2), &DoctorOptions { priority: 3, mtu: Some(9000) });
    let bad: Vec<_> = checks.iter().filter(|c| c.status != Status::Pass).collect();
    assert!(bad.is_empty(), "{bad:#?}");
    let names: Vec<&str> = checks.iter().map(|c| c.check).collect();
    for want in [
        "rdma.devices",
        "port.active",
        "gid.roce_v2",
        "netdev.up",
        "ecn.roce",
        "netdev.mtu",
        "pfc.rising",
        "cnp",
    ] {
        assert!(names.contains(&want), "missing check {want}");
    }
}

#[test]
fn doctor_finds_the_troubleshooting_table() {
    let root = two_devices();
    let r = root.path();
    fixture::set(r, "class/net/eth1/mtu", 1500).unwrap();
    fixture::set(r, "class/net/enp1s0f0np0/ecn/roce_np/enable/3", 0).unwrap();
    fixture::set(r, "class/net/eth1/operstate", "down").unwrap();
    fixture::set(r, "class/infiniband/rxe0/ports/1/state", "1: DOWN").unwrap();
    for i in 0..4 {
        fixture::set(r, &format!("class/infiniband/rxe0/ports/1/gid_attrs/types/{i}"), "IB/RoCE v1").unwrap();
    }
    fixture::set(r, &hw(MLX5, "np_cnp_sent"), 0).unwrap();
    fixture::set(r, &hw(MLX5, "rp_cnp_handled"), 0).unwrap();
    let nic = Arc::new(FakeNic::default());
    nic.set_pfc(MLX5_NETDEV, 3, 100, 0);
    let first = sampler(r, &nic).sample();
    nic.set_pfc(MLX5_NETDEV, 3, 150, 10);
    let second = sampler(r, &nic).sample();
    let checks = diagnose(&first, &second, Duration::from_secs(2), &DoctorOptions::default());
    let status = |check: &str, subject: &str| {
        checks.iter().find(|c| c.check == check && c.subject == subject).map(|c| c.status)
    };
    assert_eq!(status("port.active", "rxe0/1"), Some(Status::Fail));
    assert_eq!(status("gid.roce_v2", "rxe0/1"), Some(Status::Fail));
    assert_eq!(status("gid.roce_v2", "mlx5_0/1"), Some(Status::Pass));
    assert_eq!(status("netdev.up", "eth1"), Some(Status::Fail));
    assert_eq!(status("ecn.roce", MLX5_NETDEV), Some(Status::Fail));
    assert_eq!(status("ecn.roce", "eth1"), Some(Status::Warn), "rxe exposes no ECN files");
    assert_eq!(status("netdev.mtu", "host"), Some(Status::Warn));
    assert_eq!(status("pfc.rising", MLX5_NETDEV), Some(Status::Warn));
    assert_eq!(status("cnp", MLX5), Some(Status::Warn));
    assert_eq!(status("cnp", RXE), Some(Status::Warn));
    let pfc = checks.iter().find(|c| c.check == "pfc.rising" && c.subject == MLX5_NETDEV).unwrap();
    assert!(pfc.reason.contains("60 PFC/pause frames"), "{}", pfc.reason);
    assert!(checks.iter().all(|c| (c.status == Status::Pass) == c.fix.is_none()));
    let json = metaroce_host::doctor::to_json(&checks);
    assert_eq!(
        json["fail"].as_u64(),
        Some(checks.iter().filter(|c| c.status == Status::Fail).count() as u64)
    );
    assert_eq!(json["checks"][0]["status"], "PASS");
}
