//! The P4Runtime gRPC service over a [`Switch`].

use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};

use super::{Pipeline, Switch};
use crate::p4info::P4Info;
use crate::proto::p4::v1 as p4;
use crate::status::batch_status;

use p4::set_forwarding_pipeline_config_request::Action as PipeAction;
use p4::stream_message_request::Update as In;
use p4::stream_message_response::Update as Out;

/// Entities per ReadResponse message.
const READ_CHUNK: usize = 1000;

/// The tonic service; build it with [`Switch::service`].
#[derive(Debug, Clone)]
pub struct Service {
    pub(super) switch: Switch,
}

type ReadStream = tokio_stream::Iter<std::vec::IntoIter<Result<p4::ReadResponse, Status>>>;

impl Switch {
    fn check_device(&self, device_id: u64) -> Result<(), Status> {
        if device_id == self.device_id() {
            Ok(())
        } else {
            Err(Status::not_found(format!("no device {device_id}; this is device {}", self.device_id())))
        }
    }

    /// Whether a request touches a register this switch serves over
    /// P4Runtime (and so takes [`super::SwitchOptions::register_latency`]).
    fn touches_registers<'a>(&self, mut entities: impl Iterator<Item = &'a p4::Entity>) -> bool {
        use p4::entity::Entity as E;
        self.inner.opts.registers_via_p4runtime
            && entities.any(|e| matches!(e.entity, Some(E::RegisterEntry(_))))
    }

    /// Waits out the register latency, before the state is locked (other
    /// RPCs go on meanwhile).
    async fn register_latency(&self) {
        let latency = self.inner.opts.register_latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }

    fn on_stream_message(
        &self,
        stream: u64,
        msg: p4::StreamMessageRequest,
        tx: &super::arbitration::StreamTx,
    ) -> Result<(), Status> {
        let mut core = self.core();
        let arbitrated = core.streams.slots.contains_key(&stream);
        match msg.update {
            Some(In::Arbitration(a)) => {
                self.check_device(a.device_id)?;
                let role = a.role.map(|r| r.name).unwrap_or_default();
                let election = super::arbitration::to_u128(a.election_id);
                core.streams.arbitrate(stream, role, election, tx, self.device_id())?;
                drop(core);
                self.flush_digests();
                Ok(())
            }
            _ if !arbitrated => {
                Err(Status::failed_precondition("the first stream message must be an arbitration update"))
            }
            Some(In::Packet(p)) => {
                if core.streams.primary("").map(|(id, _)| id) != Some(stream) {
                    return stream_error(tx, Status::permission_denied("packet-out from a backup client"));
                }
                let _ = self.inner.packet_out_tx.send(p);
                Ok(())
            }
            Some(In::DigestAck(ack)) => {
                let Some(p) = core.pipeline.as_mut() else {
                    return stream_error(tx, Status::failed_precondition("no pipeline"));
                };
                match p.state.digests.ack(&ack) {
                    Ok(()) => Ok(()),
                    Err(e) => stream_error(tx, Status::not_found(e.to_string())),
                }
            }
            Some(In::Other(_)) | None => {
                stream_error(tx, Status::unimplemented("unsupported stream message"))
            }
        }
    }

    /// Verifies and commits a pipeline from inside the process, as the
    /// switch's owner rather than a client (no arbitration): for a
    /// simulator that runs a switch before, or without, a controller.
    pub fn commit_pipeline(&self, config: p4::ForwardingPipelineConfig) -> Result<(), Status> {
        let raw = config.p4info.clone().ok_or_else(|| Status::invalid_argument("config without P4Info"))?;
        let info = P4Info::new(raw).map_err(|e| Status::invalid_argument(format!("P4Info: {e}")))?;
        if let Some(check) = &self.inner.opts.accepts {
            (check.0)(&info).map_err(|why| {
                Status::invalid_argument(format!("this device cannot run the program: {why}"))
            })?;
        }
        let mut core = self.core();
        let regs = self.inner.opts.registers_via_p4runtime;
        core.pipeline = Some(Pipeline::new(config, info, regs));
        core.pipeline_pushes += 1;
        Ok(())
    }

    fn set_pipeline(&self, r: p4::SetForwardingPipelineConfigRequest) -> Result<(), Status> {
        self.check_device(r.device_id)?;
        let mut core = self.core();
        core.streams.authorize(&r.role, r.election_id)?;
        let action = PipeAction::try_from(r.action).unwrap_or(PipeAction::Unspecified);
        let verify = |c: &Option<p4::ForwardingPipelineConfig>| -> Result<(p4::ForwardingPipelineConfig, P4Info), Status> {
            let c = c.clone().ok_or_else(|| Status::invalid_argument("no config"))?;
            let raw = c.p4info.clone().ok_or_else(|| Status::invalid_argument("config without P4Info"))?;
            let info = P4Info::new(raw).map_err(|e| Status::invalid_argument(format!("P4Info: {e}")))?;
            if let Some(check) = &self.inner.opts.accepts {
                (check.0)(&info).map_err(|why| {
                    Status::invalid_argument(format!("this device cannot run the pushed program: {why}"))
                })?;
            }
            if let Some(program) = &self.inner.opts.tofino_program {
                crate::tofino::TofinoConfig::decode(&c.p4_device_config, program).map_err(|e| {
                    Status::invalid_argument(format!("this Tofino cannot load the pushed device config: {e}"))
                })?;
            }
            Ok((c, info))
        };
        let regs = self.inner.opts.registers_via_p4runtime;
        match action {
            PipeAction::Verify => verify(&r.config).map(|_| ()),
            PipeAction::VerifyAndSave => {
                verify(&r.config)?;
                core.saved = r.config;
                Ok(())
            }
            PipeAction::VerifyAndCommit => {
                let (config, info) = verify(&r.config)?;
                core.pipeline = Some(Pipeline::new(config, info, regs));
                core.pipeline_pushes += 1;
                Ok(())
            }
            PipeAction::Commit => {
                let saved = core.saved.take();
                let (config, info) =
                    verify(&saved).map_err(|_| Status::failed_precondition("nothing saved to commit"))?;
                core.pipeline = Some(Pipeline::new(config, info, regs));
                core.pipeline_pushes += 1;
                Ok(())
            }
            PipeAction::ReconcileAndCommit => {
                let (config, info) = verify(&r.config)?;
                match core.pipeline.as_mut() {
                    Some(p) if p.program.config.p4info == config.p4info => {
                        let (program, cookie) = super::program::Program::intern(config, info);
                        (p.program, p.cookie) = (program, cookie);
                    }
                    _ => core.pipeline = Some(Pipeline::new(config, info, regs)),
                }
                core.pipeline_pushes += 1;
                Ok(())
            }
            PipeAction::Unspecified => Err(Status::invalid_argument("pipeline action unspecified")),
        }
    }
}

fn stream_error(tx: &super::arbitration::StreamTx, s: Status) -> Result<(), Status> {
    let err = p4::StreamError {
        canonical_code: s.code() as i32,
        message: s.message().to_owned(),
        ..Default::default()
    };
    let _ = tx.send(Ok(p4::StreamMessageResponse { update: Some(Out::Error(err)) }));
    Ok(())
}

#[tonic::async_trait]
impl p4::p4_runtime_server::P4Runtime for Service {
    async fn write(&self, request: Request<p4::WriteRequest>) -> Result<Response<p4::WriteResponse>, Status> {
        let r = request.into_inner();
        self.switch.check_device(r.device_id)?;
        if self.switch.touches_registers(r.updates.iter().filter_map(|u| u.entity.as_ref())) {
            self.switch.register_latency().await;
        }
        let mut core = self.switch.core();
        core.streams.authorize(&r.role, r.election_id)?;
        if r.atomicity != p4::write_request::Atomicity::ContinueOnError as i32 {
            return Err(Status::unimplemented("only CONTINUE_ON_ERROR atomicity is supported"));
        }
        let p = core.pipeline.as_mut().ok_or_else(|| Status::failed_precondition("no pipeline installed"))?;
        let now = tokio::time::Instant::now();
        p.state.reserve_inserts(&r.updates);
        let results: Vec<Result<(), Status>> = r.updates.into_iter().map(|u| p.state.apply(u, now)).collect();
        core.writes += results.iter().filter(|r| r.is_ok()).count() as u64;
        match batch_status(&results) {
            None => Ok(Response::new(p4::WriteResponse {})),
            Some(s) => Err(s),
        }
    }

    type ReadStream = ReadStream;

    async fn read(&self, request: Request<p4::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let r = request.into_inner();
        self.switch.check_device(r.device_id)?;
        if self.switch.touches_registers(r.entities.iter()) {
            self.switch.core().register_reads += 1;
            self.switch.register_latency().await;
        }
        let core = self.switch.core();
        let p = core.pipeline.as_ref().ok_or_else(|| Status::failed_precondition("no pipeline installed"))?;
        let mut out = vec![];
        for e in &r.entities {
            p.state.read(e, &mut out)?;
        }
        let chunks: Vec<Result<p4::ReadResponse, Status>> = if out.is_empty() {
            vec![Ok(p4::ReadResponse { entities: vec![] })]
        } else {
            out.chunks(READ_CHUNK).map(|c| Ok(p4::ReadResponse { entities: c.to_vec() })).collect()
        };
        Ok(Response::new(tokio_stream::iter(chunks)))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        self.switch.set_pipeline(request.into_inner())?;
        Ok(Response::new(p4::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::GetForwardingPipelineConfigResponse>, Status> {
        use p4::get_forwarding_pipeline_config_request::ResponseType as T;
        let r = request.into_inner();
        self.switch.check_device(r.device_id)?;
        let core = self.switch.core();
        let Some(p) = core.pipeline.as_ref() else {
            return Ok(Response::new(p4::GetForwardingPipelineConfigResponse { config: None }));
        };
        let mut c = p.config();
        match T::try_from(r.response_type).unwrap_or(T::All) {
            T::All => {}
            T::CookieOnly => {
                c.p4info = None;
                c.p4_device_config.clear();
            }
            T::P4infoAndCookie => c.p4_device_config.clear(),
            T::DeviceConfigAndCookie => c.p4info = None,
        }
        Ok(Response::new(p4::GetForwardingPipelineConfigResponse { config: Some(c) }))
    }

    type StreamChannelStream = UnboundedReceiverStream<Result<p4::StreamMessageResponse, Status>>;

    async fn stream_channel(
        &self,
        request: Request<tonic::Streaming<p4::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sw = self.switch.clone();
        let id = {
            let mut core = sw.core();
            core.streams.next += 1;
            core.streams.next
        };
        tokio::spawn(async move {
            while let Some(Ok(msg)) = inbound.next().await {
                if let Err(s) = sw.on_stream_message(id, msg, &tx) {
                    let _ = tx.send(Err(s));
                    break;
                }
            }
            let device = sw.device_id();
            sw.core().streams.remove(id, device);
        });
        Ok(Response::new(UnboundedReceiverStream::new(rx)))
    }

    async fn capabilities(
        &self,
        _request: Request<p4::CapabilitiesRequest>,
    ) -> Result<Response<p4::CapabilitiesResponse>, Status> {
        Ok(Response::new(p4::CapabilitiesResponse {
            p4runtime_api_version: "1.6.0".into(),
            ..Default::default()
        }))
    }
}
