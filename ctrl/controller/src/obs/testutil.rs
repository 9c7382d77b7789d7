//! Test helpers: capture everything `tracing` prints on this thread while a
//! guard lives.
//!
//! One global subscriber, installed once, writes into the buffer of the
//! thread that logs, if that thread is capturing. A per-thread default
//! subscriber would be simpler, but `tracing` caches whether a callsite is
//! enabled across threads: a callsite first hit by a test that captures
//! nothing could stay off for one that does, now and then.

use std::cell::RefCell;
use std::io;
use std::sync::{Arc, Mutex, Once};

#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub fn text(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Captured>> = const { RefCell::new(None) };
}

/// Writes into the capturing buffer of the calling thread, if any.
struct ThisThread;

impl io::Write for ThisThread {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        CURRENT.with(|c| {
            if let Some(buf) = c.borrow().as_ref() {
                buf.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(data);
            }
        });
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Stops this thread's capture when dropped.
pub(crate) struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// Routes this thread's `tracing` output, at every level, into the buffer.
pub(crate) fn capture_logs() -> (Captured, CaptureGuard) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(|| ThisThread)
            .finish();
        // Another global subscriber (none in this crate's tests) would win;
        // then captures stay empty and the tests that read them say so.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
    let captured = Captured::default();
    CURRENT.with(|c| *c.borrow_mut() = Some(captured.clone()));
    (captured, CaptureGuard)
}
