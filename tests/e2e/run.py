#!/usr/bin/python3
"""L4: Mininet + BMv2 end-to-end check of the testbed (mininet/).

Runs only as root with Mininet, BMv2 and the compiled program present;
otherwise prints one line naming what is missing and exits 0. It uses a
copy of topologies/mininet-2x2.yaml with free TCP ports and its own name
prefix, so it does not collide with a fabric someone has running.

Checks, without the controller:
  1. every switch is up with the YAML's device id, gRPC address, Thrift
     port and CPU port 255, and BMv2's own port list (Thrift show_ports)
     maps each YAML port number to the right veth;
  2. with static ECMP routes, every host pings every other (a wrong port
     mapping would send packets to the wrong neighbour);
  3. RoCEv2-like traffic crosses the fabric and is counted per flow;
  4. a clean stop (SIGTERM) and a crash (SIGKILL, then --cleanup) both
     leave no process, interface or state file behind.
With the controller (once `metaroce controller run` exists), it also checks
all-pairs ping over the controller's routes and that /metrics answers.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MN = os.path.join(REPO, "mininet")
LAUNCHER = os.path.join(MN, "metaroce_net.py")
TRAFFIC = os.path.join(MN, "traffic.py")
TOPO = os.path.join(REPO, "topologies/mininet-2x2.yaml")
PREFIX = "mte"
PY = "/usr/bin/python3"
sys.path.insert(0, MN)


def missing():
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("simple_switch_grpc", "simple_switch_CLI", "mnexec", "ping", "ethtool", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    if subprocess.run([PY, "-c", "import mininet.net, yaml"], capture_output=True).returncode != 0:
        return "Mininet Python API or PyYAML missing (make deps-mininet)"
    if not os.path.isfile(os.path.join(REPO, "p4src/build/main.json")):
        return "p4src/build/main.json missing (make p4)"
    return None


def free_ports(n):
    socks, ports = [], []
    while len(ports) < n:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def local_copy(tmp):
    """mininet-2x2 with free P4Runtime and Thrift ports."""
    text = open(TOPO).read()
    ports = iter(free_ports(8))
    text = re.sub(r'p4rt: "127\.0\.0\.1:\d+"', lambda m: f'p4rt: "127.0.0.1:{next(ports)}"', text)
    text = re.sub(r"thrift_port: \d+", lambda m: f"thrift_port: {next(ports)}", text)
    path = os.path.join(tmp, "e2e-2x2.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


class Check:
    def __init__(self):
        self.failed = []

    def ok(self, cond, what, detail=""):
        print(f"  {'ok  ' if cond else 'FAIL'} {what}{': ' + detail if detail and not cond else ''}", flush=True)
        if not cond:
            self.failed.append(what)
        return cond


def start(topo, tmp, extra, timeout=90):
    ready = os.path.join(tmp, "ready")
    if os.path.exists(ready):
        os.remove(ready)
    log = open(os.path.join(tmp, "launcher.log"), "w")
    p = subprocess.Popen([PY, LAUNCHER, topo, "--prefix", PREFIX, "--no-cli", "--ready-file", ready,
                          "--skip-topo-check"] + extra, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(ready):
            return p
        if p.poll() is not None:
            break
        time.sleep(0.2)
    stop(p)
    raise RuntimeError("launcher did not come up:\n" + open(os.path.join(tmp, "launcher.log")).read()[-3000:])


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def leftovers():
    import metaroce_net
    procs, intfs = metaroce_net.leftovers(PREFIX)
    state = os.path.exists(metaroce_net.state_path(PREFIX))
    return procs, intfs, state


def ping_all(state):
    bad = []
    hosts = state["hosts"]
    for a in sorted(hosts):
        for b in sorted(hosts):
            if a == b:
                continue
            for _ in range(3):
                r = subprocess.run(["mnexec", "-a", str(hosts[a]["pid"]), "ping", "-c", "1", "-W", "2",
                                    hosts[b]["ip"]], capture_output=True)
                if r.returncode == 0:
                    break
            else:
                bad.append(f"{a}->{b}")
    return bad


def check_switches(c, topo_path, state):
    import bmv2
    import topo_yaml
    topo = topo_yaml.load(topo_path)
    for sw in topo.switches.values():
        st = state["switches"][sw.name]
        cmd = open(f"/proc/{st['pid']}/cmdline", "rb").read().split(b"\0")
        cmd = [x.decode() for x in cmd]
        want = {"--device-id": str(sw.device_id), "--thrift-port": str(sw.thrift_port),
                "--grpc-server-addr": sw.p4rt, "--cpu-port": "255"}
        got = {k: cmd[cmd.index(k) + 1] for k in want if k in cmd}
        c.ok(got == want, f"{sw.name}: device id, ports and CPU port as in the YAML", f"{got} != {want}")
        expected = {port: bmv2.intf_name(PREFIX, sw.device_id, port) for port in sw.ports}
        actual = bmv2.thrift_ports(sw.thrift_port)
        c.ok(actual == expected, f"{sw.name}: BMv2 ports (Thrift show_ports) = YAML ports",
             f"{actual} != {expected}")
        port = sw.p4rt.rsplit(":", 1)[1]
        c.ok(bmv2.listening(int(port)), f"{sw.name}: P4Runtime server listening on {sw.p4rt}")


def controller_available():
    for binary in (os.path.join(REPO, "target/release/metaroce"), os.path.join(REPO, "target/debug/metaroce")):
        if os.access(binary, os.X_OK):
            r = subprocess.run([binary, "controller", "run", "--help"], capture_output=True, text=True)
            if r.returncode == 0 and "--mode" in r.stdout:
                return binary
    return None


def get(listen, path):
    import urllib.request
    with urllib.request.urlopen(f"http://{listen}{path}", timeout=5) as r:
        return r.read().decode()


def metric_sum(text, name):
    return sum(float(line.rsplit(None, 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def uplink_bytes(topo, leaf):
    import bmv2
    out = {}
    for port, (kind, *_rest) in leaf.ports.items():
        if kind == "switch":
            name = bmv2.intf_name(PREFIX, leaf.device_id, port)
            out[port] = int(open(f"/sys/class/net/{name}/statistics/tx_bytes").read())
    return out


def check_int_paths(c, topo, congestion, status):
    """Every INT path: leaf -> spine -> leaf, each hop's egress port leading to the next hop."""
    names = [s["name"] for s in status.get("switches", [])]
    paths = congestion.get("paths", [])
    problems = []
    for path in paths:
        hops = [(names[h["port"]["switch"]], h["port"]["port"]) for h in path.get("hops", [])]
        if len(hops) != 3:
            problems.append(f"{hops}: {len(hops)} hops, want 3")
            continue
        roles = [topo.switches[n].role for n, _ in hops]
        if roles != ["leaf", "spine", "leaf"]:
            problems.append(f"{hops}: roles {roles}")
        for (a, ap), (b, _bp) in zip(hops, hops[1:]):
            kind, *rest = topo.switches[a].ports.get(ap, ("none",))
            if kind != "switch" or rest[0].name != b:
                problems.append(f"{hops}: {a}:{ap} does not lead to {b}")
        last, lp = hops[-1]
        if topo.switches[last].ports.get(lp, ("none",))[0] != "host":
            problems.append(f"{hops}: the sink's egress {last}:{lp} is not a host port")
    c.ok(paths and not problems, f"INT reports give {len(paths)} paths, 3 hops each, node ids and ports "
         "matching the topology", "; ".join(problems) or "no paths")
    c.ok(congestion.get("counters", {}).get("unknown_node_ids", 0) == 0, "INT node ids are all known")


def controller_phase(c, topo_path, tmp, binary):
    """Controller in act mode: routes, INT, digests, a group rewrite; returns the launcher."""
    import topo_yaml
    topo = topo_yaml.load(topo_path)
    print("e2e: fabric with the controller (act mode)", flush=True)
    listen = f"127.0.0.1:{free_ports(1)[0]}"
    events = os.path.join(tmp, "events.jsonl")
    p = start(topo_path, tmp, ["--mode", "act", "--controller-bin", binary, "--listen", listen,
                               "--events", events], timeout=120)
    state = json.load(open(os.path.join("/tmp/metaroce-mn", PREFIX, "state.json")))
    deadline = time.monotonic() + 30
    bad = ["not tried"]
    while bad and time.monotonic() < deadline:
        bad = ping_all(state)
    c.ok(not bad, "every host pings every other over the controller's routes", ", ".join(bad))
    # A congestion episode: four RoCEv2 flows leaf1 -> leaf2 offering more than the two uplinks carry.
    leaf1 = topo.switches["leaf1"]
    before = uplink_bytes(topo, leaf1)
    out = os.path.join(tmp, "episode.json")
    # Messages of 16 packets with 8 ms between them, beyond the fabric's 5 ms
    # flowlet timeout: a flow moves only at such a gap, so without them the
    # flows stay where their first packets hashed and the rebalance below
    # would depend on the sender's scheduling hiccups.
    r = subprocess.run([PY, TRAFFIC, "pairs", "--prefix", PREFIX, "--flow", "h1:h3", "--flow", "h2:h4",
                        "--qps", "2", "--rate", "5Mbps", "--message", "16", "--gap-ms", "8", "--time", "8",
                        "-o", out], capture_output=True, text=True)
    c.ok(r.returncode == 0, "congestion episode traffic ran", r.stderr[-500:])
    after = uplink_bytes(topo, leaf1)
    metrics = get(listen, "/metrics")
    congestion = json.loads(get(listen, "/api/v1/congestion"))
    status = json.loads(get(listen, "/api/v1/status"))
    reports = metric_sum(metrics, "metaroce_int_reports_total")
    c.ok(reports > 0, f"INT Telemetry Reports reach the controller ({reports:.0f})")
    check_int_paths(c, topo, congestion, status)
    digests = metric_sum(metrics, "metaroce_digests_total")
    c.ok(digests > 0, f"the episode raises threshold digests ({digests:.0f})")
    evs = [json.loads(line) for line in open(events) if line.strip()] if os.path.exists(events) else []
    rewrites = [e for e in evs if e.get("kind") == "derate" and (e.get("details") or {}).get("applied")]
    upstream = sorted({e.get("switch") for e in rewrites})
    c.ok(bool(rewrites) and "leaf1" in upstream,
         f"a group rewrite on the upstream switch ({len(rewrites)} applied derates on {', '.join(upstream)})")
    moved = {port: after[port] - before[port] for port in after}
    tot = sum(moved.values()) or 1
    c.ok(all(v > 0.1 * tot for v in moved.values()), "traffic uses both uplinks of leaf1 ("
         + ", ".join(f"port {k} {100 * v / tot:.0f}%" for k, v in sorted(moved.items())) + ")")
    c.ok("metaroce_switch_connected" in metrics, "controller /metrics answers with metaroce_ metrics")
    stop(p)
    procs, intfs, st = leftovers()
    c.ok(not procs and not intfs and not st, "teardown with the controller leaves nothing behind",
         f"processes {procs}, interfaces {intfs}, state file {st}")
    return p


def main():
    why = missing()
    if not why and os.path.exists(os.path.join(REPO, "p4src/build/PENDING")):
        why = "p4src/build/ is not p4c's output of p4src/ yet: see p4src/build/PENDING"

    if why:
        print(f"skip: L4 Mininet end-to-end ({why})")
        return 0
    import metaroce_net
    t0 = time.monotonic()
    c = Check()
    tmp = tempfile.mkdtemp(prefix="metaroce-e2e-")
    topo = local_copy(tmp)
    metaroce_net.cleanup(PREFIX, quiet=True)
    p = None
    try:
        print("e2e: fabric without controller (static ECMP over Thrift)", flush=True)
        p = start(topo, tmp, ["--no-controller"])
        state = json.load(open(metaroce_net.state_path(PREFIX)))
        check_switches(c, topo, state)
        bad = ping_all(state)
        c.ok(not bad, "every host pings every other (12 pairs)", ", ".join(bad))
        out = os.path.join(tmp, "traffic.json")
        r = subprocess.run([PY, TRAFFIC, "pairs", "--prefix", PREFIX, "--flow", "h1:h3", "--flow", "h4:h2",
                            "--rate", "2Mbps", "--time", "2", "-o", out], capture_output=True, text=True)
        if c.ok(r.returncode == 0, "traffic.py runs", r.stderr[-500:]):
            flows = json.load(open(out))["flows"]
            c.ok(all(f["rx_pkts"] > 0.5 * f["sent_pkts"] > 0 for f in flows),
                 "RoCEv2 flows arrive, counted per flow",
                 "; ".join(f"{f['src']}->{f['dst']} sent {f['sent_pkts']} got {f['rx_pkts']}" for f in flows))
        stop(p)
        c.ok(p.returncode == 0, "launcher exits 0 on SIGTERM", f"exit {p.returncode}")
        procs, intfs, st = leftovers()
        c.ok(not procs and not intfs and not st, "clean stop leaves nothing behind",
             f"processes {procs}, interfaces {intfs}, state file {st}")

        print("e2e: crash (SIGKILL) and --cleanup", flush=True)
        p = start(topo, tmp, ["--no-controller", "--no-routes"])
        stop(p, signal.SIGKILL)
        r = subprocess.run([PY, LAUNCHER, "--cleanup", "--prefix", PREFIX], capture_output=True, text=True)
        c.ok(r.returncode == 0, "--cleanup exits 0", r.stdout + r.stderr)
        procs, intfs, st = leftovers()
        c.ok(not procs and not intfs and not st, "after a crash, --cleanup leaves nothing behind",
             f"processes {procs}, interfaces {intfs}, state file {st}")

        binary = controller_available()
        if binary is None:
            print("  skip controller checks (metaroce controller run not built yet)")
        else:
            p = controller_phase(c, topo, tmp, binary)
    except Exception as e:  # noqa: BLE001 - report, then clean up below
        c.ok(False, "e2e run", f"{type(e).__name__}: {e}")
    finally:
        if p is not None:
            stop(p)
        try:
            metaroce_net.cleanup(PREFIX, quiet=True)
        except metaroce_net.Fail as e:
            print(f"  FAIL {e}")
            c.failed.append("final cleanup")
        shutil.rmtree(tmp, ignore_errors=True)
    took = time.monotonic() - t0
    if c.failed:
        print(f"e2e: {len(c.failed)} check(s) failed in {took:.0f} s: {', '.join(c.failed)}")
        return 1
    print(f"e2e: all checks passed in {took:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
