//! Replays a recording of controller inputs (`--record`, JSON lines of
//! `{"t_ns": …, "input": …}`) through the same [`Core`] the daemon runs,
//! deciding after every input as the daemon does when inputs arrive one at
//! a time. Deterministic: the same recording gives the same output.

use serde_json::{json, Value};

use crate::fabric::{Core, CoreConfig, Input, Step};
use crate::mode::Mode;
use metaroce_topo::Topology;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("line {line}: time goes backwards ({t_ns} after {last})")]
    Backwards { line: usize, t_ns: u64, last: u64 },
    #[error(transparent)]
    Core(#[from] crate::fabric::CoreError),
}

/// Parses a recording: one `{"t_ns": u64, "input": Input}` per line; blank
/// lines and lines starting with `#` are skipped.
pub fn parse(text: &str) -> Result<Vec<(u64, Input)>, ReplayError> {
    let mut out = Vec::new();
    let mut last = 0u64;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let v: Value =
            serde_json::from_str(raw).map_err(|e| ReplayError::Line { line, message: e.to_string() })?;
        let t_ns = v
            .get("t_ns")
            .and_then(Value::as_u64)
            .ok_or(ReplayError::Line { line, message: "no t_ns".into() })?;
        let input: Input = serde_json::from_value(v.get("input").cloned().unwrap_or(Value::Null))
            .map_err(|e| ReplayError::Line { line, message: format!("input: {e}") })?;
        if t_ns < last {
            return Err(ReplayError::Backwards { line, t_ns, last });
        }
        last = t_ns;
        out.push((t_ns, input));
    }
    Ok(out)
}

/// Runs the inputs through [`Core::handle`], the rule the daemon and the
/// simulator run, and returns one record per step that changed something:
/// the notes (with reasons, placement moves included) and the per-switch
/// desired groups and steer entries. Between inputs the core is ticked
/// at the instants [`Core::next_timer`] names (the daemon ticks every few
/// milliseconds; a recording holds no ticks), so hold-downs and re-plans
/// run out as they would live.
pub fn run(
    topo: Topology,
    cfg: CoreConfig,
    mode: Mode,
    inputs: &[(u64, Input)],
) -> Result<Vec<Value>, ReplayError> {
    let mut core = Core::new(topo, cfg, mode)?;
    let mut out = Vec::new();
    core.decide(0); // the baseline
    let mut now = 0;
    for (t, input) in inputs {
        for (at, step) in core.run_timers(now, *t) {
            record(&core, at, &step, &mut out);
        }
        now = *t;
        let step = core.handle(*t, input);
        record(&core, *t, &step, &mut out);
    }
    Ok(out)
}

/// Appends a step's record, if it changed something.
fn record(core: &Core, t: u64, step: &Step, out: &mut Vec<Value>) {
    if step.notes.is_empty() && step.plans.is_empty() {
        return;
    }
    let notes: Vec<Value> = step.notes.iter().map(|n| json!(n)).collect();
    let plans: Vec<Value> = step
        .plans
        .iter()
        .map(|(s, p)| {
            let multi: Vec<Value> = p
                .routes
                .iter()
                .filter(|(_, m)| m.len() > 1)
                .map(|((a, l), m)| {
                    json!({"prefix": format!("{a}/{l}"), "members": m.iter().map(|(h, w)| json!([h.saturating_sub(1), w])).collect::<Vec<_>>()})
                })
                .collect();
            let name = core.topology().switches.get(*s).map_or("?", |x| x.name.as_str());
            let mut plan = json!({"switch": name, "weighted_routes": multi});
            // Steer entries, where the placement asks for some.
            if !p.steer.is_empty() {
                let steer: Vec<Value> =
                    p.steer.iter().map(|(k, h)| json!({"flow": k, "port": h.port, "after": h.downstream})).collect();
                plan["steer"] = json!(steer);
            }
            plan
        })
        .collect();
    out.push(json!({"t_ns": t, "notes": notes, "plans": plans}));
}
