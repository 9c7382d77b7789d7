//! Replay goldens: scripted inputs on the shipped fabrics (jobs announced
//! through the job API's body, elephants seen, failures, hot links, jobs
//! removed), a decision after each step, and every decision rendered with
//! switch names and pinned under `tests/golden/`
//! (`UPDATE_GOLDEN=1 cargo test -p metaroce-te --test golden` rewrites
//! them; review the diff). The meaning is checked here too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path as FsPath, PathBuf};

use common::*;
use metaroce_te::job::{parse_job, JobLimits, JobRegistry};
use metaroce_te::{Demand, FlowKey, Path, Plan, Planner, Reason, TeConfig};
use metaroce_topo::{Routing, Topology};
use serde::Serialize;

/// One scripted input.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
enum Step {
    /// A job API body.
    Job(String),
    RemoveJob(String),
    /// An elephant seen by the data plane: `src>dst` host names, Mb/s.
    Elephant(String, u64),
    /// Unsteered load on the egress port `from>to`, Mb/s.
    Heat(String, u64),
    /// The link `a>b` fails.
    Fail(String),
}

#[derive(Serialize)]
struct Golden<'a> {
    topology: &'a str,
    script: &'a [(u64, Step)],
    decisions: Vec<Rendered>,
}

#[derive(Serialize)]
struct Rendered {
    at_ms: u64,
    max_utilisation: String,
    lower_bound: String,
    exact: bool,
    moves: Vec<RMove>,
    unplaced: Vec<String>,
}

#[derive(Serialize)]
struct RMove {
    flow: String,
    reason: &'static str,
    from: Option<String>,
    to: Option<String>,
    bottleneck: String,
}

struct Run {
    topo: Topology,
    routing: Routing,
    planner: Planner,
    jobs: JobRegistry,
    decisions: Vec<Rendered>,
}

impl Run {
    fn new(file: &str) -> Self {
        let topo = topology(file);
        let routing = Routing::compute(&topo);
        let planner = planner(&topo, &routing, TeConfig::default());
        Run { topo, routing, planner, jobs: JobRegistry::default(), decisions: Vec::new() }
    }

    fn host_ip(&self, name: &str) -> std::net::Ipv4Addr {
        let i =
            self.topo.hosts.iter().position(|h| h.name == name).unwrap_or_else(|| panic!("no host {name}"));
        self.topo.hosts[i].ip
    }

    fn host_name(&self, ip: std::net::Ipv4Addr) -> &str {
        self.topo.hosts.iter().find(|h| h.ip == ip).map_or("?", |h| h.name.as_str())
    }

    /// The egress port of `a>b` (switch names).
    fn port(&self, ab: &str) -> (usize, u16, usize) {
        let (a, b) = ab.split_once('>').unwrap();
        let (a, b) = (self.topo.switch_id(a).unwrap(), self.topo.switch_id(b).unwrap());
        let adj = self.topo.adjacency(a).iter().find(|x| x.peer == b).unwrap();
        (a, adj.port, adj.link)
    }

    fn apply(&mut self, step: &Step) {
        match step {
            Step::Job(body) => {
                let job = parse_job(body, &self.topo, &self.jobs, &JobLimits::default()).unwrap();
                for (k, d) in job.demands() {
                    self.planner.upsert(k, d).unwrap();
                }
                self.jobs.register(job).unwrap();
            }
            Step::RemoveJob(name) => {
                for f in self.jobs.remove(name).unwrap().flows {
                    assert!(self.planner.remove(&f.key));
                }
            }
            Step::Elephant(pair, mbps) => {
                let (a, b) = pair.split_once('>').unwrap();
                let key = FlowKey::flow(self.host_ip(a), self.host_ip(b), 49152, 17);
                self.planner.upsert(key, Demand::rate(mbps * 1_000_000)).unwrap();
            }
            Step::Heat(ab, mbps) => {
                let (s, port, _) = self.port(ab);
                self.planner.set_background(s, port, mbps * 1_000_000).unwrap();
            }
            Step::Fail(ab) => {
                let (_, _, link) = self.port(ab);
                let changes = self.routing.fail_link(&self.topo, link).unwrap();
                self.planner.routing_changed(&self.routing, &changes);
            }
        }
    }

    fn path(&self, p: &Path) -> String {
        let name = |s: usize| self.topo.switches[s].name.as_str();
        let mut out = String::new();
        for (i, h) in p.hops.iter().enumerate() {
            if i == 0 {
                out.push_str(name(h.switch));
            }
            out.push_str(&format!(" -{}{}-> {}", h.port, if h.choice { "*" } else { "" }, name(h.next)));
        }
        out
    }

    fn flow(&self, k: &FlowKey) -> String {
        let (a, b) = (self.host_name(k.src()), self.host_name(k.dst()));
        match k {
            FlowKey::Flow { sport, qp, .. } => format!("{a}>{b} sport {sport} qp {qp}"),
            FlowKey::Pair { .. } => format!("{a}>{b}"),
        }
    }

    fn decide(&mut self, at_ms: u64) -> Plan {
        let plan = self.planner.plan(at_ms * MS);
        check_paths_but(
            &self.topo,
            &self.routing,
            &self.planner,
            &plan.unplaced.iter().map(|u| u.flow).collect::<Vec<_>>(),
        );
        let mut moves: Vec<RMove> = plan
            .moves
            .iter()
            .map(|m| RMove {
                flow: self.flow(&m.flow),
                reason: m.reason.as_str(),
                from: m.from.as_ref().map(|p| self.path(p)),
                to: m.to.as_ref().map(|p| self.path(p)),
                bottleneck: format!("{:.4} -> {:.4}", m.bottleneck_before, m.bottleneck_after),
            })
            .collect();
        moves.sort_by(|a, b| (a.reason, &a.flow).cmp(&(b.reason, &b.flow)));
        self.decisions.push(Rendered {
            at_ms,
            max_utilisation: format!("{:.4}", plan.max_utilisation),
            lower_bound: format!("{:.4}", plan.lower_bound),
            exact: plan.exact,
            moves,
            unplaced: plan.unplaced.iter().map(|u| format!("{}: {}", self.flow(&u.flow), u.why)).collect(),
        });
        plan
    }

    /// Runs the script, one decision after each step's time.
    fn script(&mut self, script: &[(u64, Step)]) -> Vec<Plan> {
        script
            .iter()
            .map(|(at, step)| {
                self.apply(step);
                self.decide(*at)
            })
            .collect()
    }

    fn record(self, name: &str, topology: &str, script: &[(u64, Step)]) {
        golden(name, &Golden { topology, script, decisions: self.decisions });
    }
}

fn golden<T: Serialize>(name: &str, value: &T) {
    let path: PathBuf =
        FsPath::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; run UPDATE_GOLDEN=1 cargo test -p metaroce-te --test golden", path.display())
    });
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{} differs from this run (first at line {}):\n  golden: {}\n  now:    {}\n\
             if the change is intended, run UPDATE_GOLDEN=1 cargo test -p metaroce-te --test golden and review the diff",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            text.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

fn job(body: &str) -> Step {
    Step::Job(body.to_string())
}

#[test]
fn all_to_all_job_on_the_4x4_then_a_failure_then_the_job_ends() {
    let mut run = Run::new("leaf-spine-4x4.yaml");
    let script = vec![
        (
            0,
            job(
                r#"{"name": "moe-7", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1", "h3-1", "h4-1", "h1-2", "h2-2"], "bytes": 1048576}"#,
            ),
        ),
        (10, Step::Fail("leaf1>spine1".into())),
        (20, Step::RemoveJob("moe-7".into())),
    ];
    let plans = run.script(&script);
    assert!(plans[0].exact);
    assert!((plans[0].max_utilisation - plans[0].lower_bound).abs() < 1e-9, "the job at its bound");
    assert!(plans[1].moves.iter().all(|m| m.reason == Reason::LinkFailed));
    assert!(!plans[1].moves.is_empty());
    assert!(plans[2].moves.iter().all(|m| m.reason == Reason::Ended));
    assert_eq!(plans[2].max_utilisation, 0.0);
    run.record("a2a_4x4_failure", "leaf-spine-4x4.yaml", &script);
}

#[test]
fn elephants_on_the_2x2_leave_a_hot_uplink() {
    let mut run = Run::new("mininet-2x2.yaml");
    let script = vec![
        (0, Step::Elephant("h1>h3".into(), 60)),
        (0, Step::Elephant("h2>h4".into(), 60)),
        (200, Step::Heat("leaf1>spine1".into(), 70)),
        (250, Step::Heat("leaf1>spine1".into(), 0)),
        (400, Step::Elephant("h1>h4".into(), 30)),
    ];
    let plans = run.script(&script);
    assert_eq!(moved(&plans[1], Reason::New), 1, "the second elephant takes the other uplink");
    let on = |plan: &Plan| plan.moves.iter().map(|m| m.to.as_ref().unwrap().hops[0].port).collect::<Vec<_>>();
    assert_ne!(on(&plans[0]), on(&plans[1]));
    assert_eq!(moved(&plans[2], Reason::Rebalance), 1, "a hot uplink sheds its elephant");
    let first_mover = plans[2].moves[0].flow;
    // Cooled: the two elephants share one uplink, so one goes back, but
    // not the one that just moved (held down for 100 ms).
    assert_eq!(moved(&plans[3], Reason::Rebalance), 1);
    assert_ne!(plans[3].moves[0].flow, first_mover);
    assert_eq!(moved(&plans[4], Reason::New), 1);
    run.record("elephants_2x2_hot", "mininet-2x2.yaml", &script);
}

#[test]
fn ring_on_the_fat_tree_through_a_core_failure() {
    let mut run = Run::new("fat-tree-k4.yaml");
    let hosts: Vec<String> = run.topo.hosts.iter().map(|h| format!("\"{}\"", h.name)).collect();
    let body = format!(
        r#"{{"name": "ring-3", "pattern": "ring-allreduce", "hosts": [{}], "bytes": 8388608, "period_ms": 2}}"#,
        hosts.join(", ")
    );
    let (agg, core) = {
        let t = &run.topo;
        let agg = t.switches.iter().position(|s| s.role == metaroce_topo::Role::Spine).unwrap();
        let core = t
            .adjacency(agg)
            .iter()
            .find(|a| t.switches[a.peer].role == metaroce_topo::Role::SuperSpine)
            .unwrap()
            .peer;
        (t.switches[agg].name.clone(), t.switches[core].name.clone())
    };
    let script = vec![(0, job(&body)), (10, Step::Fail(format!("{agg}>{core}")))];
    let plans = run.script(&script);
    assert!(plans[0].exact, "three tiers: the recursive colouring, at the bound");
    assert!((plans[0].max_utilisation - plans[0].lower_bound).abs() < 1e-9);
    assert!(plans[1].unplaced.is_empty());
    run.record("ring_fat_tree_core_failure", "fat-tree-k4.yaml", &script);
}
