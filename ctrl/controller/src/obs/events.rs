//! The structured event log: every change the controller makes, with its
//! reason, as JSON lines in an optional file and in a bounded in-memory
//! ring that the status API serves (`GET /api/v1/events`).
//!
//! Events are rare (changes, not packets), so the file is written and
//! flushed under the ring's lock; a failing write is reported once through
//! `tracing` and never stops the controller.

use std::collections::VecDeque;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use super::ObsError;

/// One change, as logged and served.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Starts at 1 and grows by one per event, for `?since=`.
    pub id: u64,
    /// RFC 3339, UTC, microseconds.
    pub ts: String,
    /// Nanoseconds since the Unix epoch, for machines.
    pub ts_unix_ns: u64,
    /// What changed: `mode`, `reroute`, `groups`, `switch`, `rollback`, `api`, …
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
    pub reason: String,
    pub details: Value,
}

/// A page of recent events.
#[derive(Debug, Clone, Serialize)]
pub struct Recent {
    pub events: Vec<Event>,
    /// The newest id logged so far; pass it as `since` next time.
    pub last_id: u64,
    /// Events after `since` that fell out of the ring before this read.
    pub missed: u64,
}

struct Sink {
    path: PathBuf,
    out: BufWriter<File>,
    /// True after a failure was reported, until a write succeeds again.
    failing: bool,
    /// Leave flushing to [`EventLog::flush`] (a busy writer flushes once
    /// per batch of events instead of once per event).
    deferred: bool,
}

struct Inner {
    capacity: usize,
    next_id: u64,
    ring: VecDeque<Arc<Event>>,
    sink: Option<Sink>,
}

/// Cheap to clone; all clones append to the same log.
#[derive(Clone)]
pub struct EventLog {
    inner: Arc<Mutex<Inner>>,
}

impl fmt::Debug for EventLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("EventLog")
            .field("capacity", &inner.capacity)
            .field("len", &inner.ring.len())
            .field("file", &inner.sink.as_ref().map(|s| &s.path))
            .finish()
    }
}

impl EventLog {
    /// An in-memory log keeping the last `capacity` events (at least one).
    pub fn new(capacity: usize) -> Self {
        let inner = Inner { capacity: capacity.max(1), next_id: 1, ring: VecDeque::new(), sink: None };
        EventLog { inner: Arc::new(Mutex::new(inner)) }
    }

    /// Also appends each event as one JSON line to `path` (created if absent).
    pub fn with_file(capacity: usize, path: &Path) -> Result<Self, ObsError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| ObsError::EventFile { path: path.to_path_buf(), source })?;
        let log = Self::new(capacity);
        log.lock().sink = Some(Sink {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            failing: false,
            deferred: false,
        });
        Ok(log)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// With `deferred`, events reach the file when [`EventLog::flush`] is
    /// called (or the buffer fills), not one write per event: for a writer
    /// that records events in bursts and flushes after each.
    pub fn defer_flush(&self, deferred: bool) {
        if let Some(sink) = self.lock().sink.as_mut() {
            sink.deferred = deferred;
        }
    }

    /// Writes buffered events to the file.
    pub fn flush(&self) {
        if let Some(sink) = self.lock().sink.as_mut() {
            let result = sink.out.flush();
            sink.report(result);
        }
    }

    /// Records an event stamped now; returns its id.
    pub fn record(&self, kind: &str, switch: Option<&str>, reason: &str, details: Value) -> u64 {
        self.record_at(SystemTime::now(), kind, switch, reason, details)
    }

    /// Records an event with the given time (for injected clocks and tests).
    pub fn record_at(
        &self,
        at: SystemTime,
        kind: &str,
        switch: Option<&str>,
        reason: &str,
        details: Value,
    ) -> u64 {
        let ns = at.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let ts_unix_ns = u64::try_from(ns).unwrap_or(u64::MAX);
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        let event = Arc::new(Event {
            id,
            ts: rfc3339(ts_unix_ns),
            ts_unix_ns,
            kind: kind.to_string(),
            switch: switch.map(str::to_string),
            reason: reason.to_string(),
            details,
        });
        tracing::info!(target: "metaroce::event", id, kind, switch, reason, "event");
        if let Some(sink) = inner.sink.as_mut() {
            sink.append(&event);
        }
        if inner.ring.len() == inner.capacity {
            inner.ring.pop_front();
        }
        inner.ring.push_back(event);
        id
    }

    /// Events with id greater than `since`, oldest first, at most `limit`.
    pub fn recent(&self, since: u64, limit: usize) -> Recent {
        let inner = self.lock();
        let last_id = inner.next_id - 1;
        let oldest = inner.ring.front().map_or(inner.next_id, |e| e.id);
        let missed = oldest.saturating_sub(since.saturating_add(1));
        let events =
            inner.ring.iter().filter(|e| e.id > since).take(limit).map(|e| Event::clone(e)).collect();
        Recent { events, last_id, missed }
    }
}

impl Sink {
    fn append(&mut self, event: &Event) {
        let deferred = self.deferred;
        let result = serde_json::to_writer(&mut self.out, event)
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"))
            .and_then(|()| if deferred { Ok(()) } else { self.out.flush() });
        self.report(result);
    }

    fn report(&mut self, result: std::io::Result<()>) {
        match result {
            Err(error) if !self.failing => {
                self.failing = true;
                tracing::error!(path = %self.path.display(), %error,
                    "cannot write the event log file; events stay in memory, further failures are not reported");
            }
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!(path = %self.path.display(), "event log file writable again");
            }
            _ => {}
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.uuuuuuZ` from Unix nanoseconds (proleptic Gregorian).
pub(crate) fn rfc3339(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let micros = (unix_ns % 1_000_000_000) / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Howard Hinnant's days-since-epoch to (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    #[test]
    fn obs_timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000Z");
        // 2024-02-29T12:34:56.789012Z, a leap day.
        assert_eq!(rfc3339(1_709_210_096_789_012_345), "2024-02-29T12:34:56.789012Z");
        assert_eq!(rfc3339(951_782_400_000_000_000), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn obs_ring_is_bounded_and_ids_grow() {
        let log = EventLog::new(3);
        for i in 0..5 {
            let id = log.record("reroute", Some("leaf1"), "congestion", json!({ "i": i }));
            assert_eq!(id, i + 1);
        }
        let r = log.recent(0, 100);
        assert_eq!(r.events.iter().map(|e| e.id).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!((r.last_id, r.missed), (5, 2));
        let r = log.recent(3, 1);
        assert_eq!(r.events.iter().map(|e| e.id).collect::<Vec<_>>(), vec![4]);
        assert_eq!(r.missed, 0);
        assert!(log.recent(5, 10).events.is_empty());
        assert_eq!(EventLog::new(0).recent(0, 1).last_id, 0);
    }

    #[test]
    fn obs_events_go_to_the_file_as_json_lines() {
        let dir = std::env::temp_dir().join(format!("metaroce-obs-ev-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("events.jsonl");
        let _ = std::fs::remove_file(&path);
        let log = EventLog::with_file(2, &path).unwrap();
        let at = UNIX_EPOCH + Duration::from_secs(86_400);
        log.record_at(at, "mode", None, "operator request", json!({ "to": "act" }));
        log.record_at(at, "switch", Some("spine1"), "session lost", Value::Null);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["ts"], "1970-01-02T00:00:00.000000Z");
        assert_eq!(lines[0]["details"]["to"], "act");
        assert!(lines[0].get("switch").is_none());
        assert_eq!(lines[1]["switch"], "spine1");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn obs_deferred_events_reach_the_file_when_flushed() {
        let dir = std::env::temp_dir().join(format!("metaroce-obs-defer-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("events.jsonl");
        let _ = std::fs::remove_file(&path);
        let log = EventLog::with_file(4, &path).unwrap();
        log.defer_flush(true);
        log.record("mode", None, "operator request", json!({}));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "", "held until flushed");
        log.flush();
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn obs_unopenable_event_file_names_the_path() {
        let err = EventLog::with_file(1, Path::new("/nonexistent-dir/x/events.jsonl")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/x/events.jsonl"), "{err}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn obs_failing_file_writes_do_not_stop_the_log() {
        // /dev/full accepts the open and fails every write with ENOSPC.
        let Ok(log) = EventLog::with_file(4, Path::new("/dev/full")) else { return };
        let (logs, guard) = crate::obs::testutil::capture_logs();
        for _ in 0..3 {
            log.record("reroute", None, "congestion", Value::Null);
        }
        drop(guard);
        assert_eq!(log.recent(0, 10).events.len(), 3);
        assert_eq!(logs.text().matches("cannot write the event log file").count(), 1, "{}", logs.text());
    }
}
