//! The exporter says each absence or bad file once, and again only when
//! it is back. Alone in its binary: tracing caches per-callsite interest
//! globally, so a test on another thread without a subscriber could hide
//! events from this one's thread-local subscriber.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use metaroce_host::{fixture, Collector};

/// Collects log output for one test.
#[derive(Clone, Default)]
struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn absences_and_bad_files_are_logged_once() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let empty = tempfile::tempdir().unwrap();
        let nic = Arc::new(FakeNic::default());
        let mut c = Collector::new(sampler(empty.path(), &nic), "h1");
        for t in 1..=3 {
            c.poll_at(Duration::from_secs(t));
        }
        let root = two_devices();
        fixture::set(root.path(), &hw(MLX5, "out_of_sequence"), "garbage").unwrap();
        let mut c = Collector::new(sampler(root.path(), &nic), "h1");
        c.poll_at(Duration::from_secs(1));
        std::fs::remove_file(root.path().join(hw(MLX5, "rp_cnp_handled"))).unwrap();
        for t in 2..=4 {
            c.poll_at(Duration::from_secs(t));
        }
        fixture::set(root.path(), &hw(MLX5, "out_of_sequence"), 5).unwrap();
        c.poll_at(Duration::from_secs(5));
    });
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let count = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("no RDMA devices"), 1, "{text}");
    assert_eq!(count("is not a counter"), 1, "{text}");
    assert_eq!(count("counter vanished"), 1, "{text}");
    assert_eq!(count("readable again"), 1, "{text}");
    assert_eq!(count("device does not count these congestion signals device=rxe0"), 1, "{text}");
    assert_eq!(count("device does not count these congestion signals device=mlx5_0"), 0, "{text}");
    let pfc_lines =
        text.lines().filter(|l| l.contains("no pause or PFC counters") && l.contains("netdev=eth1"));
    assert_eq!(pfc_lines.count(), 1, "{text}");
}
