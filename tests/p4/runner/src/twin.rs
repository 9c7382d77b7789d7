//! The simulator's pipeline twin as a target: a fresh in-process switch
//! per case, set up over a real P4Runtime session (in memory) exactly as
//! BMv2 is, and played in virtual time, so a run is fast and the same
//! every time. Packets leave through the twin's queue model; packet-ins
//! and digests reach the session through the server, as a controller
//! would get them.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::session::{Bmv2Json, Event};
use metaroce_p4rt::{Bits, P4Info, Session, SessionConfig};
use metaroce_pipeline::Pipeline;
use metaroce_sim::twin::{Output, Queue, Twin};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::case::{Action, Case, CPU_PORT};
use crate::check::{Observed, Sent};
use crate::run::{bits, decode_event, install, read_counters, write};
use crate::target::Target;

/// Virtual time of the first step (µs after the switch started). Not 0:
/// the program reads a zero timestamp register as "never", and on BMv2
/// the first packet never arrives at time 0 either.
const START_US: u64 = 1_000_000;
/// How long to wait for the in-memory stream to deliver what the twin
/// sent; only a broken server takes this long.
const DELIVERY: Duration = Duration::from_secs(10);

/// The twin target; one runtime for every case.
#[derive(Debug)]
pub struct TwinTarget {
    rt: tokio::runtime::Runtime,
    pipeline: Pipeline,
}

impl TwinTarget {
    /// Loads the program the twin models (`p4src/build`); a P4Info that
    /// does not match the contract fails here, naming every mismatch.
    pub fn new(build: &std::path::Path) -> Result<Self> {
        let pipeline = Pipeline::load(&build.join("main.p4info.txtpb"), &build.join("main.json"))
            .context("loading the program for the twin")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("starting tokio")?;
        Ok(TwinTarget { rt, pipeline })
    }
}

impl Target for TwinTarget {
    fn name(&self) -> &'static str {
        "twin"
    }

    fn skips(&self, _case: &Case) -> Option<String> {
        None
    }

    fn run(&mut self, case: &Case) -> Result<Observed> {
        self.rt.block_on(run_case(&self.pipeline, case))
    }
}

struct Rig {
    twin: Twin,
    session: Session,
    events: UnboundedReceiver<Event>,
    info: P4Info,
    obs: Observed,
    /// Digest items and packet-ins received from the session so far.
    received: (u64, u64),
}

async fn run_case(pipeline: &Pipeline, case: &Case) -> Result<Observed> {
    let switch = Switch::new(SwitchOptions::default());
    let cfg = SessionConfig::new(format!("twin:{}", case.name), switch.device_id());
    let session = Session::connect_with(cfg, switch.in_memory_channel()).await?;
    session.wait_primary().await?;
    let info = pipeline.info().clone();
    session
        .set_pipeline(&info, &Bmv2Json(pipeline.device_config().to_vec()), None)
        .await
        .context("pushing the pipeline")?;
    let events = session.subscribe()?;
    let twin = Twin::new(pipeline, switch)?;
    let mut rig = Rig { twin, session, events, info, obs: Observed::default(), received: (0, 0) };
    install(&rig.session, &rig.info, case).await?;
    for q in &case.setup.queues {
        rig.twin.set_queue(q.port, Queue { rate_pps: q.rate_pps, depth_pkts: q.depth_pkts })?;
    }
    let before = read_counters(&rig.session, &rig.info, case).await?;
    let end = rig.play(case).await?;
    let out = rig.twin.advance(end + case.expect.settle_ms * 1000)?;
    rig.collect(out);
    rig.delivered().await?;
    let after = read_counters(&rig.session, &rig.info, case).await?;
    for (k, v) in after {
        let b = before.get(&k).copied().unwrap_or(0);
        rig.obs.counters.insert(k, v.saturating_sub(b));
    }
    for r in &case.expect.registers {
        let got = rig
            .session
            .read_register(&rig.info, &r.name, Some(r.index))
            .await
            .with_context(|| format!("reading register {}[{}]", r.name, r.index))?;
        if let Some((_, v)) = got.first() {
            rig.obs.registers.insert((r.name.clone(), r.index), *v);
        }
    }
    Ok(rig.obs)
}

impl Rig {
    /// Plays the steps in order at their virtual times (a step due while
    /// an earlier one's copies are still going waits for them, as on
    /// BMv2); returns the time of the last.
    async fn play(&mut self, case: &Case) -> Result<u64> {
        let mut now = START_US;
        for step in &case.steps {
            let at = START_US + step.at_us;
            match &step.action {
                Action::Send { port, packet, repeat, packet_out } => {
                    let base = packet.written();
                    for i in 0..repeat.count {
                        now = now.max(at + repeat.interval_us * i);
                        let built = packet.build(&repeat.overrides(i, &base)).map_err(|m| anyhow!(m))?;
                        if *port == CPU_PORT {
                            self.packet_out(built.bytes, packet_out, now).await?;
                        } else {
                            let out = self.twin.process(*port, &built.bytes, now)?;
                            self.collect(out);
                        }
                    }
                }
                Action::Write(ops) => {
                    now = now.max(at);
                    // What left before the write saw the state before it.
                    let out = self.twin.advance(now)?;
                    self.collect(out);
                    write(&self.session, &self.info, ops, &format!("write step at {} us", step.at_us))
                        .await?;
                }
            }
        }
        Ok(now)
    }

    /// A packet-out through the session, then through the twin once the
    /// server has it.
    async fn packet_out(&mut self, bytes: Vec<u8>, meta: &[(String, u128)], now: u64) -> Result<()> {
        let meta: Vec<(&str, Bits)> = meta.iter().map(|(n, v)| (n.as_str(), bits(*v))).collect();
        self.session.packet_out(bytes, self.info.packet_metadata("packet_out", &meta)?)?;
        let deadline = tokio::time::Instant::now() + DELIVERY;
        loop {
            let out = self.twin.packet_outs(now)?;
            if !out.is_empty() {
                self.collect(out);
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the packet-out never reached the switch");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Frames on data ports; packet-ins arrive through the session.
    fn collect(&mut self, out: Vec<Output>) {
        for o in out {
            if let Output::Packet { port, bytes, .. } = o {
                self.obs.outputs.push(Sent { port, bytes, meta: vec![] });
            }
        }
    }

    /// Waits until the session has every digest and packet-in the twin
    /// handed to the server, decoding them as the BMv2 runner does.
    async fn delivered(&mut self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + DELIVERY;
        while self.received != self.twin.sent_to_controller() {
            let ev = tokio::time::timeout_at(deadline, self.events.recv()).await.map_err(|_| {
                anyhow!(
                    "the session got {:?} of the (digests, packet-ins) {:?} the twin sent",
                    self.received,
                    self.twin.sent_to_controller()
                )
            })?;
            let Some(ev) = ev else { bail!("the session's event stream ended") };
            match &ev {
                Event::Digest(list) => self.received.0 += list.data.len() as u64,
                Event::PacketIn(_) => self.received.1 += 1,
                _ => {}
            }
            decode_event(&self.info, ev, &mut self.obs)?;
        }
        Ok(())
    }
}
