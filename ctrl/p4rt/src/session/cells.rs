//! A register poll's Read, encoded once and answered slim.
//!
//! An idle controller's work is mostly its pollers' audits: every switch
//! asks the same register and counter cells every round. Through the
//! generated client every round encoded the same `ReadRequest` again, and
//! decoded the answer into `Entity` values, an enum each element of which
//! is as large as its largest variant (a table entry), moved several times
//! on the way to the caller. Here the request is encoded once
//! ([`CellsRequest`]), and the answer decodes into [`CellsResponse`], a
//! message that declares only the two fields of `Entity` a poll asks for:
//! `counter_entry` (7) and `register_entry` (11). Protobuf readers skip
//! the fields a message does not declare, so the switch sees the same
//! request and sends the same answer; an entity of any other kind in it
//! decodes to a [`CellEntity`] with no cell.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use prost::Message;
use tonic::codec::{Codec, EncodeBuf, Encoder};

use super::SessionError;
use crate::proto::p4::v1 as p4;

/// A `ReadRequest`, encoded.
#[derive(Debug, Clone)]
pub struct CellsRequest(Bytes);

impl CellsRequest {
    pub fn new(req: &p4::ReadRequest) -> Self {
        CellsRequest(Bytes::from(req.encode_to_vec()))
    }

    /// The entities it asks, decoded again (for a target that answers
    /// only some of them over P4Runtime).
    pub fn entities(&self, device_id: u64) -> Result<Vec<p4::Entity>, SessionError> {
        p4::ReadRequest::decode(self.0.clone())
            .map(|r| r.entities)
            .map_err(|e| SessionError::Prepared { device_id, message: e.to_string() })
    }
}

/// A `ReadResponse` as a poll reads it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CellsResponse {
    #[prost(message, repeated, tag = "1")]
    pub entities: Vec<CellEntity>,
}

/// An `Entity` as a poll reads it: a counter or a register cell.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CellEntity {
    #[prost(oneof = "Cell", tags = "7, 11")]
    pub cell: Option<Cell>,
}

/// The two kinds of `Entity` a poll asks for, at their field numbers.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Cell {
    #[prost(message, tag = "7")]
    Counter(p4::CounterEntry),
    #[prost(message, tag = "11")]
    Register(p4::RegisterEntry),
}

impl From<p4::Entity> for CellEntity {
    fn from(e: p4::Entity) -> Self {
        use p4::entity::Entity as E;
        let cell = match e.entity {
            Some(E::CounterEntry(c)) => Some(Cell::Counter(c)),
            Some(E::RegisterEntry(r)) => Some(Cell::Register(r)),
            _ => None,
        };
        CellEntity { cell }
    }
}

#[derive(Debug, Default)]
pub(crate) struct CellsCodec;

#[derive(Debug, Default)]
pub(crate) struct CellsEncoder(PhantomData<CellsRequest>);

impl Encoder for CellsEncoder {
    type Item = CellsRequest;
    type Error = tonic::Status;

    fn encode(&mut self, item: CellsRequest, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.reserve(item.0.len());
        dst.put_slice(&item.0);
        Ok(())
    }
}

impl Codec for CellsCodec {
    type Encode = CellsRequest;
    type Decode = CellsResponse;
    type Encoder = CellsEncoder;
    type Decoder = tonic_prost::ProstDecoder<CellsResponse>;

    fn encoder(&mut self) -> Self::Encoder {
        CellsEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::default()
    }
}

pub(crate) const PATH: &str = "/p4.v1.P4Runtime/Read";

/// Starts the Read.
pub(crate) async fn send(
    channel: super::Transport,
    req: tonic::Request<CellsRequest>,
) -> Result<tonic::Response<tonic::Streaming<CellsResponse>>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(format!("the channel is not ready: {e}")))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(PATH);
    grpc.server_streaming(req, path, CellsCodec).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(id: u32, index: i64, bits: &[u8]) -> p4::Entity {
        p4::Entity {
            entity: Some(p4::entity::Entity::RegisterEntry(p4::RegisterEntry {
                register_id: id,
                index: Some(p4::Index { index }),
                data: Some(p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(bits.to_vec())) }),
            })),
        }
    }

    fn counter(id: u32, index: i64, packets: i64) -> p4::Entity {
        p4::Entity {
            entity: Some(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                counter_id: id,
                index: Some(p4::Index { index }),
                data: Some(p4::CounterData { byte_count: packets * 100, packet_count: packets }),
            })),
        }
    }

    /// What the switch sends decodes as it did through `ReadResponse`,
    /// with the entities a poll does not read left without a cell.
    #[test]
    fn an_answer_decodes_as_the_full_message_did() {
        let table = p4::Entity {
            entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
                table_id: 9,
                priority: 3,
                ..Default::default()
            })),
        };
        let full = p4::ReadResponse {
            entities: vec![register(5, 1, &[0, 7]), counter(6, 2, 42), table, register(5, 0, &[])],
        };
        let slim = CellsResponse::decode(full.encode_to_vec().as_slice()).unwrap();
        let want: Vec<CellEntity> = full.entities.into_iter().map(CellEntity::from).collect();
        assert_eq!(slim.entities, want);
        assert_eq!(slim.entities[2].cell, None, "a table entry is skipped, not an error");
        assert!(
            matches!(&slim.entities[1].cell, Some(Cell::Counter(c)) if c.data.unwrap().packet_count == 42)
        );
    }

    /// The request goes on the wire as the generated client encodes it.
    #[test]
    fn a_request_is_encoded_once_as_the_generated_client_would() {
        let req = p4::ReadRequest {
            device_id: 3,
            role: "poll".into(),
            entities: vec![register(5, 1, &[]), counter(6, 2, 0)],
        };
        let encoded = CellsRequest::new(&req);
        assert_eq!(p4::ReadRequest::decode(encoded.0.clone()).unwrap(), req);
        assert_eq!(encoded.0.len(), req.encoded_len());
    }
}
