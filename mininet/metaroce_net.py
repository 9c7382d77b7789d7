#!/usr/bin/python3
"""Bring up a metaroce fabric from its topology YAML in Mininet + BMv2.

    mininet/metaroce_net.py topologies/mininet-2x2.yaml                 # + controller, Mininet CLI
    mininet/metaroce_net.py topologies/mininet-2x2.yaml --no-controller # static ECMP over Thrift
    mininet/metaroce_net.py TOPO --no-cli --run 60 --mode act           # for scripts
    mininet/metaroce_net.py --cleanup                                   # remove leftovers

One simple_switch_grpc per switch (device id, gRPC address, Thrift port
from the YAML, CPU port 255, YAML port numbers), hosts with IP, MAC,
a default route and static ARP, links scaled by one factor (see --scale),
BMv2 egress queue rate and depth per port so queues really build.

Exit codes: 0 done, 1 the topology has problems, 2 wrong arguments,
3 something needed is missing (root, a tool, a file), 4 a switch or the
controller failed, 5 a fabric with this prefix is already running.
"""

import argparse
import atexit
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import topo_yaml  # noqa: E402

STATE_ROOT = "/tmp/metaroce-mn"
FRAME = 1500          # bytes per packet when a buffer size becomes a BMv2 queue depth
RATE_FRAME = 1600     # bytes per packet when a link rate becomes a BMv2 queue rate (packets/s): a full
                      # 1500-byte IP packet plus Ethernet and 4 INT hops, so BMv2 is always the bottleneck
LINK_BUDGET = 10e6    # bit/s: --scale auto makes the fastest link this fast
FABRIC_MTU = 9000     # switch-to-switch veths carry INT (up to 108 bytes more than the host MTU)
MAX_TC_MBPS = 1000    # Mininet's TCLink limit


class Fail(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


def log(msg):
    print(f"metaroce-net: {msg}", flush=True)


def nice_scale(x):
    """Smallest 1/2/5 x 10^k that is >= x (and >= 1)."""
    if x <= 1:
        return 1
    k = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * k >= x - 1e-9:
            return m * k
    return 10 * k


class Scaling:
    """Time dilation by one factor S: bandwidth / S, delay x S, buffers (packets) unchanged.

    Everything then runs S times slower than on the real fabric, so the
    bandwidth-delay product and queue depths in packets keep their meaning.
    """

    def __init__(self, factor, floor_bps=1e6):
        self.factor = factor
        self.floor = floor_bps

    def bw(self, bps):
        return max(self.floor, bps / self.factor)

    def delay(self, seconds):
        return seconds * self.factor

    @staticmethod
    def auto(topo):
        rates = [ln.bandwidth for ln in topo.links] + [h.nic_rate or topo.link_defaults["bandwidth"]
                                                      for h in topo.hosts.values()]
        return nice_scale(max(rates) / LINK_BUDGET)


def tc_params(bps, delay_s, with_delay):
    # TBF rather than HTB: no "quantum is big" noise at a few Mbit/s.
    p = {"bw": min(MAX_TC_MBPS, bps / 1e6), "use_tbf": True}
    if delay_s > 0 and with_delay:
        p["delay"] = f"{delay_s * 1e6:.0f}us"
    return p


def netem_available(prefix):
    """Link delay needs the kernel's sch_netem; some (VM) kernels lack it."""
    a, b = f"{prefix}nq0", f"{prefix}nq1"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], capture_output=True)
    ok = subprocess.run(["tc", "qdisc", "add", "dev", a, "root", "netem", "delay", "1ms"],
                        capture_output=True).returncode == 0
    subprocess.run(["ip", "link", "del", a], capture_output=True)
    return ok


def depth_pkts(buffer_bytes):
    return max(8, int(buffer_bytes // FRAME))


def require_tools(need_controller):
    missing = [t for t in ("simple_switch_grpc", "simple_switch_CLI", "mnexec", "tc", "ethtool", "ip")
               if shutil.which(t) is None]
    if missing:
        raise Fail(3, f"{', '.join(missing)} not found on PATH; see README 'Mininet with BMv2' "
                      "(make deps-mininet installs Mininet and friends; p4c/BMv2 are built from source)")
    if os.geteuid() != 0:
        raise Fail(3, "Mininet needs root (network namespaces, veths): run with sudo")
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        raise Fail(3, "the Mininet Python API is missing: make deps-mininet (Debian package mininet), "
                      f"and run with /usr/bin/python3 (this is {sys.executable})") from None


def find_metaroce(explicit):
    if explicit:
        if shutil.which(explicit) or os.access(explicit, os.X_OK):
            return explicit
        raise Fail(3, f"controller binary {explicit!r} not found")
    for cand in (os.path.join(REPO, "target/release/metaroce"), os.path.join(REPO, "target/debug/metaroce")):
        if os.access(cand, os.X_OK):
            return cand
    found = shutil.which("metaroce")
    if found:
        return found
    raise Fail(3, "the metaroce binary was not found (make release builds target/release/metaroce; "
                  "or pass --controller-bin, or use --no-controller)")


# ---------------------------------------------------------------- state / cleanup

def state_path(prefix):
    return os.path.join(STATE_ROOT, prefix, "state.json")


def write_state(prefix, state):
    path = state_path(prefix)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path)


def read_state(prefix):
    try:
        with open(state_path(prefix)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def _alive(pid):
    return _cmdline(pid) is not None


def kill_pid(pid, expect):
    """Kill PID if its command line still contains `expect` (pids get reused)."""
    cmd = _cmdline(pid)
    if cmd is None or expect not in cmd:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if not _alive(pid):
                return True
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def root_links():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def _matches_prefix(name, prefix):
    if name in (f"{prefix}nq0", f"{prefix}nq1"):  # the netem probe
        return True
    rest = name[len(prefix):] if name.startswith(prefix) else None
    if not rest or "p" not in rest:
        return False
    dev, _, port = rest.partition("p")
    return dev.isdigit() and port.isdigit()


def leftovers(prefix):
    """(processes, interfaces) of a fabric with PREFIX: from its state file and by name."""
    procs, intfs = [], set()
    st = read_state(prefix)
    if st:
        for sw in st.get("switches", {}).values():
            procs.append((sw["pid"], "simple_switch_grpc"))
        for h in st.get("hosts", {}).values():
            procs.append((h["pid"], f"mininet:{h['name']}"))
        if st.get("controller"):
            procs.append((st["controller"]["pid"], "controller"))
        intfs.update(st.get("interfaces", []))
    # By name: our switches are the only simple_switch_grpc with ports named PREFIX<dev>p<port>.
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        cmd = _cmdline(int(pid)) or ""
        if cmd.startswith("simple_switch_grpc") or "/simple_switch_grpc " in cmd:
            if any(_matches_prefix(arg.split("@", 1)[-1], prefix) for arg in cmd.split() if "@" in arg):
                procs.append((int(pid), "simple_switch_grpc"))
    intfs.update(n for n in root_links() if _matches_prefix(n, prefix))
    existing = set(root_links())
    return ([p for p in procs if _alive(p[0]) and p[1] in (_cmdline(p[0]) or "")],
            sorted(i for i in intfs if i in existing))


def cleanup(prefix, quiet=False):
    procs, intfs = leftovers(prefix)
    st = read_state(prefix)
    launcher = st.get("launcher_pid") if st else None
    if launcher and launcher != os.getpid() and "metaroce_net" in (_cmdline(launcher) or ""):
        kill_pid(launcher, "metaroce_net")  # its own teardown runs first
        procs, intfs = leftovers(prefix)
    # Controller first (it would report switches going away), then switches, then host shells.
    order = {"controller": 0, "simple_switch_grpc": 1}
    for pid, expect in sorted(set(procs), key=lambda p: order.get(p[1], 2)):
        if kill_pid(pid, expect) and not quiet:
            log(f"cleanup: stopped pid {pid} ({expect})")
    for name in intfs:
        subprocess.run(["ip", "link", "del", name], capture_output=True)
        if not quiet:
            log(f"cleanup: deleted interface {name}")
    run_dir = os.path.join(STATE_ROOT, prefix)
    if os.path.isdir(run_dir):
        try:
            os.remove(state_path(prefix))
        except OSError:
            pass
    procs, intfs = leftovers(prefix)
    if procs or intfs:
        raise Fail(4, f"cleanup: still there: pids {[p for p, _ in procs]}, interfaces {intfs}")
    return True


def all_prefixes():
    out = set()
    if os.path.isdir(STATE_ROOT):
        out.update(d for d in os.listdir(STATE_ROOT) if os.path.isfile(state_path(d)))
    return sorted(out)


# ---------------------------------------------------------------- building the fabric

class Fabric:
    """The running testbed: Mininet net, switches, controller, state file."""

    def __init__(self, topo, args):
        self.topo, self.args = topo, args
        self.prefix = args.prefix
        self.run_dir = os.path.join(STATE_ROOT, self.prefix)
        self.net = None
        self.controller = None
        self.scaling = Scaling(args.scale if args.scale != "auto" else Scaling.auto(topo))
        self.stopped = False
        self.interfaces = []

    def plan_port(self, sw, port):
        """(link rate bps after scaling, delay s after scaling, depth pkts) of an egress port."""
        kind, *rest = sw.ports[port]
        d = self.topo.link_defaults
        if kind == "host":
            bps = rest[0].nic_rate or d["bandwidth"]
            return self.scaling.bw(bps), self.scaling.delay(d["delay"]), depth_pkts(d["buffer"])
        link = rest[2]
        return self.scaling.bw(link.bandwidth), self.scaling.delay(link.delay), depth_pkts(link.buffer)

    def build(self):
        from mininet.link import TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Host

        from bmv2 import BMv2Switch, gateway_mac, intf_name

        setLogLevel("output" if not self.args.verbose else "info")
        self.netem = netem_available(self.prefix)
        if not self.netem:
            log("this kernel has no sch_netem: link delays are not emulated "
                "(BMv2's own per-hop latency, a few hundred microseconds, remains)")
        os.makedirs(self.run_dir, exist_ok=True)
        net = self.net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                                 autoStaticArp=False, switch=BMv2Switch, host=Host, link=TCLink)
        p = self.prefix
        json_path = None if self.args.no_p4 else self.args.device_config
        for sw in self.topo.switches.values():
            ports = {port: intf_name(p, sw.device_id, port) for port in sw.ports}
            net.addSwitch(sw.name, cls=BMv2Switch, device_id=sw.device_id,
                          grpc_addr=f"127.0.0.1:{sw.p4rt_port}", thrift_port=sw.thrift_port,
                          json_path=json_path, ports=ports, run_dir=self.run_dir)
        for h in self.topo.hosts.values():
            net.addHost(h.name, ip=None, mac=None)
        for h in self.topo.hosts.values():
            bps, delay, _ = self.plan_port(h.leaf, h.port)
            ifn = intf_name(p, h.leaf.device_id, h.port)
            net.addLink(h.name, h.leaf.name, port1=0, port2=h.port, intfName1="eth0", intfName2=ifn,
                        addr1=h.mac, addr2=gateway_mac(h.leaf.device_id), **tc_params(bps, delay, self.netem))
            self.interfaces.append(ifn)
        for ln in self.topo.links:
            bps, delay, _ = self.plan_port(ln.a, ln.a_port)
            ia, ib = intf_name(p, ln.a.device_id, ln.a_port), intf_name(p, ln.b.device_id, ln.b_port)
            net.addLink(ln.a.name, ln.b.name, port1=ln.a_port, port2=ln.b_port, intfName1=ia, intfName2=ib,
                        addr1=gateway_mac(ln.a.device_id), addr2=gateway_mac(ln.b.device_id),
                        **tc_params(bps, delay, self.netem))
            self.interfaces += [ia, ib]
        net.build()
        self.save_state()

    def configure_interfaces(self):
        """Offloads off (BMv2 does not finish checksums), no IPv6 chatter, jumbo fabric links."""
        from bmv2 import gateway_mac
        for name in self.interfaces:
            subprocess.run(["ethtool", "-K", name, "tx", "off", "rx", "off", "sg", "off", "tso", "off"],
                           capture_output=True)
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], capture_output=True)
        for ln in self.topo.links:
            for sw, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
                subprocess.run(["ip", "link", "set", f"{self.prefix}{sw.device_id}p{port}", "mtu",
                                str(FABRIC_MTU)], check=True)
        for h in self.topo.hosts.values():
            node = self.net[h.name]
            gw = gateway_mac(h.leaf.device_id)
            cmds = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                    "ethtool -K eth0 tx off rx off sg off tso off >/dev/null 2>&1",
                    "ip link set lo up"]
            intf = node.intf("eth0")
            intf.ip, intf.prefixLen = h.ip, 32  # so Mininet's pingall and h1.IP() know it
            cmds += [f"ip addr add {h.ip}/32 dev eth0", "ip route add default dev eth0"]
            # Every other host is reached through the leaf: static ARP to its MAC.
            cmds += [f"ip neigh replace {o.ip} lladdr {gw} dev eth0 nud permanent"
                     for o in self.topo.hosts.values() if o is not h]
            for c in cmds:
                node.cmd(c)

    def start_switches(self):
        for sw in self.net.switches:
            sw.start([])
        self.save_state()
        for sw in self.net.switches:
            try:
                sw.wait_ready(self.args.switch_timeout)
            except RuntimeError:
                if "Address already in use" not in sw.log_tail(50):
                    raise
                # A TCP port from the YAML was taken, often briefly by some client's ephemeral
                # port: try once more, then say which port.
                time.sleep(2)
                sw.start([])
                self.save_state()
                try:
                    sw.wait_ready(self.args.switch_timeout)
                except RuntimeError:
                    raise Fail(4, f"{sw.name}: gRPC {sw.grpc_addr} or Thrift port {sw.thrift_port} is in use "
                                  "by another process (see `ss -ltnp`); change the YAML or stop it") from None
        self.save_state()

    def configure_queues(self):
        from bmv2 import queue_commands
        for sw in self.topo.switches.values():
            rates, depths = {}, {}
            for port in sw.ports:
                bps, _, depth = self.plan_port(sw, port)
                # At most the veth's tc rate, so the queue builds in BMv2, where P4 sees it.
                rates[port] = bps / (8 * RATE_FRAME)
                depths[port] = depth
            self.net[sw.name].cli(queue_commands(rates, depths))

    def install_static_routes(self):
        import static_routes
        for sw in self.topo.switches.values():
            self.net[sw.name].cli(static_routes.commands(self.topo, sw))

    def start_controller(self):
        a = self.args
        binary = find_metaroce(a.controller_bin)
        # Absolute paths: the controller runs in the repository (its defaults are relative to it).
        cmd = [binary, "controller", "run", os.path.abspath(a.topo), "--mode", a.mode,
               "--p4info", os.path.abspath(a.p4info), "--device-config", os.path.abspath(a.device_config),
               "--listen", a.listen]
        if a.events:
            cmd += ["--events", os.path.abspath(a.events)]
        cmd += a.controller_arg or []
        path = os.path.join(self.run_dir, "controller.log")
        log(f"controller: {' '.join(cmd)}  (log: {path})")
        from bmv2 import _die_with_parent
        with open(path, "wb") as out:
            self.controller = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, cwd=REPO, preexec_fn=_die_with_parent)
        self.save_state()
        # Ready when its API answers; the switches connect right after.
        import urllib.request
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise Fail(4, f"the controller exited with {self.controller.returncode}:\n" + tail(path))
            try:
                st = json.loads(urllib.request.urlopen(f"http://{a.listen}/api/v1/status", timeout=1).read())
                sws = st.get("switches", [])
                if len(sws) == len(self.topo.switches) and all(
                        x.get("connected") and x.get("installed_entries", 0) > 0 for x in sws):
                    log("controller: every switch connected and programmed")
                    return
            except (OSError, ValueError, AttributeError):
                pass
            time.sleep(0.3)
        log(f"warning: the controller has not programmed every switch after 30 s; see {path}")

    def controller_alive(self):
        return self.controller is None or self.controller.poll() is None

    def save_state(self):
        if self.net is None:
            return
        st = {
            "launcher_pid": os.getpid(), "prefix": self.prefix, "topo": os.path.abspath(self.args.topo),
            "scale": self.scaling.factor, "run_dir": self.run_dir,
            "interfaces": self.interfaces,
            "switches": {s.name: {"pid": s.proc.pid if s.proc else 0, "device_id": s.device_id,
                                  "thrift_port": s.thrift_port, "grpc": s.grpc_addr,
                                  "ports": {str(k): v for k, v in s.port_map.items()}}
                         for s in self.net.switches},
            "hosts": {h.name: {"name": h.name, "pid": self.net[h.name].pid, "ip": h.ip, "mac": h.mac,
                               "leaf": h.leaf.name, "port": h.port}
                      for h in self.topo.hosts.values()},
            "controller": ({"pid": self.controller.pid, "listen": self.args.listen, "mode": self.args.mode}
                           if self.controller else None),
        }
        write_state(self.prefix, st)

    def summary(self):
        s = self.scaling
        d = self.topo.link_defaults
        log(f"{self.topo.name}: {len(self.topo.switches)} switches, {len(self.topo.hosts)} hosts, "
            f"{len(self.topo.links)} fabric links; scale 1/{s.factor:g}: "
            f"{d['bandwidth'] / 1e6:g} Mbit/s -> {s.bw(d['bandwidth']) / 1e6:g} Mbit/s, "
            f"{d['delay'] * 1e6:g} us -> {s.delay(d['delay']) * 1e6:g} us, "
            f"BMv2 queues {s.bw(d['bandwidth']) / (8 * RATE_FRAME):.0f} pkt/s x {depth_pkts(d['buffer'])} pkt")
        for sw in self.net.switches:
            log(f"  {sw.name}: device {sw.device_id}, gRPC {sw.grpc_addr}, thrift {sw.thrift_port}, "
                f"ports {', '.join(f'{k}@{v}' for k, v in sorted(sw.port_map.items()))}, pid {sw.proc.pid}")

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        if self.controller and self.controller.poll() is None:
            self.controller.terminate()
            try:
                self.controller.wait(5)
            except subprocess.TimeoutExpired:
                self.controller.kill()
                self.controller.wait()
        if self.net is not None:
            try:
                self.net.stop()
            except Exception as e:  # keep going: cleanup below removes what is left
                log(f"teardown: mininet stop: {e}")
        try:
            cleanup(self.prefix, quiet=True)
        except Fail as e:
            log(str(e))


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------- command line

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="metaroce_net.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Scaling: --scale S divides every bandwidth by S (floor 1 Mbit/s) and multiplies every "
               "delay by S; buffers keep their size in packets. 'auto' makes the fastest link "
               f"{LINK_BUDGET / 1e6:g} Mbit/s (mininet-2x2: S=10). BMv2 queue rate = scaled link rate / "
               f"{RATE_FRAME}-byte frames, depth = buffer / {FRAME} bytes.\n\n" + __doc__.split("\n\n")[-1])
    ap.add_argument("topo", nargs="?", help="topology YAML (e.g. topologies/mininet-2x2.yaml)")
    ap.add_argument("--cleanup", action="store_true", help="remove leftovers of earlier runs and exit")
    ap.add_argument("--prefix",
                    help="name prefix of this fabric's interfaces (PREFIX<device>p<port>) and state; "
                         "default mr. With --cleanup: only this fabric (default: every fabric)")
    ap.add_argument("--scale", default="auto", help="time dilation factor S, or 'auto' (default)")
    ap.add_argument("--no-controller", action="store_true",
                    help="do not start the controller; install static ECMP routes over Thrift instead")
    ap.add_argument("--no-routes", action="store_true", help="with --no-controller: leave the tables empty")
    ap.add_argument("--no-p4", action="store_true",
                    help="start BMv2 without a program (the controller pushes it); default: load our JSON")
    ap.add_argument("--mode", choices=["observe", "advise", "act"], default="observe", help="controller mode")
    ap.add_argument("--controller-bin", help="metaroce binary (default target/release/metaroce, then PATH)")
    ap.add_argument("--controller-arg", action="append", help="extra argument for the controller (repeatable)")
    ap.add_argument("--listen", default="127.0.0.1:9100", help="controller metrics/API address")
    ap.add_argument("--events", help="controller event log (JSONL)")
    ap.add_argument("--p4info", default=os.path.join(REPO, "p4src/build/main.p4info.txtpb"))
    ap.add_argument("--device-config", default=os.path.join(REPO, "p4src/build/main.json"))
    ap.add_argument("--no-cli", action="store_true", help="no Mininet CLI (for scripts)")
    ap.add_argument("--run", type=float, default=0,
                    help="with --no-cli: stay up this many seconds (0: until SIGINT/SIGTERM)")
    ap.add_argument("--ready-file", help="write this file once the fabric is up (for scripts)")
    ap.add_argument("--switch-timeout", type=float, default=30, help="seconds to wait for each switch")
    ap.add_argument("--skip-topo-check", action="store_true", help="do not run `metaroce topo check` first")
    ap.add_argument("-v", "--verbose", action="store_true", help="Mininet's info messages")
    args = ap.parse_args(argv)
    if args.scale != "auto":
        try:
            args.scale = float(args.scale)
            assert args.scale > 0
        except (ValueError, AssertionError):
            ap.error(f"--scale must be a positive number or 'auto', not {args.scale!r}")
    if not args.cleanup and not args.topo:
        ap.error("a topology YAML is needed (or --cleanup)")
    args.cleanup_all = args.cleanup and args.prefix is None
    args.prefix = args.prefix or "mr"
    if not args.prefix.isalpha() or len(args.prefix) > 4:
        ap.error("--prefix must be 1-4 letters")
    return args


def topo_check(args):
    """Full validation by the Rust side, when its binary exists."""
    if args.skip_topo_check:
        return
    try:
        binary = find_metaroce(None)
    except Fail:
        return
    out = subprocess.run([binary, "topo", "check", args.topo], capture_output=True, text=True)
    if out.returncode == 1:
        raise Fail(1, (out.stdout + out.stderr).strip())


def check_local(topo):
    problems = []
    for sw in topo.switches.values():
        if sw.p4rt_host not in ("127.0.0.1", "localhost"):
            problems.append(f"{topo.path}: switch {sw.name}: p4rt {sw.p4rt} is not on this machine; "
                            "Mininet runs every BMv2 here, so use 127.0.0.1:PORT")
    if problems:
        raise Fail(1, "\n".join(problems))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.cleanup:
        if os.geteuid() != 0:
            raise Fail(3, "--cleanup needs root")
        prefixes = (set(all_prefixes()) | {args.prefix}) if args.cleanup_all else {args.prefix}
        for p in sorted(prefixes):
            cleanup(p)
        log("cleanup: nothing left (" + ", ".join(sorted(prefixes)) + ")")
        return 0
    try:
        topo = topo_yaml.load(args.topo)
    except OSError as e:
        raise Fail(3, f"cannot read {args.topo}: {e.strerror}") from None
    except topo_yaml.TopoError as e:
        raise Fail(1, str(e)) from None
    check_local(topo)
    topo_check(args)
    require_tools(not args.no_controller)
    if not args.no_p4 and not os.path.isfile(args.device_config):
        raise Fail(3, f"{args.device_config} not found: run `make p4` (needs p4c)")
    if not args.no_controller:
        find_metaroce(args.controller_bin)
    st = read_state(args.prefix)
    if st and _alive(st.get("launcher_pid", 0)) and "metaroce_net" in (_cmdline(st["launcher_pid"]) or ""):
        raise Fail(5, f"a fabric with prefix {args.prefix!r} is running (pid {st['launcher_pid']}); "
                      "stop it, run --cleanup, or pick another --prefix")
    cleanup(args.prefix, quiet=True)  # leftovers of a crashed run

    fabric = Fabric(topo, args)
    atexit.register(fabric.stop)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        fabric.build()
        fabric.configure_interfaces()
        fabric.start_switches()
        fabric.configure_queues()
        fabric.summary()
        if args.no_controller:
            if not args.no_routes and not args.no_p4:
                fabric.install_static_routes()
                log("no controller: static ECMP routes installed over Thrift")
            else:
                log("no controller: waiting for one (tables empty)")
        else:
            fabric.start_controller()
        if args.ready_file:
            with open(args.ready_file, "w") as f:
                f.write(state_path(args.prefix) + "\n")
        log(f"up; state in {state_path(args.prefix)}")
        if args.no_cli:
            deadline = time.monotonic() + args.run if args.run > 0 else None
            while deadline is None or time.monotonic() < deadline:
                if not fabric.controller_alive():
                    raise Fail(4, f"the controller exited with {fabric.controller.returncode}:\n"
                               + tail(os.path.join(fabric.run_dir, "controller.log")))
                dead = [s.name for s in fabric.net.switches if s.proc.poll() is not None]
                if dead:
                    raise Fail(4, f"switch {', '.join(dead)} died; see {fabric.run_dir}/<switch>.log")
                time.sleep(0.5)
        else:
            from mininet.cli import CLI
            CLI(fabric.net)
    except KeyboardInterrupt:
        log("interrupted; tearing down")
    except RuntimeError as e:
        raise Fail(4, str(e)) from None
    finally:
        fabric.stop()
        log("down")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fail as e:
        print(f"metaroce-net: error: {e}", file=sys.stderr)
        sys.exit(e.code)
