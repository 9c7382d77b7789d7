//! The StreamChannel task of a session. It owns the stream: arbitrates,
//! acks every DigestList, sends packet-outs, and after a drop reconnects
//! with backoff ([`crate::Backoff`], with jitter), re-arbitrates and re-configures the digests, while the
//! callers' subscriptions stay in place.

use std::collections::HashSet;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::{election, Cmd, RoleState, SessionConfig, Transport};
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_client::P4RuntimeClient;

use p4::stream_message_request::Update as Out;
use p4::stream_message_response::Update as In;

/// Something that happened on a session's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An arbitration answer: are we primary, and whose election id wins.
    /// A new subscription starts with the standing role.
    Role {
        primary: bool,
        election_id: Option<u128>,
    },
    /// A digest list; it has been acked already.
    Digest(p4::DigestList),
    /// A list for a digest id the P4Info does not have; not acked.
    UnknownDigest {
        digest_id: u32,
        list_id: u64,
    },
    PacketIn(p4::PacketIn),
    IdleTimeout(p4::IdleTimeoutNotification),
    /// The server reported an error about something we sent on the stream.
    StreamError(p4::StreamError),
    /// The stream ended; the session is reconnecting.
    Disconnected {
        reason: String,
    },
    /// The stream is back and arbitration was re-sent.
    Reconnected,
}

struct Task {
    cfg: SessionConfig,
    client: P4RuntimeClient<Transport>,
    /// The client's channel, for the pipeline push ([`super::push::send`]).
    channel: Transport,
    role: watch::Sender<RoleState>,
    subscribers: Vec<mpsc::UnboundedSender<Event>>,
    known_digests: HashSet<u32>,
    digests: Vec<p4::DigestEntry>,
    pipeline: Option<(std::sync::Arc<super::push::Program>, Option<p4::forwarding_pipeline_config::Cookie>)>,
}

pub(super) async fn run(
    cfg: SessionConfig,
    client: P4RuntimeClient<Transport>,
    channel: Transport,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    role: watch::Sender<RoleState>,
) {
    let mut t = Task {
        cfg,
        client,
        channel,
        role,
        subscribers: vec![],
        known_digests: HashSet::new(),
        digests: vec![],
        pipeline: None,
    };
    let mut backoff = crate::Backoff::new(t.cfg.backoff_initial, t.cfg.backoff_max);
    let mut jitter = crate::Jitter::new(crate::Jitter::seed_for(t.cfg.device_id));
    let mut first = true;
    loop {
        match t.open().await {
            Ok((out, inbound)) => {
                if !first {
                    t.emit(Event::Reconnected);
                }
                first = false;
                let opened = tokio::time::Instant::now();
                let reason = t.serve(out, inbound, &mut cmds).await;
                let Some(reason) = reason else { return };
                // A stream that drops soon after it opened keeps backing
                // off: a switch that accepts and then fails each stream is
                // not hammered with reconnects.
                backoff.ended_after(opened.elapsed());
                tracing::warn!(device_id = t.cfg.device_id, %reason, "stream dropped; reconnecting");
                t.role.send_modify(|r| r.primary = false);
                t.emit(Event::Disconnected { reason });
            }
            Err(e) => tracing::debug!(device_id = t.cfg.device_id, error = %e, "stream open failed"),
        }
        // Commands that arrive while disconnected are kept (subscriptions)
        // or refused (packet-outs are dropped: there is no stream).
        let sleep = tokio::time::sleep(backoff.delay(jitter.unit()));
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => break,
                c = cmds.recv() => match c {
                    None => return,
                    Some(c) => t.command(c, None).await,
                },
            }
        }
    }
}

impl Task {
    fn emit(&mut self, e: Event) {
        self.subscribers.retain(|s| s.send(e.clone()).is_ok());
    }

    async fn open(
        &mut self,
    ) -> Result<(mpsc::Sender<p4::StreamMessageRequest>, tonic::Streaming<p4::StreamMessageResponse>), String>
    {
        let (tx, rx) = mpsc::channel(4096);
        let arbitration = self.arbitration();
        tx.send(p4::StreamMessageRequest { update: Some(Out::Arbitration(arbitration)) })
            .await
            .map_err(|e| e.to_string())?;
        let fut = self.client.stream_channel(ReceiverStream::new(rx));
        match tokio::time::timeout(self.cfg.rpc_timeout, fut).await {
            Err(_) => Err(format!("StreamChannel not answered within {:?}", self.cfg.rpc_timeout)),
            Ok(Err(s)) => Err(format!("StreamChannel: {:?}: {}", s.code(), s.message())),
            Ok(Ok(r)) => Ok((tx, r.into_inner())),
        }
    }

    /// Our arbitration request, with the election id we hold now.
    fn arbitration(&self) -> p4::MasterArbitrationUpdate {
        p4::MasterArbitrationUpdate {
            device_id: self.cfg.device_id,
            role: (!self.cfg.role.is_empty())
                .then(|| p4::Role { name: self.cfg.role.clone(), ..Default::default() }),
            election_id: Some(election(self.cfg.election_id)),
            status: None,
        }
    }

    /// Runs one stream until it ends; `None` when the session is dropped.
    async fn serve(
        &mut self,
        out: mpsc::Sender<p4::StreamMessageRequest>,
        mut inbound: tonic::Streaming<p4::StreamMessageResponse>,
        cmds: &mut mpsc::UnboundedReceiver<Cmd>,
    ) -> Option<String> {
        loop {
            tokio::select! {
                c = cmds.recv() => match c {
                    None => return None,
                    Some(c) => self.command(c, Some(&out)).await,
                },
                m = inbound.message() => match m {
                    Ok(Some(m)) => self.on_message(m, &out).await,
                    Ok(None) => return Some("the server closed the stream".into()),
                    Err(s) => {
                        let reason = format!("{:?}: {}", s.code(), s.message());
                        if is_refusal(s.code()) {
                            self.role.send_modify(|r| r.refused = Some(reason.clone()));
                        }
                        return Some(reason);
                    }
                },
            }
        }
    }

    async fn command(&mut self, c: Cmd, out: Option<&mpsc::Sender<p4::StreamMessageRequest>>) {
        match c {
            Cmd::Subscribe(s) => {
                // The first arbitration answer came before anyone could
                // subscribe (connect waits for it): a new subscriber hears
                // the standing role first, then every change.
                let r = self.role.borrow().clone();
                if r.generation > 0
                    && s.send(Event::Role { primary: r.primary, election_id: r.election_id }).is_err()
                {
                    return;
                }
                self.subscribers.push(s);
            }
            Cmd::KnownDigests(ids) => self.known_digests = ids,
            Cmd::Pipeline(p, cookie) => self.pipeline = Some((p, cookie)),
            Cmd::Digest(d) => {
                self.digests.retain(|x| x.digest_id != d.digest_id);
                self.digests.push(d);
            }
            Cmd::Elect(id) => {
                self.cfg.election_id = id;
                if let Some(out) = out {
                    let update = Out::Arbitration(self.arbitration());
                    let _ = out.send(p4::StreamMessageRequest { update: Some(update) }).await;
                }
            }
            Cmd::PacketOut(p) => match out {
                Some(out) => {
                    let _ = out.send(p4::StreamMessageRequest { update: Some(Out::Packet(p)) }).await;
                }
                None => tracing::warn!(device_id = self.cfg.device_id, "packet-out dropped: stream is down"),
            },
        }
    }

    async fn on_message(
        &mut self,
        m: p4::StreamMessageResponse,
        out: &mpsc::Sender<p4::StreamMessageRequest>,
    ) {
        match m.update {
            Some(In::Arbitration(a)) => {
                let primary = a.status.as_ref().is_some_and(|s| s.code == 0);
                let election_id = a.election_id.map(|u| (u128::from(u.high) << 64) | u128::from(u.low));
                let was = self.role.borrow().primary;
                self.role.send_modify(|r| {
                    r.refused = None;
                    r.primary = primary;
                    r.election_id = election_id;
                    r.generation += 1;
                });
                tracing::info!(device_id = self.cfg.device_id, primary, ?election_id, "arbitration");
                if primary && !was {
                    self.restore_pipeline().await;
                    self.reconfigure_digests().await;
                }
                self.emit(Event::Role { primary, election_id });
            }
            Some(In::Digest(d)) => {
                if !self.known_digests.is_empty() && !self.known_digests.contains(&d.digest_id) {
                    tracing::warn!(
                        device_id = self.cfg.device_id,
                        digest_id = d.digest_id,
                        "digest list for unknown digest id"
                    );
                    self.emit(Event::UnknownDigest { digest_id: d.digest_id, list_id: d.list_id });
                    return;
                }
                let ack = p4::DigestListAck { digest_id: d.digest_id, list_id: d.list_id };
                let _ = out.send(p4::StreamMessageRequest { update: Some(Out::DigestAck(ack)) }).await;
                self.emit(Event::Digest(d));
            }
            Some(In::Packet(p)) => self.emit(Event::PacketIn(p)),
            Some(In::IdleTimeoutNotification(n)) => self.emit(Event::IdleTimeout(n)),
            Some(In::Error(e)) => {
                tracing::warn!(device_id = self.cfg.device_id, code = e.canonical_code, message = %e.message, "stream error");
                self.emit(Event::StreamError(e));
            }
            Some(In::Other(_)) | None => {}
        }
    }

    /// Pushes the remembered pipeline again if the switch no longer runs
    /// it (it restarted), so that digests and writes have their program.
    async fn restore_pipeline(&mut self) {
        use p4::get_forwarding_pipeline_config_request::ResponseType;
        let Some((shared, cookie)) = self.pipeline.as_ref() else { return };
        let want = cookie.map(|c| c.cookie);
        let get = p4::GetForwardingPipelineConfigRequest {
            device_id: self.cfg.device_id,
            response_type: ResponseType::CookieOnly as i32,
        };
        let got =
            tokio::time::timeout(self.cfg.rpc_timeout, self.client.get_forwarding_pipeline_config(get)).await;
        let running = match got {
            Ok(Ok(r)) => r.into_inner().config.and_then(|c| c.cookie).map(|c| c.cookie),
            _ => None,
        };
        if running == want {
            return;
        }
        let req = tonic::Request::new(super::push_request(&self.cfg, shared.clone(), *cookie));
        let pushed =
            tokio::time::timeout(self.cfg.rpc_timeout, super::push::send(self.channel.clone(), req)).await;
        match pushed {
            Ok(Ok(_)) => tracing::info!(device_id = self.cfg.device_id, "pipeline restored after reconnect"),
            Ok(Err(s)) => {
                tracing::warn!(device_id = self.cfg.device_id, code = ?s.code(), message = %s.message(), "pipeline restore failed")
            }
            Err(_) => tracing::warn!(device_id = self.cfg.device_id, "pipeline restore timed out"),
        }
    }

    /// Writes the remembered digest configs again (the switch may have
    /// restarted and forgotten them).
    async fn reconfigure_digests(&mut self) {
        for d in self.digests.clone() {
            for t in [p4::update::Type::Insert, p4::update::Type::Modify] {
                let req = p4::WriteRequest {
                    device_id: self.cfg.device_id,
                    role: self.cfg.role.clone(),
                    election_id: Some(election(self.cfg.election_id)),
                    updates: vec![p4::Update { r#type: t as i32, entity: Some(d.into()) }],
                    ..Default::default()
                };
                let r = tokio::time::timeout(self.cfg.rpc_timeout, self.client.write(req)).await;
                if matches!(r, Ok(Ok(_))) {
                    break;
                }
            }
        }
    }
}

/// Stream errors that say "this arbitration request is wrong", as opposed
/// to "the server went away".
fn is_refusal(code: tonic::Code) -> bool {
    use tonic::Code;
    matches!(code, Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition | Code::PermissionDenied)
}
