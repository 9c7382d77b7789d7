//! Client arbitration (P4Runtime §5): per role, the stream with the
//! highest election id is primary; every stream of the role hears when
//! that changes.

use std::collections::HashMap;

use tokio::sync::mpsc::UnboundedSender;
use tonic::{Code, Status};

use crate::proto::google::rpc::Status as RpcStatus;
use crate::proto::p4::v1 as p4;

pub(crate) type StreamTx = UnboundedSender<Result<p4::StreamMessageResponse, Status>>;

#[derive(Debug)]
pub(crate) struct Slot {
    pub role: String,
    pub election_id: Option<u128>,
    pub tx: StreamTx,
}

#[derive(Debug, Default)]
pub(crate) struct Streams {
    pub slots: HashMap<u64, Slot>,
    pub next: u64,
}

pub(crate) fn to_u128(u: Option<p4::Uint128>) -> Option<u128> {
    u.map(|u| (u128::from(u.high) << 64) | u128::from(u.low))
}

pub(crate) fn from_u128(v: u128) -> p4::Uint128 {
    p4::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

impl Streams {
    /// The primary of a role: its stream id and election id.
    pub fn primary(&self, role: &str) -> Option<(u64, u128)> {
        self.slots
            .iter()
            .filter(|(_, s)| s.role == role)
            .filter_map(|(id, s)| Some((*id, s.election_id?)))
            .max_by_key(|(_, e)| *e)
    }

    /// Records an arbitration request; `Err` closes the stream.
    pub fn arbitrate(
        &mut self,
        stream: u64,
        role: String,
        election_id: Option<u128>,
        tx: &StreamTx,
        device_id: u64,
    ) -> Result<(), Status> {
        if let Some(e) = election_id {
            let clash =
                self.slots.iter().any(|(id, s)| *id != stream && s.role == role && s.election_id == Some(e));
            if clash {
                return Err(Status::invalid_argument(format!(
                    "election id {e} is already used in role {role:?}"
                )));
            }
        }
        let before = self.primary(&role);
        let old_role = self.slots.get(&stream).map(|s| s.role.clone());
        self.slots.insert(stream, Slot { role: role.clone(), election_id, tx: tx.clone() });
        let after = self.primary(&role);
        if before != after {
            self.notify_role(&role, device_id);
        } else {
            self.notify_one(stream, device_id);
        }
        if let Some(old) = old_role.filter(|o| *o != role) {
            self.notify_role(&old, device_id);
        }
        Ok(())
    }

    /// Forgets a stream; if it was primary the others hear who is now.
    pub fn remove(&mut self, stream: u64, device_id: u64) {
        if let Some(slot) = self.slots.remove(&stream) {
            if self.primary(&slot.role).map(|p| p.0) != Some(stream) {
                self.notify_role(&slot.role, device_id);
            }
        }
    }

    fn notify_role(&self, role: &str, device_id: u64) {
        let ids: Vec<u64> = self.slots.iter().filter(|(_, s)| s.role == role).map(|(id, _)| *id).collect();
        for id in ids {
            self.notify_one(id, device_id);
        }
    }

    fn notify_one(&self, stream: u64, device_id: u64) {
        let Some(slot) = self.slots.get(&stream) else { return };
        let primary = self.primary(&slot.role);
        let (code, message) = match primary {
            Some((id, _)) if id == stream => (Code::Ok, "primary"),
            Some(_) => (Code::AlreadyExists, "backup; a primary exists"),
            None => (Code::NotFound, "no primary"),
        };
        let update = p4::MasterArbitrationUpdate {
            device_id,
            role: (!slot.role.is_empty()).then(|| p4::Role { name: slot.role.clone(), ..Default::default() }),
            election_id: primary.map(|(_, e)| from_u128(e)).or(slot.election_id.map(from_u128)),
            status: Some(RpcStatus { code: code as i32, message: message.into(), details: vec![] }),
        };
        let msg = p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Arbitration(update)),
        };
        let _ = slot.tx.send(Ok(msg));
    }

    /// Checks that a Write/SetPipeline comes from the role's primary.
    pub fn authorize(&self, role: &str, election_id: Option<p4::Uint128>) -> Result<(), Status> {
        match (self.primary(role), to_u128(election_id)) {
            (Some((_, p)), Some(e)) if p == e => Ok(()),
            (None, _) => {
                Err(Status::permission_denied(format!("no primary for role {role:?}; arbitrate first")))
            }
            _ => Err(Status::permission_denied("not the primary client: election id does not match")),
        }
    }

    /// The primary's stream sender for the default role, if any.
    pub fn primary_tx(&self) -> Option<&StreamTx> {
        self.primary("").and_then(|(id, _)| self.slots.get(&id)).map(|s| &s.tx)
    }
}
