//! The exporter served on 127.0.0.1:0 and scraped back by the client the
//! controller uses; the client's limits (timeout, size, refused
//! connection, bad status) against small loopback servers.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use metaroce_host::scrape::{fetch, scrape, ScrapeOptions};
use metaroce_host::{exporter, fixture, Collector, ScrapeError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

async fn start(
    root: &std::path::Path,
    nic: &Arc<FakeNic>,
    csv: Option<&std::path::Path>,
) -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut collector = Collector::new(sampler(root, nic), "h1");
    if let Some(p) = csv {
        collector = collector.with_csv(p).unwrap();
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        exporter::serve(listener, Duration::from_millis(50), collector, shutdown).await.unwrap();
    });
    (addr, stop, task)
}

#[tokio::test]
async fn scrape_reads_typed_congestion_counters_and_rates() {
    let root = two_devices();
    let nic = Arc::new(FakeNic::default());
    nic.set_pfc(MLX5_NETDEV, 3, 40, 2);
    nic.set_pause(MLX5_NETDEV, 1, 0);
    let csv = root.path().join("counters.csv");
    let (addr, stop, task) = start(root.path(), &nic, Some(&csv)).await;
    let opts = ScrapeOptions::default();

    let h = scrape(&addr, &opts).await.unwrap();
    assert_eq!(h.host, "h1");
    let mlx = &h.devices[MLX5];
    assert_eq!(mlx.netdev.as_deref(), Some(MLX5_NETDEV));
    let hw_value =
        |name: &str| 100 + fixture::MLX5_HW_COUNTERS.iter().position(|n| *n == name).unwrap() as u64;
    assert_eq!(mlx.cnp_sent.map(|c| c.total), Some(hw_value("np_cnp_sent")));
    assert_eq!(mlx.cnp_handled.map(|c| c.total), Some(hw_value("rp_cnp_handled")));
    assert_eq!(mlx.ecn_marked.map(|c| c.total), Some(hw_value("np_ecn_marked_roce_packets")));
    assert_eq!(mlx.pfc_tx.map(|c| c.total), Some(40));
    assert_eq!(mlx.pfc_rx_by_priority.get(&3).map(|c| c.total), Some(2));
    assert_eq!(mlx.pause_tx.map(|c| c.total), Some(1));
    let rxe = &h.devices[RXE];
    assert_eq!(rxe.cnp_sent, None, "Soft-RoCE counts no CNPs");
    assert_eq!(rxe.pfc_tx, None);

    // Counters move; a later poll reports a positive rate.
    fixture::set(root.path(), &hw(MLX5, "np_cnp_sent"), 1_000_000).unwrap();
    nic.set_pfc(MLX5_NETDEV, 3, 5_000, 2);
    let mut rate = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let h = scrape(&addr, &opts).await.unwrap();
        let d = &h.devices[MLX5];
        if d.cnp_sent.is_some_and(|c| c.total == 1_000_000) {
            rate = d.cnp_sent.and_then(|c| c.rate).zip(d.pfc_tx.and_then(|c| c.rate));
            break;
        }
    }
    let (cnp_rate, pfc_rate) = rate.expect("a poll after the change");
    assert!(cnp_rate > 0.0 && pfc_rate > 0.0, "{cnp_rate} {pfc_rate}");

    let text = fetch(&addr, &opts).await.unwrap();
    assert!(text.contains("metaroce_rdma_counter_total{host=\"h1\",device=\"mlx5_0\",port=\"1\",source=\"hw_counters\",counter=\"np_cnp_sent\"} 1000000"));
    assert!(text.contains("# TYPE metaroce_rdma_counter counter"));
    assert!(text.trim_end().ends_with("# EOF"));

    let _ = stop.send(());
    task.await.unwrap();
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("timestamp_ms,host,device,port,source,counter,value,rate_per_s"));
    assert!(csv.lines().any(|l| l.contains(",h1,mlx5_0,1,hw_counters,np_cnp_sent,1000000,")));
    assert!(csv.lines().any(|l| l.contains(",h1,enp1s0f0np0,,dcb_pfc,tx_pfc_prio3,")));
}

#[tokio::test]
async fn scrape_refused_connection_names_the_address() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = scrape(&addr, &ScrapeOptions::default()).await.unwrap_err();
    assert!(matches!(err, ScrapeError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains(&addr));
    let err = scrape("no-port", &ScrapeOptions::default()).await.unwrap_err();
    assert!(matches!(err, ScrapeError::Address { .. }), "{err:?}");
}

/// A loopback server that answers every connection with `reply` (or never, if `None`).
async fn fake_server(reply: Option<Vec<u8>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        for _ in 0..4 {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            match &reply {
                Some(r) => {
                    let _ = s.write_all(r).await;
                }
                None => tokio::time::sleep(Duration::from_secs(5)).await,
            }
        }
    });
    addr
}

#[tokio::test]
async fn scrape_is_bounded_in_time_and_size() {
    let silent = fake_server(None).await;
    let opts = ScrapeOptions { timeout: Duration::from_millis(200), max_bytes: 4096 };
    let err = scrape(&silent, &opts).await.unwrap_err();
    assert!(matches!(err, ScrapeError::Timeout { .. }), "{err:?}");

    let mut big = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'#', 10_000));
    let err = scrape(&fake_server(Some(big)).await, &opts).await.unwrap_err();
    assert!(matches!(err, ScrapeError::TooLarge { limit: 4096, .. }), "{err:?}");

    let not_found = fake_server(Some(b"HTTP/1.0 404 Not Found\r\n\r\nno".to_vec())).await;
    let err = scrape(&not_found, &opts).await.unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");

    let garbage = fake_server(Some(b"HTTP/1.0 200 OK\r\n\r\nmetric{a=\"1\"} twelve\n".to_vec())).await;
    let err = scrape(&garbage, &opts).await.unwrap_err();
    assert!(matches!(err, ScrapeError::Parse { line: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("line 1: the value \"twelve\" is not a number"), "{err}");
}

#[tokio::test]
async fn scrape_all_keeps_order_and_isolates_a_dead_host() {
    let root = two_devices();
    let nic = Arc::new(FakeNic::default());
    let (addr, stop, task) = start(root.path(), &nic, None).await;
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().to_string()
    };
    let targets = vec![("h2".to_string(), dead), ("h1".to_string(), addr)];
    let got = metaroce_host::scrape_all(&targets, &ScrapeOptions::default()).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "h2");
    assert!(matches!(got[0].1, Err(ScrapeError::Connect { .. })));
    assert_eq!(got[1].0, "h1");
    assert!(got[1].1.as_ref().is_ok_and(|h| h.devices.contains_key(MLX5)));
    let _ = stop.send(());
    task.await.unwrap();
}
