//! Fixture sysfs trees for tests and demos, built from documented counter
//! names (not copied from a machine):
//! - mlx5: the `counters/` (IB PMA) and `hw_counters/` names of NVIDIA's
//!   "Understanding mlx5 Linux counters" and the kernel's mlx5 `ib` driver,
//!   and the `ecn/roce_np|roce_rp/enable/<prio>` files of mlx5's netdev;
//! - rdma_rxe: the `hw_counters/` names of the kernel's
//!   `drivers/infiniband/sw/rxe/rxe_hw_counters.c`; Soft-RoCE has no
//!   `counters/` directory and names its netdev in `parent`.
//!
//! Values are small distinct numbers so tests can tell counters apart.

use std::io;
use std::path::Path;

/// mlx5 `ports/N/counters/` (IB PMA port counters).
pub const MLX5_COUNTERS: &[&str] = &[
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "port_rcv_constraint_errors",
    "port_rcv_data",
    "port_rcv_errors",
    "port_rcv_packets",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_data",
    "port_xmit_discards",
    "port_xmit_packets",
    "port_xmit_wait",
    "symbol_error",
    "unicast_rcv_packets",
    "unicast_xmit_packets",
    "multicast_rcv_packets",
    "multicast_xmit_packets",
    "VL15_dropped",
];

/// mlx5 `ports/N/hw_counters/` (RoCE and congestion counters).
pub const MLX5_HW_COUNTERS: &[&str] = &[
    "duplicate_request",
    "implied_nak_seq_err",
    "lifespan",
    "local_ack_timeout_err",
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "req_cqe_error",
    "req_cqe_flush_error",
    "req_remote_access_errors",
    "req_remote_invalid_request",
    "resp_cqe_error",
    "resp_cqe_flush_error",
    "resp_local_length_error",
    "resp_remote_access_errors",
    "rnr_nak_retry_err",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "rx_atomic_requests",
    "rx_icrc_encapsulated",
    "rx_read_requests",
    "rx_write_requests",
];

/// rdma_rxe `ports/1/hw_counters/`.
pub const RXE_HW_COUNTERS: &[&str] = &[
    "ack_deferred",
    "completer_retry_err",
    "duplicate_request",
    "lifespan",
    "link_downed",
    "out_of_seq_request",
    "rcvd_pkts",
    "rcvd_rnr_err",
    "rcvd_seq_err",
    "rdma_recvs",
    "rdma_sends",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "send_err",
    "send_rnr_err",
    "sent_pkts",
];

/// Netdev `statistics/` (the kernel's `struct rtnl_link_stats64` names).
pub const NET_STATISTICS: &[&str] = &[
    "collisions",
    "multicast",
    "rx_bytes",
    "rx_crc_errors",
    "rx_dropped",
    "rx_errors",
    "rx_missed_errors",
    "rx_packets",
    "tx_bytes",
    "tx_dropped",
    "tx_errors",
    "tx_packets",
];

/// Writes `value` to `root/rel`, creating directories.
pub fn set(root: &Path, rel: &str, value: impl ToString) -> io::Result<()> {
    let path = root.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, format!("{}\n", value.to_string()))
}

/// An mlx5 device with one Ethernet port over `netdev`, ECN on for every priority.
pub fn write_mlx5(root: &Path, device: &str, netdev: &str, mtu: u32) -> io::Result<()> {
    let port = format!("class/infiniband/{device}/ports/1");
    write_port(root, &port, netdev, "0000:0000:0000:0000:0000:ffff:0a00:0101")?;
    for (i, name) in MLX5_COUNTERS.iter().enumerate() {
        set(root, &format!("{port}/counters/{name}"), 1000 + i)?;
    }
    for (i, name) in MLX5_HW_COUNTERS.iter().enumerate() {
        set(root, &format!("{port}/hw_counters/{name}"), 100 + i)?;
    }
    std::fs::create_dir_all(root.join(format!("class/infiniband/{device}/device/net/{netdev}")))?;
    write_netdev(root, netdev, mtu)?;
    for side in ["roce_np", "roce_rp"] {
        for prio in 0..8 {
            set(root, &format!("class/net/{netdev}/ecn/{side}/enable/{prio}"), 1)?;
        }
    }
    Ok(())
}

/// A Soft-RoCE device over `netdev`.
pub fn write_rxe(root: &Path, device: &str, netdev: &str, mtu: u32) -> io::Result<()> {
    let port = format!("class/infiniband/{device}/ports/1");
    write_port(root, &port, netdev, "0000:0000:0000:0000:0000:ffff:0a00:0201")?;
    for (i, name) in RXE_HW_COUNTERS.iter().enumerate() {
        set(root, &format!("{port}/hw_counters/{name}"), 10 + i)?;
    }
    set(root, &format!("class/infiniband/{device}/parent"), netdev)?;
    write_netdev(root, netdev, mtu)
}

fn write_port(root: &Path, port: &str, netdev: &str, v4_gid: &str) -> io::Result<()> {
    set(root, &format!("{port}/state"), "4: ACTIVE")?;
    set(root, &format!("{port}/phys_state"), "5: LinkUp")?;
    set(root, &format!("{port}/link_layer"), "Ethernet")?;
    // Index 0/1: link-local GID as RoCE v1 and v2; 2/3: the IPv4-mapped GID.
    let link_local = "fe80:0000:0000:0000:0200:00ff:fe00:0101";
    for (i, (gid, kind)) in
        [(link_local, "IB/RoCE v1"), (link_local, "RoCE v2"), (v4_gid, "IB/RoCE v1"), (v4_gid, "RoCE v2")]
            .iter()
            .enumerate()
    {
        set(root, &format!("{port}/gids/{i}"), gid)?;
        set(root, &format!("{port}/gid_attrs/types/{i}"), kind)?;
        set(root, &format!("{port}/gid_attrs/ndevs/{i}"), netdev)?;
    }
    // An empty slot: zeros, and no readable attributes (the kernel refuses them).
    set(root, &format!("{port}/gids/4"), "0000:0000:0000:0000:0000:0000:0000:0000")?;
    Ok(())
}

fn write_netdev(root: &Path, netdev: &str, mtu: u32) -> io::Result<()> {
    set(root, &format!("class/net/{netdev}/operstate"), "up")?;
    set(root, &format!("class/net/{netdev}/mtu"), mtu)?;
    for (i, name) in NET_STATISTICS.iter().enumerate() {
        set(root, &format!("class/net/{netdev}/statistics/{name}"), 5000 + i)?;
    }
    Ok(())
}
