//! L2: a Write refused because a table is full is an error for each
//! update it refused, with its reason; the connection, the StreamChannel
//! and our primacy stay. (A thousand refusals once overflowed the
//! client's header limit: the connection failed with every batch.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use metaroce_p4rt::entity::insert;
use metaroce_p4rt::server::SwitchOptions;
use metaroce_p4rt::{Event, SessionError};
use tonic::Code;

#[tokio::test]
async fn a_full_table_refuses_entries_and_the_stream_stays_up() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let mut events = s.subscribe().unwrap();
    let i = &r.info;
    let size = 1024usize; // the test P4Info's dmac table
    let updates: Vec<_> = (0..3 * size as u64)
        .map(|m| {
            let mac = m.to_be_bytes()[2..].to_vec();
            let t = i.table_entry("dmac").unwrap().exact("dst_addr", mac).unwrap();
            insert(t.action("set_port", &[("port", 1u16.into())]).unwrap().build())
        })
        .collect();
    let err = s.write_batched(updates, 1000).await.unwrap_err();
    let SessionError::Write { failure, .. } = err else { panic!("{err}") };
    assert_eq!(failure.failures.len(), 2 * size, "{failure}");
    assert!(failure.only(Code::ResourceExhausted), "{failure}");
    assert_eq!(failure.failures[0].index, size, "the first refused is the first past the size");
    assert_eq!(r.switch.table_len(i.tables.id_of("dmac").unwrap()), Some(size));
    // Still primary on the same stream: nothing dropped, nothing reconnected.
    tokio::time::sleep(Duration::from_millis(200)).await;
    while let Ok(e) = events.try_recv() {
        assert!(matches!(e, Event::Role { primary: true, .. }), "{e:?}");
    }
    assert!(s.role().primary);
    let more = i.table_entry("dmac").unwrap().exact("dst_addr", vec![9u8; 6]).unwrap();
    let err = s.write(vec![insert(more.action("set_port", &[("port", 1u16.into())]).unwrap().build())]).await;
    assert!(
        matches!(err, Err(SessionError::Write { ref failure, .. }) if failure.only(Code::ResourceExhausted)),
        "{err:?}"
    );
}
