"""Read the subset of the topology YAML that the Mininet testbed needs.

The Rust side (`metaroce topo check`) is the full validator; this module
parses what the launcher uses (switches, hosts, links, units) and rejects
anything it does not understand with `file:line:` messages, all at once.
It depends only on PyYAML (Debian: python3-yaml).
"""

import ipaddress
import re

import yaml

TOP_KEYS = {"name", "description", "fabric", "defaults", "switches", "hosts", "links"}
FABRIC_KEYS = {"flowlet_timeout", "queue_high", "queue_low", "ecn_threshold", "int", "cpu_port"}
SWITCH_KEYS = {"name", "role", "device_id", "p4rt", "thrift_port", "subnet", "int_node_id"}
HOST_KEYS = {"name", "ip", "mac", "leaf", "port", "nic_rate"}
LINK_KEYS = {"a", "b", "bandwidth", "delay", "buffer"}

_NUM = r"\s*([0-9_]*\.?[0-9]+)\s*"
_RATE = {"bps": 1, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SIZE = {"B": 1, "KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_PKT = {"pkt", "pkts", "packet", "packets"}


class TopoError(Exception):
    """Every problem found in a file, one `file:line: where: what` per line."""

    def __init__(self, problems):
        self.problems = problems
        super().__init__("\n".join(problems))


def _unit(text, table, what):
    m = re.fullmatch(_NUM + r"(\S+)\s*", str(text))
    if not m or m.group(2) not in table:
        raise ValueError(f"cannot read {text!r} as {what} (units: {', '.join(table)})")
    return float(m.group(1).replace("_", "")) * table[m.group(2)]


def parse_rate(text):
    """'100Mbps' -> bits per second (float)."""
    return _unit(text, _RATE, "a rate")


def parse_time(text):
    """'100us' -> seconds (float)."""
    return _unit(text, _TIME, "a time")


def parse_size(text):
    """'96KiB' -> bytes (float)."""
    return _unit(text, _SIZE, "a size")


def parse_depth(text, mtu_frame=1500):
    """'40pkt' or '64KiB' -> packets (int); bytes count as MTU-sized frames."""
    m = re.fullmatch(_NUM + r"(\S+)\s*", str(text))
    if m and m.group(2) in _PKT:
        return int(float(m.group(1).replace("_", "")))
    return int(parse_size(text) // mtu_frame)


class _Loader(yaml.SafeLoader):
    """SafeLoader whose mappings remember the line of every key."""


def _mapping(loader, node):
    loader.flatten_mapping(node)
    d = LineDict()
    d.line = node.start_mark.line + 1
    for k, v in node.value:
        key = loader.construct_object(k, deep=True)
        if key in d:
            d.dup.append((key, k.start_mark.line + 1))
        d[key] = loader.construct_object(v, deep=True)
        d.lines[key] = v.start_mark.line + 1
    return d


class LineDict(dict):
    def __init__(self):
        super().__init__()
        self.line = 0
        self.lines = {}
        self.dup = []


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


class Switch:
    def __init__(self, name, role, device_id, p4rt_host, p4rt_port, thrift_port, subnet):
        self.name, self.role, self.device_id = name, role, device_id
        self.p4rt_host, self.p4rt_port, self.thrift_port = p4rt_host, p4rt_port, thrift_port
        self.subnet = subnet
        self.ports = {}  # port -> ("host", Host) or ("switch", Switch, peer_port, Link)

    @property
    def p4rt(self):
        return f"{self.p4rt_host}:{self.p4rt_port}"


class Host:
    def __init__(self, name, ip, mac, leaf, port, nic_rate):
        self.name, self.ip, self.mac, self.leaf, self.port = name, ip, mac, leaf, port
        self.nic_rate = nic_rate  # bits per second


class Link:
    def __init__(self, a, a_port, b, b_port, bandwidth, delay, buffer):
        self.a, self.a_port, self.b, self.b_port = a, a_port, b, b_port
        self.bandwidth, self.delay, self.buffer = bandwidth, delay, buffer  # bps, s, bytes


class Topology:
    """The parsed fabric: switches, hosts, links (objects above), fabric knobs."""

    def __init__(self, path):
        self.path = path
        self.name = ""
        self.switches = {}
        self.hosts = {}
        self.links = []
        self.fabric = {}
        self.link_defaults = {"bandwidth": 100e6, "delay": 100e-6, "buffer": 96 * 1024}
        self.host_nic_rate = None

    def leaves(self):
        return [s for s in self.switches.values() if any(h.leaf is s for h in self.hosts.values())]


def load(path):
    """Parse PATH; raise TopoError listing every problem, or OSError."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    try:
        doc = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise TopoError([f"{path}:{line}: not valid YAML: {getattr(e, 'problem', e)}"]) from None
    topo = Topology(path)

    def err(line, where, what):
        problems.append(f"{path}:{line}: {where}: {what}")

    if not isinstance(doc, LineDict):
        raise TopoError([f"{path}:1: the file must be a mapping with name, switches, hosts, links"])

    def check_keys(d, allowed, where):
        for key, line in d.dup:
            err(line, where, f"key {key!r} appears twice")
        for key in d:
            if key not in allowed:
                err(d.lines[key], where, f"unknown key {key!r} (known: {', '.join(sorted(allowed))})")

    def conv(d, key, fn, where, default=None):
        if key not in d:
            return default
        try:
            return fn(d[key])
        except (ValueError, TypeError) as e:
            err(d.lines[key], f"{where}.{key}", str(e))
            return default

    def seq(key):
        v = doc.get(key, [])
        if v is None:
            return []
        if not isinstance(v, list):
            err(doc.lines.get(key, 1), key, "must be a list")
            return []
        return v

    def items(key, keys, required):
        for i, item in enumerate(seq(key)):
            where = f"{key}[{i}]"
            if not isinstance(item, LineDict):
                err(doc.lines.get(key, 1), where, "must be a mapping")
                continue
            check_keys(item, keys, where)
            missing = [k for k in required if k not in item]
            if missing:
                err(item.line, where, f"missing {', '.join(missing)}")
                continue
            yield where, item

    check_keys(doc, TOP_KEYS, "top level")
    topo.name = str(doc.get("name", ""))
    if not topo.name:
        err(doc.line, "name", "missing")
    fabric = doc.get("fabric") or LineDict()
    if isinstance(fabric, LineDict):
        check_keys(fabric, FABRIC_KEYS, "fabric")
        topo.fabric = {
            "flowlet_timeout": conv(fabric, "flowlet_timeout", parse_time, "fabric"),
            "queue_high": conv(fabric, "queue_high", parse_depth, "fabric"),
            "queue_low": conv(fabric, "queue_low", parse_depth, "fabric"),
            "ecn_threshold": conv(fabric, "ecn_threshold", parse_depth, "fabric"),
            "int": bool(fabric.get("int", False)),
            "cpu_port": fabric.get("cpu_port", 255),
        }
        if topo.fabric["cpu_port"] != 255:
            err(fabric.lines["cpu_port"], "fabric.cpu_port", "the P4 program expects CPU port 255")
    defaults = doc.get("defaults") or LineDict()
    if isinstance(defaults, LineDict):
        check_keys(defaults, {"link", "host"}, "defaults")
        ld = defaults.get("link") or LineDict()
        if isinstance(ld, LineDict):
            check_keys(ld, {"bandwidth", "delay", "buffer"}, "defaults.link")
            for key, fn in (("bandwidth", parse_rate), ("delay", parse_time), ("buffer", parse_size)):
                topo.link_defaults[key] = conv(ld, key, fn, "defaults.link", topo.link_defaults[key])
        hd = defaults.get("host") or LineDict()
        if isinstance(hd, LineDict):
            check_keys(hd, {"nic_rate"}, "defaults.host")
            topo.host_nic_rate = conv(hd, "nic_rate", parse_rate, "defaults.host")

    ids, addrs = {}, {}
    for where, s in items("switches", SWITCH_KEYS, ["name", "role", "device_id", "p4rt"]):
        name = str(s["name"])
        if name in topo.switches:
            err(s.lines["name"], where, f"switch {name!r} defined twice")
            continue
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            err(s.lines["name"], where, f"switch name {name!r}: use letters, digits, '-', '_', '.'")
        dev = s["device_id"]
        if not isinstance(dev, int) or dev < 0 or dev > 99999:
            err(s.lines["device_id"], where, f"device_id {dev!r} must be an integer 0..99999 here")
            continue
        if dev in ids:
            err(s.lines["device_id"], where, f"device_id {dev} already used by {ids[dev]}")
        ids[dev] = name
        m = re.fullmatch(r"([^\s:]+):([0-9]{1,5})", str(s["p4rt"]))
        if not m:
            err(s.lines["p4rt"], where, f"p4rt {s['p4rt']!r} must be HOST:PORT")
            continue
        thrift = s.get("thrift_port", 9090 + dev)
        if not isinstance(thrift, int) or not 1 <= thrift <= 65535:
            err(s.lines.get("thrift_port", s.line), where, f"thrift_port {thrift!r} must be 1..65535")
            continue
        for port, key in ((int(m.group(2)), "p4rt"), (thrift, "thrift_port")):
            if port in addrs:
                err(s.lines.get(key, s.line), where, f"TCP port {port} already used by {addrs[port]}")
            addrs[port] = f"{name}.{key}"
        subnet = None
        if "subnet" in s:
            try:
                subnet = ipaddress.ip_network(str(s["subnet"]))
            except ValueError as e:
                err(s.lines["subnet"], where, str(e))
        topo.switches[name] = Switch(name, str(s["role"]), dev, m.group(1), int(m.group(2)), thrift, subnet)

    def endpoint(text, line, where, key):
        m = re.fullmatch(r"([^\s:]+):([0-9]{1,3})", str(text))
        if not m:
            err(line, f"{where}.{key}", f"{text!r} must be SWITCH:PORT")
            return None, None
        sw = topo.switches.get(m.group(1))
        port = int(m.group(2))
        if sw is None:
            err(line, f"{where}.{key}", f"unknown switch {m.group(1)!r}")
            return None, None
        if port < 1 or port > 511 or port == 255:
            err(line, f"{where}.{key}", f"port {port} must be 1..511 and not the CPU port 255")
            return None, None
        if port in sw.ports:
            err(line, f"{where}.{key}", f"{sw.name}:{port} is already connected")
            return None, None
        return sw, port

    macs, ips = {}, {}
    for where, h in items("hosts", HOST_KEYS, ["name", "ip", "mac", "leaf", "port"]):
        name = str(h["name"])
        if name in topo.hosts or name in topo.switches:
            err(h.lines["name"], where, f"name {name!r} already used")
            continue
        try:
            ip = ipaddress.ip_address(str(h["ip"]))
        except ValueError as e:
            err(h.lines["ip"], where, str(e))
            continue
        mac = str(h["mac"]).lower()
        if not re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac):
            err(h.lines["mac"], where, f"mac {h['mac']!r} must look like 02:00:00:00:01:01")
            continue
        for val, seen, key in ((str(ip), ips, "ip"), (mac, macs, "mac")):
            if val in seen:
                err(h.lines[key], where, f"{key} {val} already used by {seen[val]}")
            seen[val] = name
        sw, port = endpoint(f"{h['leaf']}:{h['port']}", h.lines["leaf"], where, "leaf")
        if sw is None:
            continue
        if sw.subnet and ip not in sw.subnet:
            err(h.lines["ip"], where, f"{ip} is outside {sw.name}'s subnet {sw.subnet}")
        nic = conv(h, "nic_rate", parse_rate, where, topo.host_nic_rate)
        host = Host(name, str(ip), mac, sw, port, nic)
        sw.ports[port] = ("host", host)
        topo.hosts[name] = host

    for where, ln in items("links", LINK_KEYS, ["a", "b"]):
        a, ap = endpoint(ln["a"], ln.lines["a"], where, "a")
        b, bp = endpoint(ln["b"], ln.lines["b"], where, "b")
        if a is None or b is None:
            continue
        if a is b:
            err(ln.line, where, "a link must join two different switches")
            continue
        d = topo.link_defaults
        link = Link(a, ap, b, bp,
                    conv(ln, "bandwidth", parse_rate, where, d["bandwidth"]),
                    conv(ln, "delay", parse_time, where, d["delay"]),
                    conv(ln, "buffer", parse_size, where, d["buffer"]))
        a.ports[ap] = ("switch", b, bp, link)
        b.ports[bp] = ("switch", a, ap, link)
        topo.links.append(link)

    if not topo.hosts and not problems:
        err(doc.line, "hosts", "a Mininet fabric needs at least one host")
    if problems:
        raise TopoError(problems)
    return topo
