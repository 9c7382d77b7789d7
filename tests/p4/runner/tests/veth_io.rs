//! The runner's packet I/O over real veth pairs, without BMv2: frames sent
//! on a port arrive at the switch's end unchanged, frames from the switch's
//! end arrive as outputs of that port, and the veths are gone afterwards.
//! Needs root and `ip`; skips with one line otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use metaroce_p4_vectors::bmv2::{veth_tools, PacketIo, Veths};
use pnet_datalink::{self as datalink, Channel};

#[test]
fn frames_cross_the_veths_both_ways() {
    let ip = match veth_tools() {
        Ok(ip) => ip,
        Err(why) => {
            println!("skip: veth packet I/O ({why})");
            return;
        }
    };
    let names;
    {
        let veths = Veths::create(&ip).unwrap();
        names = veths.pairs.clone();
        let mut io = PacketIo::open(&veths).unwrap();
        let (_, switch_end, _) = &veths.pairs[1];
        let iface = datalink::interfaces().into_iter().find(|i| &i.name == switch_end).unwrap();
        let cfg = datalink::Config { read_timeout: Some(Duration::from_millis(20)), ..Default::default() };
        let Ok(Channel::Ethernet(mut tx, mut rx)) = datalink::channel(&iface, cfg) else {
            panic!("no channel")
        };
        io.reset();
        let frame: Vec<u8> = (0..60u8).map(|i| i.wrapping_mul(7)).collect();
        io.send(2, &frame).unwrap();
        let mut seen = false;
        for _ in 0..50 {
            if let Ok(f) = rx.next() {
                if f == frame.as_slice() {
                    seen = true;
                    break;
                }
            }
        }
        assert!(seen, "frame sent on port 2 did not reach {switch_end}");
        let back: Vec<u8> = frame.iter().rev().copied().collect();
        tx.send_to(&back, None).unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let got = io.take();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].port, &got[0].bytes), (2, &back));
    }
    let links = std::process::Command::new(&ip).args(["-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    for (_, a, b) in names {
        assert!(
            !links.contains(&format!(" {a}@")) && !links.contains(&format!(" {b}@")),
            "{a}/{b} left behind"
        );
    }
}
