//! Writes a topology back as YAML that reads like a hand-written file:
//! one line per switch, host and link, defaults stated once, and values
//! equal to their defaults left out.

use std::fmt::Write;

use crate::model::{Link, Topology};

/// The topology as YAML text, with `header` as leading comment lines.
pub fn to_yaml(topo: &Topology, header: &str) -> String {
    let mut out = String::new();
    for line in header.lines() {
        let _ = writeln!(out, "# {line}").map(|_| ());
    }
    if !header.is_empty() {
        out.push('\n');
    }
    let _ = write_body(&mut out, topo);
    out
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.replace('"', "'")))
}

fn write_body(out: &mut String, t: &Topology) -> std::fmt::Result {
    writeln!(out, "name: {}", quote(&t.name))?;
    if let Some(d) = &t.description {
        writeln!(out, "description: {}", quote(d))?;
    }
    let f = &t.fabric;
    writeln!(out, "\nfabric:")?;
    writeln!(out, "  flowlet_timeout: {}", f.flowlet_timeout)?;
    writeln!(out, "  queue_high: {}", f.queue_high)?;
    writeln!(out, "  queue_low: {}", f.queue_low)?;
    writeln!(out, "  ecn_threshold: {}", f.ecn_threshold)?;
    writeln!(out, "  int: {}", f.int)?;
    writeln!(out, "  in_order_nics: {}", f.in_order_nics)?;
    writeln!(out, "  cpu_port: {}", f.cpu_port)?;
    let d = &t.defaults;
    writeln!(out, "\ndefaults:")?;
    writeln!(
        out,
        "  link: {{bandwidth: {}, delay: {}, buffer: {}}}",
        d.link_bandwidth, d.link_delay, d.link_buffer
    )?;
    writeln!(out, "  host: {{nic_rate: {}}}", d.nic_rate)?;
    writeln!(out, "\nswitches:")?;
    for s in &t.switches {
        write!(
            out,
            "  - {{name: {}, role: {}, device_id: {}, p4rt: {}",
            s.name,
            s.role,
            s.device_id,
            quote(&s.p4rt)
        )?;
        if let Some(p) = s.thrift_port {
            write!(out, ", thrift_port: {p}")?;
        }
        if u64::from(s.int_node_id) != s.device_id {
            write!(out, ", int_node_id: {}", s.int_node_id)?;
        }
        if let Some(n) = s.subnet {
            write!(out, ", subnet: {n}")?;
        }
        writeln!(out, "}}")?;
    }
    if !t.hosts.is_empty() {
        writeln!(out, "\nhosts:")?;
    }
    for h in &t.hosts {
        write!(
            out,
            "  - {{name: {}, ip: {}, mac: \"{}\", leaf: {}, port: {}",
            h.name, h.ip, h.mac, t.switches[h.leaf].name, h.port
        )?;
        if h.nic_rate != d.nic_rate {
            write!(out, ", nic_rate: {}", h.nic_rate)?;
        }
        if let Some(e) = &h.exporter {
            write!(out, ", exporter: \"{e}\"")?;
        }
        writeln!(out, "}}")?;
    }
    if !t.links.is_empty() {
        writeln!(out, "\nlinks:")?;
    }
    for l in &t.links {
        write_link(out, t, l)?;
    }
    Ok(())
}

fn write_link(out: &mut String, t: &Topology, l: &Link) -> std::fmt::Result {
    let d = &t.defaults;
    write!(out, "  - {{a: \"{}\", b: \"{}\"", t.endpoint_name(l.a), t.endpoint_name(l.b))?;
    if l.bandwidth != d.link_bandwidth {
        write!(out, ", bandwidth: {}", l.bandwidth)?;
    }
    if l.delay != d.link_delay {
        write!(out, ", delay: {}", l.delay)?;
    }
    if l.buffer != d.link_buffer {
        write!(out, ", buffer: {}", l.buffer)?;
    }
    writeln!(out, "}}")
}

#[cfg(test)]
mod tests {
    use crate::gen::{self, Common};
    use crate::units::Bandwidth;

    #[test]
    fn emitted_yaml_loads_back_to_the_same_fabric() {
        let mut c = Common::new("round-trip", Bandwidth::gbps(400));
        c.nic_rate = Bandwidth::gbps(200);
        let t = gen::clos3(&c, 2, 2, 2, 2, 2).unwrap();
        let text = super::to_yaml(&t, "generated\nfor a test");
        assert!(text.starts_with("# generated\n# for a test\n\nname: \"round-trip\""));
        let back = crate::load_str(&text, "emitted").unwrap_or_else(|e| panic!("{}", e.report()));
        assert_eq!(back.switches, t.switches);
        assert_eq!(back.hosts, t.hosts);
        assert_eq!(back.links, t.links);
        assert_eq!(back.fabric, t.fabric);
        assert_eq!(super::to_yaml(&back, ""), super::to_yaml(&t, ""));
    }
}
