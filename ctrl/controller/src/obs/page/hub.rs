//! The stream hub behind `GET /api/v1/stream`: one task builds a frame when
//! the published snapshot or the event log changed, at most every
//! [`TICK`], and hands the same bytes to every client.
//!
//! Bounds: at most [`MAX_CLIENTS`] streams; each client's queue holds
//! [`CLIENT_FRAMES`] frames. A client whose queue is full when a frame is
//! ready has stopped reading: it is dropped (its stream ends, and the hub
//! forgets it), the others and the controller carry on. Its connection
//! lives until the peer closes it or TCP gives up, holding no more than
//! that queue (frames are shared, not copied) and the socket's buffers. The hub runs only while someone watches,
//! and after a large frame it waits long enough to stay under
//! [`MAX_BYTES_PER_SECOND`] per client.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::frame::{self, Fabric};
use crate::obs::{EventLog, Snapshot};

/// Shortest time between two frames.
pub const TICK: Duration = Duration::from_millis(250);
/// Most streams open at once.
pub const MAX_CLIENTS: usize = 16;
/// Frames queued for one client before it counts as not reading.
pub const CLIENT_FRAMES: usize = 8;
/// Frame bytes sent per second to each client, at most (a big fabric
/// under load gets fewer frames, not a fatter pipe).
pub const MAX_BYTES_PER_SECOND: usize = 1 << 20;

/// One frame, shared by every client.
pub type Frame = Arc<str>;

/// Why a stream was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyClients;

#[derive(Debug)]
struct Inner {
    tick: Duration,
    clients: Vec<(u64, mpsc::Sender<Frame>)>,
    next_client: u64,
    /// The newest frame, for a client that joins between frames.
    last: Option<Frame>,
    running: bool,
    seq: u64,
}

/// Cheap to clone; every clone is the same hub.
#[derive(Debug, Clone)]
pub struct Hub {
    inner: Arc<Mutex<Inner>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::with_tick(TICK)
    }
}

/// What the hub reads from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub fabric: Arc<Fabric>,
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
    pub events: EventLog,
}

impl Hub {
    /// A hub that builds frames at most every `tick` (tests go faster).
    pub fn with_tick(tick: Duration) -> Self {
        let inner = Inner { tick, clients: Vec::new(), next_client: 0, last: None, running: false, seq: 0 };
        Hub { inner: Arc::new(Mutex::new(inner)) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Streams currently fed.
    #[cfg(test)]
    pub fn clients(&self) -> usize {
        self.lock().clients.len()
    }

    /// A new client's queue, primed with the newest frame; starts the hub
    /// task if it was idle.
    pub fn subscribe(&self, sources: &Sources) -> Result<mpsc::Receiver<Frame>, TooManyClients> {
        let mut inner = self.lock();
        inner.clients.retain(|(_, c)| !c.is_closed());
        if inner.clients.len() >= MAX_CLIENTS {
            tracing::warn!(clients = inner.clients.len(), "page stream refused: too many clients");
            return Err(TooManyClients);
        }
        let (tx, rx) = mpsc::channel(CLIENT_FRAMES);
        if let Some(last) = &inner.last {
            let _ = tx.try_send(Arc::clone(last));
        }
        let id = inner.next_client;
        inner.next_client += 1;
        inner.clients.push((id, tx));
        tracing::debug!(client = id, clients = inner.clients.len(), "page stream opened");
        if !inner.running {
            inner.running = true;
            tokio::spawn(run(self.clone(), sources.clone()));
        }
        Ok(rx)
    }

    /// Hands `frame` to every client; drops those that stopped reading.
    /// Returns how many remain.
    fn broadcast(&self, frame: Frame) -> usize {
        let mut inner = self.lock();
        inner.clients.retain(|(id, c)| match c.try_send(Arc::clone(&frame)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    client = id,
                    queued = CLIENT_FRAMES,
                    "page stream dropped: the client stopped reading"
                );
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
        inner.last = Some(frame);
        inner.clients.len()
    }

    /// Stops the task when nobody watches; true when it should stop.
    fn idle(&self) -> bool {
        let mut inner = self.lock();
        inner.clients.retain(|(_, c)| !c.is_closed());
        if inner.clients.is_empty() {
            inner.running = false;
            inner.last = None;
            return true;
        }
        false
    }

    fn next_seq(&self) -> u64 {
        let mut inner = self.lock();
        inner.seq += 1;
        inner.seq
    }
}

/// The hub task: a frame whenever something changed, at most every tick.
async fn run(hub: Hub, mut sources: Sources) {
    tracing::debug!("page stream hub started");
    sources.snapshot.mark_changed();
    let mut seen_event = None;
    let mut last_doc: Option<serde_json::Value> = None;
    let period = hub.lock().tick;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if hub.idle() {
            tracing::debug!("page stream hub idle");
            return;
        }
        let last_event = sources.events.recent(u64::MAX, 0).last_id;
        let changed = sources.snapshot.has_changed().unwrap_or(false);
        if !changed && seen_event == Some(last_event) {
            continue;
        }
        seen_event = Some(last_event);
        let snap = Arc::clone(&sources.snapshot.borrow_and_update());
        let recent =
            sources.events.recent(last_event.saturating_sub(frame::FRAME_EVENTS as u64), frame::FRAME_EVENTS);
        let fabric = Arc::clone(&sources.fabric);
        // A fabric-wide document may be built here: off the runtime.
        let built = tokio::task::spawn_blocking(move || frame::build(&fabric, &snap, &recent, 0)).await;
        let Ok(mut doc) = built else { continue };
        // The state task republishes every second whether or not anything
        // changed: send only what differs from the last frame.
        if last_doc.as_ref() == Some(&doc) {
            continue;
        }
        last_doc = Some(doc.clone());
        doc["seq"] = hub.next_seq().into();
        let text = serde_json::to_string(&doc).unwrap_or_default();
        let len = text.len();
        hub.broadcast(Frame::from(text));
        let pace = Duration::from_secs_f64(len as f64 / MAX_BYTES_PER_SECOND as f64);
        if pace > period {
            tokio::time::sleep(pace - period).await;
        }
    }
}
