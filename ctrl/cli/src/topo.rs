//! `metaroce topo …`: check, show, paths, groups, gen, render, schema.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::render::{self, RenderOptions};
use metaroce_topo::units::{Bandwidth, Duration};
use metaroce_topo::{emit, spec, HostId, NextHop, NodeRef, Role, Routing, TopoError, Topology};
use serde_json::json;

use crate::{usage, Exit};

#[derive(Debug, Subcommand)]
pub enum TopoCommand {
    /// Validate topology files; print every problem with file:line:column.
    Check {
        /// Topology YAML files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Summarize a fabric: tiers, hosts, links, oversubscription, routes.
    Show {
        /// Topology YAML.
        file: PathBuf,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List every equal-cost path between two hosts, with its bottleneck.
    Paths {
        /// Topology YAML.
        file: PathBuf,
        /// Source host, by name or IP address.
        src: String,
        /// Destination host, by name or IP address.
        dst: String,
        /// Fail these first: a link end `switch:port`, or a switch name. Repeatable.
        #[arg(long = "fail", value_name = "LINK_END|SWITCH")]
        fail: Vec<String>,
        /// Show at most this many paths (the count printed is always the true total).
        #[arg(long, default_value_t = 64)]
        limit: usize,
        /// Print the paths as JSON (`total`, `shown`, `paths`, `truncated`).
        #[arg(long)]
        json: bool,
    },
    /// Print the next-hop groups and routes of one switch (or all).
    Groups {
        /// Topology YAML.
        file: PathBuf,
        /// Only this switch.
        #[arg(long)]
        switch: Option<String>,
        /// Fail these first: a link end `switch:port`, or a switch name. Repeatable.
        #[arg(long = "fail", value_name = "LINK_END|SWITCH")]
        fail: Vec<String>,
        /// Print the groups and routes as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a topology YAML for a standard fabric shape.
    Gen(GenArgs),
    /// Draw the fabric as a layered SVG picture with port labels.
    Render {
        /// Topology YAML.
        file: PathBuf,
        /// Where to write the SVG.
        #[arg(short, long, default_value = "fabric.svg")]
        output: PathBuf,
        /// Draw these as failed (dashed red): a link end `switch:port`, or a switch name (all its links). Repeatable.
        #[arg(long = "fail", value_name = "LINK_END|SWITCH")]
        fail: Vec<String>,
        /// Draw every switch even when a tier has more than 16 (by default such a
        /// fabric is drawn as pods and blocks of switches).
        #[arg(long)]
        detail: bool,
    },
    /// Print the JSON Schema of the topology format (editors use it to complete and check files).
    Schema,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shape {
    /// Two tiers: --leaves, --spines, --hosts-per-leaf, --parallel.
    LeafSpine,
    /// Three tiers in planes: --pods, --leaves, --spines (per pod), --supers (per plane).
    Clos3,
    /// k-ary fat-tree: --k.
    FatTree,
}

#[derive(Debug, Args)]
pub struct GenArgs {
    /// Fabric shape.
    shape: Shape,
    /// Name written into the file.
    #[arg(long, default_value = "generated")]
    name: String,
    /// Leaves (leaf-spine), or leaves per pod (clos3).
    #[arg(long, default_value_t = 4)]
    leaves: usize,
    /// Spines (leaf-spine), or spines per pod = planes (clos3).
    #[arg(long, default_value_t = 4)]
    spines: usize,
    /// Pods (clos3).
    #[arg(long, default_value_t = 2)]
    pods: usize,
    /// Super-spines per plane (clos3).
    #[arg(long, default_value_t = 2)]
    supers: usize,
    /// k (fat-tree): k pods, k/2 hosts per leaf.
    #[arg(long, default_value_t = 4)]
    k: usize,
    /// Hosts per leaf (leaf-spine, clos3).
    #[arg(long, default_value_t = 4)]
    hosts_per_leaf: usize,
    /// Parallel links between each leaf and spine (leaf-spine).
    #[arg(long, default_value_t = 1)]
    parallel: usize,
    /// Switch-to-switch link rate, e.g. 400Gbps.
    #[arg(long, default_value = "100Gbps", value_parser = parse_bw)]
    bandwidth: Bandwidth,
    /// Host NIC rate (default: the link rate).
    #[arg(long, value_parser = parse_bw)]
    nic_rate: Option<Bandwidth>,
    /// Flowlet timeout, e.g. 100us (hardware) or 5ms (BMv2).
    #[arg(long, value_parser = parse_duration)]
    flowlet_timeout: Option<Duration>,
    /// Host part of the P4Runtime addresses; switch N listens on port BASE+N.
    #[arg(long, default_value = "127.0.0.1")]
    p4rt_host: String,
    /// Base of the P4Runtime ports.
    #[arg(long, default_value_t = 50_000)]
    p4rt_base_port: u16,
    /// Base of the BMv2 Thrift ports (switch N uses BASE+N); 0 leaves them out.
    #[arg(long, default_value_t = 9090)]
    thrift_base_port: u16,
    /// Write here instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

fn parse_bw(s: &str) -> Result<Bandwidth, String> {
    Bandwidth::parse(s).map_err(|e| e.0)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    Duration::parse(s).map_err(|e| e.0)
}

pub fn run(cmd: TopoCommand) -> anyhow::Result<Exit> {
    match cmd {
        TopoCommand::Check { files, json } => check(&files, json),
        TopoCommand::Show { file, json } => with_topology(&file, |t| show(t, json)),
        TopoCommand::Paths { file, src, dst, fail, limit, json } => {
            with_topology(&file, |t| paths(t, &src, &dst, &fail, limit, json))
        }
        TopoCommand::Groups { file, switch, fail, json } => {
            with_topology(&file, |t| groups(t, switch.as_deref(), &fail, json))
        }
        TopoCommand::Gen(args) => generate(&args),
        TopoCommand::Render { file, output, fail, detail } => {
            with_topology(&file, |t| draw(t, &output, &fail, detail))
        }
        TopoCommand::Schema => {
            out!("{}", serde_json::to_string_pretty(&spec::json_schema())?);
            Ok(Exit::Ok)
        }
    }
}

/// Loads a topology; an invalid one prints its problems and exits 1, an
/// unreadable one is an error (exit 3).
fn with_topology(file: &Path, f: impl FnOnce(&Topology) -> anyhow::Result<Exit>) -> anyhow::Result<Exit> {
    match metaroce_topo::load_file(file) {
        Ok(t) => f(&t),
        Err(e @ TopoError::Invalid { .. }) => {
            eprint!("{}", e.report());
            eprintln!("{e}; fix them and run `metaroce topo check {}` again", file.display());
            Ok(Exit::Invalid)
        }
        Err(e) => Err(e.into()),
    }
}

fn check(files: &[PathBuf], as_json: bool) -> anyhow::Result<Exit> {
    let mut worst = Exit::Ok;
    let mut results = Vec::new();
    for file in files {
        match metaroce_topo::load_file(file) {
            Ok(t) => {
                if !as_json {
                    out!(
                        "{}: ok: {} switches, {} hosts, {} links",
                        file.display(),
                        t.switches.len(),
                        t.hosts.len(),
                        t.links.len()
                    );
                }
                results.push(json!({"file": file, "ok": true}));
            }
            Err(TopoError::Invalid { origin, diagnostics }) => {
                worst = Exit::Invalid;
                let problems: Vec<_> = diagnostics
                    .iter()
                    .map(|d| json!({"path": d.path, "line": d.pos.map(|p| p.line), "column": d.pos.map(|p| p.col), "message": d.message}))
                    .collect();
                if !as_json {
                    let e = TopoError::Invalid { origin, diagnostics };
                    outp!("{}", e.report());
                    out!("{}: {e}", file.display());
                }
                results.push(json!({"file": file, "ok": false, "problems": problems}));
            }
            Err(e) => {
                worst = Exit::Failure;
                let msg = format!("{:#}", anyhow::Error::from(e));
                if !as_json {
                    eprintln!("error: {msg}");
                }
                results.push(json!({"file": file, "ok": false, "error": msg}));
            }
        }
    }
    if as_json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    }
    Ok(worst)
}

fn gbps(bps: u64) -> String {
    let g = bps as f64 / 1e9;
    if g >= 1.0 {
        format!("{g:.0}G")
    } else {
        format!("{:.0}M", bps as f64 / 1e6)
    }
}

fn show(t: &Topology, as_json: bool) -> anyhow::Result<Exit> {
    let routing = Routing::compute(t);
    let (routes, groups) = routing.totals();
    // Oversubscription per leaf: host bandwidth over uplink bandwidth.
    let mut ratios: Vec<f64> = Vec::new();
    for (s, sw) in t.switches.iter().enumerate().filter(|(_, s)| s.role == Role::Leaf) {
        let down: u64 = t.hosts_of(s).iter().map(|&h| t.hosts[h].nic_rate.bps()).sum();
        let up: u64 = t.adjacency(s).iter().map(|a| t.links[a.link].bandwidth.bps()).sum();
        if down > 0 && up > 0 {
            ratios.push(down as f64 / up as f64);
        } else if down > 0 {
            tracing::warn!(leaf = %sw.name, "leaf has hosts but no uplinks");
        }
    }
    let max_ratio = ratios.iter().copied().fold(0.0, f64::max);
    let widest = (0..t.switches.len())
        .flat_map(|s| routing.groups(s).iter().map(|(_, g)| g.members.len()).collect::<Vec<_>>())
        .max()
        .unwrap_or(0);
    if as_json {
        out!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "name": t.name, "description": t.description,
                "switches": {"leaf": t.count_role(Role::Leaf), "spine": t.count_role(Role::Spine), "super_spine": t.count_role(Role::SuperSpine)},
                "hosts": t.hosts.len(), "links": t.links.len(),
                "fabric": t.fabric, "defaults": t.defaults,
                "max_oversubscription": max_ratio, "routes": routes, "groups": groups, "widest_group": widest,
            }))?
        );
        return Ok(Exit::Ok);
    }
    let mut o = String::new();
    writeln!(o, "{}", t.name)?;
    if let Some(d) = &t.description {
        writeln!(o, "  {d}")?;
    }
    writeln!(
        o,
        "switches   {} leaves, {} spines, {} super-spines",
        t.count_role(Role::Leaf),
        t.count_role(Role::Spine),
        t.count_role(Role::SuperSpine)
    )?;
    let mut bws: Vec<u64> = t.links.iter().map(|l| l.bandwidth.bps()).collect();
    bws.sort_unstable();
    bws.dedup();
    let bw_text = bws.iter().map(|b| gbps(*b)).collect::<Vec<_>>().join(", ");
    writeln!(o, "hosts      {}", t.hosts.len())?;
    writeln!(o, "links      {} ({bw_text})", t.links.len())?;
    writeln!(o, "oversub    {max_ratio:.2}:1 at the most loaded leaf (host bandwidth / uplink bandwidth)")?;
    let f = &t.fabric;
    writeln!(
        o,
        "fabric     flowlet {}, queue high {} / low {}, ECN at {}, INT {}, CPU port {}",
        f.flowlet_timeout,
        f.queue_high,
        f.queue_low,
        f.ecn_threshold,
        if f.int { "on" } else { "off" },
        f.cpu_port
    )?;
    writeln!(o, "routing    {routes} routes in {groups} groups, widest group {widest} members")?;
    outp!("{o}");
    Ok(Exit::Ok)
}

fn find_host(t: &Topology, what: &str) -> anyhow::Result<HostId> {
    if let Some(NodeRef::Host(h)) = t.lookup(what) {
        return Ok(h);
    }
    if let Ok(ip) = what.parse::<std::net::Ipv4Addr>() {
        if let Some(h) = t.hosts.iter().position(|h| h.ip == ip) {
            return Ok(h);
        }
    }
    let hint = spec::did_you_mean(what, t.hosts.iter().map(|h| h.name.as_str()))
        .map(|s| format!("; did you mean \"{s}\"?"))
        .unwrap_or_default();
    Err(usage(format!("no host named \"{what}\" in {}{hint}", t.name)))
}

/// A switch by name; a miss is a usage error with "did you mean".
fn find_switch(t: &Topology, name: &str, what: &str) -> anyhow::Result<usize> {
    t.switch_id(name).ok_or_else(|| {
        let hint = spec::did_you_mean(name, t.switches.iter().map(|s| s.name.as_str()))
            .map(|h| format!("; did you mean \"{h}\"?"))
            .unwrap_or_default();
        usage(format!("{what}: no switch named \"{name}\" in {}{hint}", t.name))
    })
}

/// Applies `--fail` arguments: `switch:port` fails that link, a bare name fails the switch.
fn apply_failures(t: &Topology, routing: &mut Routing, fail: &[String]) -> anyhow::Result<Vec<usize>> {
    let mut failed_links = Vec::new();
    for f in fail {
        if let Some((name, port)) = f.rsplit_once(':') {
            let link = find_link(t, name, port)?;
            routing.fail_link(t, link)?;
            failed_links.push(link);
        } else {
            let s = find_switch(t, f, &format!("--fail {f}"))?;
            routing.fail_switch(t, s)?;
            failed_links.extend(t.adjacency(s).iter().map(|a| a.link));
        }
    }
    Ok(failed_links)
}

fn find_link(t: &Topology, name: &str, port: &str) -> anyhow::Result<usize> {
    let s = find_switch(t, name, &format!("--fail {name}:{port}"))?;
    let port: u16 =
        port.parse().map_err(|_| usage(format!("--fail {name}:{port}: \"{port}\" is not a port number")))?;
    t.adjacency(s)
        .iter()
        .find(|a| a.port == port)
        .map(|a| a.link)
        .ok_or_else(|| usage(format!("--fail {name}:{port}: no switch-to-switch link on that port")))
}

fn paths(
    t: &Topology,
    src: &str,
    dst: &str,
    fail: &[String],
    limit: usize,
    as_json: bool,
) -> anyhow::Result<Exit> {
    let (s, d) = (find_host(t, src)?, find_host(t, dst)?);
    let mut routing = Routing::compute(t);
    apply_failures(t, &mut routing, fail)?;
    let (found, more) = routing.host_paths(t, s, d, limit.max(1));
    let total = routing.count_host_paths(t, s, d);
    let (hs, hd) = (&t.hosts[s], &t.hosts[d]);
    if as_json {
        let list: Vec<_> = found
            .iter()
            .map(|p| {
                let hops: Vec<_> = p
                    .hops
                    .iter()
                    .map(|h| json!({"switch": t.switches[h.switch].name, "in_port": h.in_port, "out_port": h.out_port}))
                    .collect();
                json!({"hops": hops, "bottleneck_bps": p.bottleneck_bps})
            })
            .collect();
        out!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"src": hs.name, "dst": hd.name, "total": total, "shown": list.len(), "paths": list, "truncated": more})
            )?
        );
        return Ok(if found.is_empty() { Exit::Invalid } else { Exit::Ok });
    }
    if found.is_empty() {
        out!("{} ({}) cannot reach {} ({}): no valley-free path", hs.name, hs.ip, hd.name, hd.ip);
        return Ok(Exit::Invalid);
    }
    out!(
        "{total} equal-cost path{} from {} ({}) to {} ({}){}:",
        if total == 1 { "" } else { "s" },
        hs.name,
        hs.ip,
        hd.name,
        hd.ip,
        if more { format!(", showing the first {} (--limit)", found.len()) } else { String::new() }
    );
    for (i, p) in found.iter().enumerate() {
        let mut line = hs.name.clone();
        for h in &p.hops {
            write!(line, " -> {}[{}>{}]", t.switches[h.switch].name, h.in_port, h.out_port)?;
        }
        write!(line, " -> {}", hd.name)?;
        out!("{:>3}. {line}   bottleneck {}", i + 1, gbps(p.bottleneck_bps));
    }
    out!("(switch[in>out] gives the ingress and egress port at each hop)");
    Ok(Exit::Ok)
}

fn groups(t: &Topology, only: Option<&str>, fail: &[String], as_json: bool) -> anyhow::Result<Exit> {
    let mut routing = Routing::compute(t);
    apply_failures(t, &mut routing, fail)?;
    let switches: Vec<usize> = match only {
        Some(name) => vec![find_switch(t, name, "--switch")?],
        None => (0..t.switches.len()).collect(),
    };
    let hop = |n: &NextHop| match n {
        NextHop::Switch(s) => t.switches[*s].name.clone(),
        NextHop::Host(h) => t.hosts[*h].name.clone(),
    };
    let mut all = Vec::new();
    let mut out = std::io::stdout().lock();
    for s in switches {
        let table = routing.groups(s);
        let gs: Vec<_> = table
            .iter()
            .map(|(id, g)| {
                let members: Vec<_> = g
                    .members
                    .iter()
                    .map(|m| json!({"port": m.port, "next": hop(&m.next), "weight": m.weight}))
                    .collect();
                json!({"id": id, "members": members})
            })
            .collect();
        let routes: Vec<_> = routing
            .routes(s)
            .iter()
            .map(|r| json!({"prefix": r.prefix.to_string(), "group": r.group}))
            .collect();
        if as_json {
            all.push(json!({"switch": t.switches[s].name, "groups": gs, "routes": routes}));
            continue;
        }
        writeln!(
            out,
            "{} ({}): {} groups, {} routes",
            t.switches[s].name,
            t.switches[s].role,
            table.len(),
            routes.len()
        )?;
        for (id, g) in table.iter() {
            let members: Vec<String> =
                g.members.iter().map(|m| format!("{}->{} w{}", m.port, hop(&m.next), m.weight)).collect();
            let prefixes: Vec<String> =
                routing.routes(s).iter().filter(|r| r.group == id).map(|r| r.prefix.to_string()).collect();
            writeln!(out, "  group {id:<4} [{}]  for {}", members.join(", "), prefixes.join(" "))?;
        }
    }
    if as_json {
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
    }
    Ok(Exit::Ok)
}

fn generate(a: &GenArgs) -> anyhow::Result<Exit> {
    let mut c = Common::new(&a.name, a.bandwidth);
    c.nic_rate = a.nic_rate.unwrap_or(a.bandwidth);
    c.defaults.nic_rate = c.nic_rate;
    c.p4rt_host.clone_from(&a.p4rt_host);
    c.p4rt_base_port = a.p4rt_base_port;
    c.thrift_base_port = (a.thrift_base_port != 0).then_some(a.thrift_base_port);
    if let Some(f) = a.flowlet_timeout {
        c.fabric.flowlet_timeout = f;
    }
    let (topo, params) = match a.shape {
        Shape::LeafSpine => (
            gen::leaf_spine(&c, a.leaves, a.spines, a.hosts_per_leaf, a.parallel),
            format!(
                "leaf-spine --leaves {} --spines {} --hosts-per-leaf {} --parallel {}",
                a.leaves, a.spines, a.hosts_per_leaf, a.parallel
            ),
        ),
        Shape::Clos3 => (
            gen::clos3(&c, a.pods, a.leaves, a.spines, a.supers, a.hosts_per_leaf),
            format!(
                "clos3 --pods {} --leaves {} --spines {} --supers {} --hosts-per-leaf {}",
                a.pods, a.leaves, a.spines, a.supers, a.hosts_per_leaf
            ),
        ),
        Shape::FatTree => (gen::fat_tree(&c, a.k), format!("fat-tree --k {}", a.k)),
    };
    let topo = topo.map_err(|e| usage(format!("cannot generate that fabric: {e}")))?;
    let mut cmd = format!("metaroce topo gen {params} --name {} --bandwidth {}", a.name, a.bandwidth);
    if let Some(n) = a.nic_rate {
        write!(cmd, " --nic-rate {n}")?;
    }
    if let Some(f) = a.flowlet_timeout {
        write!(cmd, " --flowlet-timeout {f}")?;
    }
    // The addresses too, when not the defaults: the header must remake the file.
    if a.p4rt_host != "127.0.0.1" {
        write!(cmd, " --p4rt-host {}", a.p4rt_host)?;
    }
    if a.p4rt_base_port != 50_000 {
        write!(cmd, " --p4rt-base-port {}", a.p4rt_base_port)?;
    }
    if a.thrift_base_port != 9090 {
        write!(cmd, " --thrift-base-port {}", a.thrift_base_port)?;
    }
    let header = format!(
        "Generated by: {cmd}\nEdit freely; check with `metaroce topo check FILE`. Format: topologies/schema.json"
    );
    let text = emit::to_yaml(&topo, &header);
    // Whatever we write must load back: a generator bug must not reach a user's file.
    metaroce_topo::load_str(&text, "generated topology").map_err(|e| anyhow::anyhow!("{}{e}", e.report()))?;
    match &a.output {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "wrote {}: {} switches, {} hosts, {} links",
                path.display(),
                topo.switches.len(),
                topo.hosts.len(),
                topo.links.len()
            );
        }
        None => outp!("{text}"),
    }
    Ok(Exit::Ok)
}

fn draw(t: &Topology, output: &Path, fail: &[String], detail: bool) -> anyhow::Result<Exit> {
    let mut failed_links = Vec::new();
    for f in fail {
        match f.rsplit_once(':') {
            Some((name, port)) => failed_links.push(find_link(t, name, port)?),
            // A switch: every link it has, as `paths --fail` takes it.
            None => failed_links
                .extend(t.adjacency(find_switch(t, f, &format!("--fail {f}"))?).iter().map(|a| a.link)),
        }
    }
    let overview = !detail && render::overview::wanted(t);
    let svg = render::svg(t, &RenderOptions { failed_links, detail });
    std::fs::write(output, svg).with_context(|| format!("cannot write {}", output.display()))?;
    let how = if overview { "; an overview of pods and blocks, --detail draws every switch" } else { "" };
    eprintln!("wrote {} ({} switches, {} links{how})", output.display(), t.switches.len(), t.links.len());
    Ok(Exit::Ok)
}
