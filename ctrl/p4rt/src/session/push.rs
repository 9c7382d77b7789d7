//! The pipeline push without encoding the program once per switch.
//!
//! A `SetForwardingPipelineConfigRequest` carries the whole program (the
//! P4Info and megabytes of BMv2 JSON). Through tonic's generated client
//! every push encoded it again into a buffer that starts at 8 KiB and
//! doubles as it fills: at 1,280 switches `perf` put that encoding (the
//! copies of each doubling and the kernel zeroing the new buffers' pages)
//! at 16% of the controller's CPU. Here the program is encoded once per
//! process ([`Program`]); a push writes the small request fields, then
//! the shared encoding and the switch's cookie, into a buffer sized once.
//! Protobuf decodes fields in any order, so the switch sees the same
//! request.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, message, WireType};
use prost::Message;
use tonic::codec::{Codec, EncodeBuf, Encoder};

use crate::proto::p4::v1 as p4;

/// The `config` field of `SetForwardingPipelineConfigRequest`.
const CONFIG_FIELD: u32 = 5;
/// The `cookie` field of `ForwardingPipelineConfig`.
const COOKIE_FIELD: u32 = 3;

/// A program as pushed, without its cookie, and its protobuf encoding;
/// held once per process for every session that pushes it.
#[derive(Debug)]
pub(crate) struct Program {
    pub config: p4::ForwardingPipelineConfig,
    encoded: Bytes,
}

impl Program {
    pub fn new(mut config: p4::ForwardingPipelineConfig) -> Self {
        config.cookie = None;
        let encoded = Bytes::from(config.encode_to_vec());
        Program { config, encoded }
    }
}

/// A push: the request's own fields (`head`, its config left out), the
/// shared program and this switch's cookie.
#[derive(Debug, Clone)]
pub(crate) struct Push {
    pub head: p4::SetForwardingPipelineConfigRequest,
    pub program: std::sync::Arc<Program>,
    pub cookie: Option<p4::forwarding_pipeline_config::Cookie>,
}

impl Push {
    /// The encoded config's length: the program, then the cookie.
    fn config_len(&self) -> usize {
        self.program.encoded.len() + self.cookie.as_ref().map_or(0, |c| message::encoded_len(COOKIE_FIELD, c))
    }

    pub fn encoded_len(&self) -> usize {
        let config = self.config_len();
        self.head.encoded_len() + key_len(CONFIG_FIELD) + encoded_len_varint(config as u64) + config
    }

    /// Writes the request as protobuf: what decoding it gives equals
    /// `head` with the program and the cookie as its config.
    pub fn encode(&self, dst: &mut impl BufMut) {
        self.head.encode_raw(dst);
        encode_key(CONFIG_FIELD, WireType::LengthDelimited, dst);
        encode_varint(self.config_len() as u64, dst);
        dst.put_slice(&self.program.encoded);
        if let Some(c) = &self.cookie {
            message::encode(COOKIE_FIELD, c, dst);
        }
    }
}

/// The codec of the push RPC: [`Push`] out, the (empty) response in.
#[derive(Debug, Default)]
pub(crate) struct PushCodec;

/// Encodes a [`Push`] into a buffer reserved at its full size.
#[derive(Debug, Default)]
pub(crate) struct PushEncoder(PhantomData<Push>);

impl Encoder for PushEncoder {
    type Item = Push;
    type Error = tonic::Status;

    fn encode(&mut self, item: Push, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst);
        Ok(())
    }
}

impl Codec for PushCodec {
    type Encode = Push;
    type Decode = p4::SetForwardingPipelineConfigResponse;
    type Encoder = PushEncoder;
    type Decoder = tonic_prost::ProstDecoder<p4::SetForwardingPipelineConfigResponse>;

    fn encoder(&mut self) -> Self::Encoder {
        PushEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::default()
    }
}

/// The RPC's path, as the generated client names it.
const PATH: &str = "/p4.v1.P4Runtime/SetForwardingPipelineConfig";

/// Sends `req` over `channel` (the session's first push and the stream's
/// restore after a switch restart alike).
pub(crate) async fn send(
    channel: super::Transport,
    req: tonic::Request<Push>,
) -> Result<tonic::Response<p4::SetForwardingPipelineConfigResponse>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(format!("the channel is not ready: {e}")))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(PATH);
    grpc.unary(req, path, PushCodec).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn config() -> p4::ForwardingPipelineConfig {
        let mut info = crate::proto::p4::config::v1::P4Info::default();
        info.tables.push(crate::proto::p4::config::v1::Table {
            preamble: Some(crate::proto::p4::config::v1::Preamble {
                id: 7,
                name: "Ingress.t".into(),
                ..Default::default()
            }),
            size: 1024,
            ..Default::default()
        });
        p4::ForwardingPipelineConfig {
            p4info: Some(info),
            p4_device_config: Bytes::from(vec![42u8; 300_000]),
            cookie: Some(p4::forwarding_pipeline_config::Cookie { cookie: 99 }),
        }
    }

    fn head() -> p4::SetForwardingPipelineConfigRequest {
        p4::SetForwardingPipelineConfigRequest {
            device_id: 3,
            role: "r".into(),
            election_id: Some(p4::Uint128 { high: 1, low: 2 }),
            action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
            ..Default::default()
        }
    }

    #[test]
    fn a_push_decodes_as_the_request_with_the_program_and_the_cookie() {
        let program = Arc::new(Program::new(config()));
        assert_eq!(program.config.cookie, None, "the shared program holds no cookie");
        for cookie in [
            None,
            Some(p4::forwarding_pipeline_config::Cookie { cookie: u64::MAX }),
            Some(Default::default()),
        ] {
            let push = Push { head: head(), program: program.clone(), cookie };
            let mut buf = Vec::new();
            push.encode(&mut buf);
            assert_eq!(buf.len(), push.encoded_len());
            let got = p4::SetForwardingPipelineConfigRequest::decode(buf.as_slice()).unwrap();
            let mut want = head();
            want.config = Some(p4::ForwardingPipelineConfig { cookie, ..config() });
            assert_eq!(got, want);
        }
    }
}
