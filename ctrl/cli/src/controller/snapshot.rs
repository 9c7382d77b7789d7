//! `metaroce controller snapshot` and `rollback`: one short-lived agent or
//! backup session per switch, beside (never against) a running controller.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use metaroce_controller::agent::{self, AgentEvent, Goal, Wanted};
use metaroce_controller::daemon::{self, Config};
use metaroce_controller::snapshot::{SnapshotDoc, SNAPSHOT_VERSION};
use metaroce_p4rt::{Session, SessionError};
use metaroce_pipeline::Pipeline;
use metaroce_topo::Topology;
use tokio::sync::{mpsc, watch};

use super::{load_or_exit, load_pipeline, load_topology, RollbackArgs, SnapshotArgs};
use crate::Exit;

/// Runs `f` for every switch at once; the results in switch order.
async fn per_switch<T, F, Fut>(topo: &Topology, f: F) -> Vec<Result<T, String>>
where
    T: Send + 'static,
    F: Fn(Arc<Topology>, usize) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    let topo = Arc::new(topo.clone());
    let tasks: Vec<_> = (0..topo.switches.len()).map(|s| tokio::spawn(f(topo.clone(), s))).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| Err(format!("the task failed: {e}"))));
    }
    out
}

/// A session that only reads: a low election id, so a running controller
/// (election id 10 by default) stays primary. P4Runtime lets a backup read.
/// Another reader may hold the same id: the next one is tried.
async fn backup_session(topo: &Topology, s: usize, timeout: Duration) -> Result<Session, String> {
    let mut last = String::new();
    for election_id in 1..=4u128 {
        let mut cfg = daemon::session_config(topo, s, election_id);
        cfg.connect_attempts = 3;
        cfg.rpc_timeout = timeout;
        cfg.connect_timeout = timeout.min(Duration::from_secs(5));
        match tokio::time::timeout(timeout, Session::connect(cfg)).await {
            Err(_) => return Err(format!("no answer within {timeout:?}")),
            Ok(Ok(session)) => return Ok(session),
            Ok(Err(e @ SessionError::Refused { .. })) => last = e.to_string(),
            Ok(Err(e)) => return Err(e.to_string()),
        }
    }
    Err(last)
}

/// The switches on which another client (a running controller) is primary.
async fn held_by_a_primary(topo: &Topology, timeout: Duration) -> anyhow::Result<Vec<String>> {
    let probes = per_switch(topo, |topo, s| async move {
        let session = backup_session(&topo, s, timeout).await?;
        let role = session.role();
        Ok(!role.primary && role.election_id.is_some_and(|e| e != session.config().election_id))
    })
    .await;
    let mut held = Vec::new();
    let mut failed = Vec::new();
    for (s, r) in probes.into_iter().enumerate() {
        let name = topo.switches[s].name.clone();
        match r {
            Ok(true) => held.push(name),
            Ok(false) => {}
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    if !failed.is_empty() {
        bail!("cannot reach {} (is the fabric up? check the p4rt addresses)", failed.join("; "));
    }
    Ok(held)
}

/// Runs one agent per switch until each reports `Up` (and, with a target, `Synced`).
async fn visit(
    topo: &Topology,
    pipeline: Arc<Pipeline>,
    election_id: u128,
    dry_run: bool,
    targets: Vec<Option<Goal>>,
    timeout: Duration,
) -> anyhow::Result<BTreeMap<usize, AgentEvent>> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (ev_tx, mut ev_rx) = mpsc::channel(1024);
    let mut cfg = Config::new(topo.clone(), pipeline.clone());
    cfg.election_id = election_id;
    cfg.dry_run = dry_run;
    let mut want: BTreeMap<usize, bool> = BTreeMap::new();
    for (s, target) in targets.into_iter().enumerate() {
        let mut a = daemon::agent_config(&cfg, s)?;
        a.ports.clear(); // no register polling
        want.insert(s, target.is_some());
        let (_tx, rx) = watch::channel(target.map(|target| Arc::new(Wanted { target, caused_at: None })));
        let fut = agent::run(a, pipeline.clone(), rx, ev_tx.clone(), stop_rx.clone());
        tokio::spawn(async move {
            let _tx = _tx;
            fut.await
        });
    }
    let mut done = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + timeout;
    while done.len() < want.len() {
        let ev = tokio::time::timeout_at(deadline, ev_rx.recv()).await;
        match ev {
            Ok(Some(e @ AgentEvent::Up { switch, .. })) if !want[&switch] => {
                done.insert(switch, e);
            }
            Ok(Some(e @ AgentEvent::Synced { switch, .. })) => {
                done.insert(switch, e);
            }
            // Already at the target: no pass had anything to write.
            Ok(Some(e @ AgentEvent::Programmed { switch })) if want[&switch] => {
                done.entry(switch).or_insert(e);
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                let missing: Vec<&str> = want
                    .keys()
                    .filter(|s| !done.contains_key(s))
                    .map(|&s| topo.switches[s].name.as_str())
                    .collect();
                let _ = stop_tx.send(true);
                bail!(
                    "no answer within {timeout:?} from: {} (is the fabric up? check the p4rt addresses)",
                    missing.join(", ")
                );
            }
        }
    }
    let _ = stop_tx.send(true);
    Ok(done)
}

pub(super) async fn snapshot(a: SnapshotArgs) -> anyhow::Result<Exit> {
    let topo = load_or_exit!(load_topology(&a.topology));
    let pipeline = load_or_exit!(load_pipeline(&a.program));
    let timeout = Duration::from_secs_f64(a.timeout);
    let got = per_switch(&topo, |topo, s| {
        let pipeline = pipeline.clone();
        async move {
            let session = backup_session(&topo, s, timeout).await?;
            let got = tokio::time::timeout(timeout, pipeline.read_installed(&session))
                .await
                .map_err(|_| format!("no read answer within {timeout:?}"))?
                .map_err(|e| e.to_string())?;
            for err in &got.unreadable {
                eprintln!("{}: entry left out of the snapshot: {err}", topo.switches[s].name);
            }
            Ok(got.entries)
        }
    })
    .await;
    let mut switches = BTreeMap::new();
    let mut failed = Vec::new();
    for (s, r) in got.into_iter().enumerate() {
        let name = topo.switches[s].name.clone();
        match r {
            Ok(entries) => {
                switches.insert(name, entries.into_values().collect());
            }
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    if !failed.is_empty() {
        bail!(
            "cannot read {} of {} switches (is the fabric up? check the p4rt addresses):\n  {}",
            failed.len(),
            topo.switches.len(),
            failed.join("\n  ")
        );
    }
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let doc = SnapshotDoc {
        version: SNAPSHOT_VERSION,
        topology: topo.name.clone(),
        taken_at_unix_ms: ms,
        switches,
    };
    let text = serde_json::to_string_pretty(&doc).context("cannot encode the snapshot")?;
    std::fs::write(&a.output, text).with_context(|| format!("cannot write {}", a.output.display()))?;
    let entries: usize = doc.switches.values().map(Vec::len).sum();
    out!("snapshot of {} switches ({entries} entries) written to {}", doc.switches.len(), a.output.display());
    Ok(Exit::Ok)
}

pub(super) async fn rollback(a: RollbackArgs) -> anyhow::Result<Exit> {
    let topo = load_or_exit!(load_topology(&a.topology));
    let pipeline = load_or_exit!(load_pipeline(&a.program));
    let text = std::fs::read_to_string(&a.snapshot)
        .with_context(|| format!("cannot read {}", a.snapshot.display()))?;
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{}: not JSON: {e}", a.snapshot.display());
            return Ok(Exit::Invalid);
        }
    };
    let names: Vec<&str> = topo.switches.iter().map(|s| s.name.as_str()).collect();
    let doc = match SnapshotDoc::from_value(value, &topo.name, &names) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{}: {e}", a.snapshot.display());
            return Ok(Exit::Invalid);
        }
    };
    let targets: Vec<Option<Goal>> = names.iter().map(|n| doc.entries(n).map(Goal::Exact)).collect();
    let timeout = Duration::from_secs_f64(a.timeout);
    let held = held_by_a_primary(&topo, timeout).await?;
    if !held.is_empty() {
        eprintln!(
            "error: a controller is primary on {}: a rollback now would fight it for the switches.\n\
             Use its API instead (POST /api/v1/rollback with the snapshot as the body, operator token),\n\
             or stop that controller first and run this again.",
            held.join(", ")
        );
        return Ok(Exit::Failure);
    }
    let got =
        visit(&topo, pipeline, u128::from(a.election_id), false, targets, Duration::from_secs_f64(a.timeout))
            .await?;
    let mut failed = false;
    for (s, ev) in got {
        let name = &topo.switches[s].name;
        if let AgentEvent::Programmed { .. } = ev {
            out!("{name}: already at the snapshot (nothing to write)");
        }
        if let AgentEvent::Synced { outcome, .. } = ev {
            match &outcome.error {
                // Entries the switch refused were not restored (the rest was).
                None if outcome.held_back > 0 => {
                    failed = true;
                    let first = outcome
                        .refused
                        .first()
                        .map(|r| format!(": first {:?} {:?}: {}", r.key, r.code, r.message));
                    eprintln!(
                        "{name}: rollback incomplete: the switch refused {} entries{}",
                        outcome.held_back,
                        first.unwrap_or_default()
                    );
                }
                None => out!(
                    "{name}: restored ({} inserts, {} modifies, {} deletes)",
                    outcome.inserts,
                    outcome.modifies,
                    outcome.deletes
                ),
                Some(e) => {
                    failed = true;
                    eprintln!("{name}: rollback failed: {e}");
                }
            }
        }
    }
    Ok(if failed { Exit::Failure } else { Exit::Ok })
}
