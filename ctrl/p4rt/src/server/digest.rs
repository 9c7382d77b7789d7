//! Digest batching and ack semantics (P4Runtime §9.10 and §16.2): data is
//! gathered into lists of at most `max_list_size`, sent when full or when
//! the oldest item is `max_timeout_ns` old, and the same data is not sent
//! again while a list holding it waits for its ack (up to `ack_timeout_ns`).

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use crate::proto::p4::v1 as p4;
use p4::update::Type as Up;

/// A digest list ack the switch cannot match (served as `NotFound`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AckError {
    #[error("ack for digest {digest_id:#x}, which is not configured: configure it before acking its lists")]
    NotConfigured { digest_id: u32 },
    #[error(
        "ack for list {list_id} of digest {digest_id:#x}, which is not outstanding (never sent, already acked, \
         or past its ack timeout and sent again under a new id)"
    )]
    NotOutstanding { digest_id: u32, list_id: u64 },
}

#[derive(Debug)]
struct DigestState {
    config: p4::digest_entry::Config,
    pending: Vec<p4::P4Data>,
    pending_since: Option<Instant>,
    outstanding: HashMap<u64, (Vec<p4::P4Data>, Instant)>,
}

#[derive(Debug, Default)]
pub(crate) struct Digests {
    by_id: HashMap<u32, DigestState>,
    next_list_id: u64,
}

fn ns(v: i64) -> Duration {
    Duration::from_nanos(u64::try_from(v).unwrap_or(0))
}

impl Digests {
    pub fn configure(&mut self, t: Up, d: &p4::DigestEntry) -> Result<(), Status> {
        let exists = self.by_id.contains_key(&d.digest_id);
        match (t, exists) {
            (Up::Insert, true) => {
                Err(Status::already_exists(format!("digest {:#x} is configured", d.digest_id)))
            }
            (Up::Modify | Up::Delete, false) => {
                Err(Status::not_found(format!("digest {:#x} is not configured", d.digest_id)))
            }
            (Up::Delete, true) => {
                self.by_id.remove(&d.digest_id);
                Ok(())
            }
            _ => {
                let config =
                    d.config.ok_or_else(|| Status::invalid_argument("digest entry without config"))?;
                if config.max_list_size < 0 || config.max_timeout_ns < 0 || config.ack_timeout_ns < 0 {
                    return Err(Status::invalid_argument("digest config values must not be negative"));
                }
                let s = self.by_id.entry(d.digest_id).or_insert_with(|| DigestState {
                    config,
                    pending: vec![],
                    pending_since: None,
                    outstanding: HashMap::new(),
                });
                s.config = config;
                Ok(())
            }
        }
    }

    /// Queues one digest message. `false` when it was not queued: the
    /// digest is not configured or the same data awaits an ack.
    pub fn emit(&mut self, digest_id: u32, data: p4::P4Data, now: Instant) -> bool {
        let Some(s) = self.by_id.get_mut(&digest_id) else { return false };
        let ack_timeout = ns(s.config.ack_timeout_ns);
        s.outstanding.retain(|_, (_, sent)| now.duration_since(*sent) < ack_timeout);
        if s.pending.contains(&data) || s.outstanding.values().any(|(l, _)| l.contains(&data)) {
            return false;
        }
        s.pending.push(data);
        s.pending_since.get_or_insert(now);
        true
    }

    /// The lists ready to send now; they become outstanding until acked.
    pub fn due(&mut self, now: Instant, timestamp_ns: i64) -> Vec<p4::DigestList> {
        let mut out = vec![];
        for (id, s) in &mut self.by_id {
            let Some(since) = s.pending_since else { continue };
            let max = usize::try_from(s.config.max_list_size).unwrap_or(0);
            let full = max > 0 && s.pending.len() >= max;
            if !full && now.duration_since(since) < ns(s.config.max_timeout_ns) {
                continue;
            }
            while !s.pending.is_empty() {
                let take = if max == 0 { s.pending.len() } else { max.min(s.pending.len()) };
                let data: Vec<p4::P4Data> = s.pending.drain(..take).collect();
                self.next_list_id += 1;
                s.outstanding.insert(self.next_list_id, (data.clone(), now));
                out.push(p4::DigestList {
                    digest_id: *id,
                    list_id: self.next_list_id,
                    data,
                    timestamp: timestamp_ns,
                });
            }
            s.pending_since = None;
        }
        out
    }

    /// When the next pending list becomes due by timeout.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.by_id.values().filter_map(|s| Some(s.pending_since? + ns(s.config.max_timeout_ns))).min()
    }

    pub fn ack(&mut self, ack: &p4::DigestListAck) -> Result<(), AckError> {
        let digest_id = ack.digest_id;
        let s = self.by_id.get_mut(&digest_id).ok_or(AckError::NotConfigured { digest_id })?;
        s.outstanding
            .remove(&ack.list_id)
            .map(|_| ())
            .ok_or(AckError::NotOutstanding { digest_id, list_id: ack.list_id })
    }

    /// Lists sent and not yet acked, for tests and the simulator.
    pub fn outstanding(&self) -> usize {
        self.by_id.values().map(|s| s.outstanding.len()).sum()
    }

    pub fn entries(&self, digest_id: u32) -> Vec<p4::DigestEntry> {
        self.by_id
            .iter()
            .filter(|(id, _)| digest_id == 0 || **id == digest_id)
            .map(|(id, s)| p4::DigestEntry { digest_id: *id, config: Some(s.config) })
            .collect()
    }
}
