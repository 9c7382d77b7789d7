//! Ports for test servers that another process binds later.
//!
//! A port found free by binding port 0 comes from the kernel's ephemeral
//! range, and the kernel may hand it out again, to another process's port-0
//! listener or to an outgoing connection, before the process meant to listen
//! on it does (CI once saw a controller's API take a served switch's port).
//! So the ports come from below that range, where the kernel never assigns
//! one on its own. Each test process starts at an offset set by its process
//! id, so binaries running at once rarely meet, and every port is checked by
//! binding it.
//!
//! Shared by the test crates with `#[path = ".../tests/support/ports.rs"]`.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port this helper hands out.
const LOWEST: u32 = 10_000;

/// The start of the kernel's ephemeral range (32768 when unreadable, the
/// Linux default).
fn ephemeral_start() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A port on 127.0.0.1 that nothing listens on, outside the ephemeral range.
/// Panics (for tests) where [`try_free_port`] fails.
#[allow(dead_code)] // the P4 vector runner uses only `try_free_port`
pub fn free_port() -> u16 {
    match try_free_port() {
        Ok(port) => port,
        Err(e) => panic!("{e}"),
    }
}

/// [`free_port`], with an error that says why no port was found.
pub fn try_free_port() -> std::io::Result<u16> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let top = ephemeral_start().min(u32::from(u16::MAX));
    if top <= LOWEST + 1_000 {
        // An unusual range setting leaves no room below it: fall back to
        // what the kernel picks.
        return Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port());
    }
    let span = top - LOWEST;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOWEST + (start + n) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrNotAvailable,
        format!("no free port on 127.0.0.1 between {LOWEST} and {top}"),
    ))
}
