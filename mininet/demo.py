#!/usr/bin/python3
"""Mininet demo: one congestion scenario, controller in observe mode, then in act mode.

    make mininet-demo TOPO=topologies/mininet-2x2.yaml
    sudo mininet/demo.py topologies/mininet-2x2.yaml --controller-bin target/release/metaroce -o target/mininet-demo

Scenario: the hosts of the first leaf send RoCEv2-like flows (--qps queue
pairs per host pair) to the hosts of the second leaf, at a rate that the
uplinks carry when the flows are spread but not when ECMP hashes most of
them onto one uplink. Each run samples, every half second, the
controller's /metrics (metaroce_port_queue_depth, metaroce_digests_total,
metaroce_int_reports_total, metaroce_reroutes_total, metaroce_group_weight)
and the bytes on the first leaf's uplinks (which spine the traffic takes),
and keeps /api/v1/events and /api/v1/groups. It prints a before/after
table and draws OUT/demo.svg; everything is in OUT/ as JSON.

Needs the controller (`metaroce controller run`): without it the demo
stops with a message instead of pretending.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import topo_yaml  # noqa: E402
from bmv2 import intf_name, run_cli  # noqa: E402

PY = "/usr/bin/python3"
PREFIX = "mrd"


def die(code, msg):
    print(f"mininet-demo: {msg}", file=sys.stderr)
    sys.exit(code)


def controller_ready(binary):
    try:
        r = subprocess.run([binary, "controller", "run", "--help"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return r.returncode == 0 and "--mode" in r.stdout


def http(listen, path, timeout=2):
    with urllib.request.urlopen(f"http://{listen}{path}", timeout=timeout) as r:
        return r.read().decode()


METRIC = re.compile(r'^(metaroce_[a-z_]+)(?:\{([^}]*)\})?\s+([-+0-9.eEinfNa]+)')


def parse_metrics(text):
    """[(name, {label: value}, number)] from OpenMetrics text."""
    out = []
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return out


def total(metrics, name):
    return sum(v for n, _, v in metrics if n == name)


def scenario(topo):
    leaves = [s for s in topo.switches.values() if any(h.leaf is s for h in topo.hosts.values())]
    if len(leaves) < 2:
        die(1, f"{topo.path}: the demo needs two leaves with hosts")
    a, b = leaves[0], leaves[1]
    src = sorted((h for h in topo.hosts.values() if h.leaf is a), key=lambda h: h.port)
    dst = sorted((h for h in topo.hosts.values() if h.leaf is b), key=lambda h: h.port)
    pairs = list(zip(src, dst))
    uplinks = sorted(p for p, (kind, *_r) in a.ports.items() if kind == "switch")
    return a, pairs, uplinks


def run_mode(mode, args, topo, out, name=None):
    name = name or mode
    leaf, pairs, uplinks = scenario(topo)
    listen = args.listen
    ready = os.path.join(out, f"{name}.ready")
    if os.path.exists(ready):
        os.remove(ready)
    log = open(os.path.join(out, f"{name}-launcher.log"), "w")
    cmd = [PY, os.path.join(HERE, "metaroce_net.py"), topo.path, "--prefix", PREFIX, "--no-cli",
           "--ready-file", ready, "--scale", args.scale]
    if mode == "static":
        cmd += ["--no-controller"]
    else:
        cmd += ["--mode", mode, "--controller-bin", args.controller_bin, "--listen", listen,
                "--events", os.path.join(out, f"{name}-events.jsonl")]
    print(f"mininet-demo: {mode}: starting the fabric" + ("" if mode == "static" else " and the controller"), flush=True)
    launcher = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while not os.path.exists(ready):
            if launcher.poll() is not None or time.monotonic() > deadline:
                die(4, f"{mode}: the fabric did not come up; see {log.name}")
            time.sleep(0.3)
        # The controller is ready when every switch is connected and routes work.
        deadline = time.monotonic() + 60
        while mode != "static":
            try:
                m = parse_metrics(http(listen, "/metrics"))
                conn = [v for n, _, v in m if n == "metaroce_switch_connected"]
                if len(conn) >= len(topo.switches) and all(v == 1 for v in conn):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                die(4, f"{mode}: the controller did not connect to every switch in 60 s; "
                       f"see /tmp/metaroce-mn/{PREFIX}/controller.log")
            time.sleep(0.5)
        time.sleep(args.settle)
        flows_out = os.path.join(out, f"{name}-traffic.json")
        tcmd = [PY, os.path.join(HERE, "traffic.py"), "pairs", "--prefix", PREFIX, "--qps", str(args.qps),
                "--qp-base", str(args.qp_base), "--rate", args.rate, "--time", str(args.time), "-o", flows_out]
        for s, d in pairs:
            tcmd += ["--flow", f"{s.name}:{d.name}"]
        print(f"mininet-demo: {mode}: {len(pairs) * args.qps} flows {leaf.name} -> other leaf for "
              f"{args.time:g} s", flush=True)
        traffic = subprocess.Popen(tcmd, stderr=subprocess.PIPE, text=True)
        samples = []
        t0 = time.time()
        ifnames = {p: intf_name(PREFIX, leaf.device_id, p) for p in uplinks}
        while traffic.poll() is None:
            s = {"t": time.time() - t0, "tx_bytes": {}}
            for p, ifn in ifnames.items():
                try:
                    s["tx_bytes"][str(p)] = int(open(f"/sys/class/net/{ifn}/statistics/tx_bytes").read())
                except OSError:
                    pass
            try:
                s["metrics"] = parse_metrics(http(listen, "/metrics")) if mode != "static" else []
            except OSError:
                s["metrics"] = []
            if mode != "static" and len(samples) % 2 == 0:
                try:
                    cong = json.loads(http(listen, "/api/v1/congestion"))
                    s["worst_hop_us"] = max([h.get("ewma", 0) for path in cong.get("paths", [])
                                             for h in path.get("hops", [])] + [0])
                except (OSError, ValueError):
                    pass
            samples.append(s)
            time.sleep(0.5)
        err = traffic.stderr.read()
        if traffic.returncode != 0:
            die(4, f"{mode}: traffic failed: {err.strip()}")
        extra = {}
        for what in ("events", "groups", "congestion", "status") if mode != "static" else ():
            try:
                extra[what] = json.loads(http(listen, f"/api/v1/{what}"))
            except (OSError, ValueError) as e:
                extra[what] = {"error": str(e)}
        # The switch's own high-water mark (the controller may reset it; the max of both is kept).
        regmax = {}
        for p in uplinks:
            text = run_cli(leaf.thrift_port,
                           [f"register_read MetaroceEgress.queue_sensing.port_max_depth {p}"], check=False)
            m = re.search(r"=\s*(\d+)", text)
            regmax[p] = int(m.group(1)) if m else 0
        result = {"mode": mode, "leaf": leaf.name, "uplinks": uplinks, "samples": samples,
                  "events_file": os.path.join(out, f"{name}-events.jsonl"),
                  "traffic": json.load(open(flows_out)), "api": extra, "register_max_depth": regmax}
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(result, f, indent=1)
        return result
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.wait(60)
            except subprocess.TimeoutExpired:
                launcher.kill()
        subprocess.run([PY, os.path.join(HERE, "metaroce_net.py"), "--cleanup", "--prefix", PREFIX],
                       capture_output=True)


def events(r):
    ev = r["api"].get("events")
    if isinstance(ev, dict):
        ev = ev.get("events", [])
    if not isinstance(ev, list):
        ev = []
    path = r.get("events_file")
    if path and os.path.exists(path):  # the file has them all; the API serves a bounded ring
        with open(path) as f:
            ev = [json.loads(line) for line in f if line.strip()]
    return ev


def int_paths(r):
    """Lines describing the INT paths the controller saw: hops with their latency."""
    cong = r["api"].get("congestion")
    if not isinstance(cong, dict):
        return []
    status = r["api"].get("status") or {}
    names = [s.get("name") for s in status.get("switches", [])] if isinstance(status, dict) else []

    def hop(h):
        p = h.get("port", {})
        i = p.get("switch")
        name = names[i] if isinstance(i, int) and i < len(names) else str(i)
        return f"{name}:{p.get('port')}"
    out = []
    for path in cong.get("paths", []):
        hops = path.get("hops", [])
        lat = ", ".join(f"{hop(h)} {h.get('ewma', 0) / 1000:.1f} ms" for h in hops)
        out.append(f"  {' -> '.join(hop(h) for h in hops)}: {path.get('reports', 0)} reports; "
                   f"per-hop latency (EWMA) {lat}")
    return out


def summarize(r):
    tr = r["traffic"]
    samples = r["samples"]
    m_last = samples[-1]["metrics"] if samples else []
    qd = [v for s in samples for n, lab, v in s["metrics"]
          if n == "metaroce_port_queue_depth" and lab.get("switch") == r["leaf"]]
    first, last = samples[0]["tx_bytes"], samples[-1]["tx_bytes"]
    moved = {p: last.get(str(p), 0) - first.get(str(p), 0) for p in r["uplinks"]}
    tot = sum(moved.values()) or 1
    return {
        "throughput_mbps": tr["summary"]["aggregate_bps"] / 1e6,
        "min_flow_mbps": tr["summary"]["min_flow_bps"] / 1e6,
        "loss_pct": 100 * sum(f.get("lost_pkts", 0) for f in tr["flows"])
        / max(1, sum(f.get("sent_pkts", 0) for f in tr["flows"])),
        "max_queue_pkts": max(qd + list(r["register_max_depth"].values()) + [0]),
        "digests": total(m_last, "metaroce_digests_total"),
        "int_reports": total(m_last, "metaroce_int_reports_total"),
        "worst_hop_ms": mean([x["worst_hop_us"] / 1000 for x in samples if "worst_hop_us" in x]),
        "reroutes_decided": sum(1 for e in events(r) if e.get("kind") in ("derate", "restore")),
        "group_rewrites": sum(1 for e in events(r) if e.get("kind") in ("derate", "restore")
                              and (e.get("details") or {}).get("applied")),
        "uplink_share": {p: moved[p] / tot for p in r["uplinks"]},
        "worst_split_pct": 100 * worst_split(samples, r["uplinks"]),
    }


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def worst_split(samples, uplinks, window=2):
    """ECMP collisions: the largest share one uplink carried in any 1 s window (2 samples)."""
    worst = 0.0
    for i in range(window, len(samples)):
        a, b = samples[i - window]["tx_bytes"], samples[i]["tx_bytes"]
        moved = [b.get(str(p), 0) - a.get(str(p), 0) for p in uplinks]
        if sum(moved) > 20000:  # ignore idle windows
            worst = max(worst, max(moved) / sum(moved))
    return worst


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if xs else 0.0


def table(results):
    rows = [("throughput (Mbit/s)", "throughput_mbps", "{:.2f}"), ("slowest flow (Mbit/s)", "min_flow_mbps", "{:.2f}"),
            ("loss (%)", "loss_pct", "{:.1f}"), ("max queue depth (pkt)", "max_queue_pkts", "{:.0f}"),
            ("threshold digests", "digests", "{:.0f}"), ("INT reports", "int_reports", "{:.0f}"),
            ("busiest uplink, 1 s (%)", "worst_split_pct", "{:.0f}"),
            ("worst INT hop, mean (ms)", "worst_hop_ms", "{:.1f}"),
            ("reroutes decided", "reroutes_decided", "{:.0f}"),
            ("group rewrites applied", "group_rewrites", "{:.0f}")]
    modes = list(dict.fromkeys(r["mode"] for r in results))
    runs = {m: [summarize(r) for r in results if r["mode"] == m] for m in modes}
    sums = []
    for m in modes:  # the median of each figure over the runs of a mode
        one = {k: median([x[k] for x in runs[m]]) for k in runs[m][0] if k != "uplink_share"}
        one["uplink_share"] = {p: median([x["uplink_share"][p] for x in runs[m]]) for p in runs[m][0]["uplink_share"]}
        one["runs"] = len(runs[m])
        sums.append(one)
    lines = [f"{'':24}" + "".join(f"{m:>12}" for m in modes)]
    for label, key, fmt in rows:
        lines.append(f"{label:24}" + "".join(f"{fmt.format(s[key]):>12}" for s in sums))
    for p in results[0]["uplinks"]:
        lines.append(f"{'uplink port ' + str(p) + ' share':24}"
                     + "".join(f"{100 * s['uplink_share'].get(p, 0):>11.0f}%" for s in sums))
    return "\n".join(lines), sums


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("svg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("mininet-demo: matplotlib missing (make deps-mininet); no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(3, len(results), figsize=(6 * len(results), 10), squeeze=False, sharey="row")
    for col, r in enumerate(results):
        s = r["samples"]
        ts = [x["t"] for x in s]
        for p in r["uplinks"]:
            rate = [0.0] + [max(0, (s[i]["tx_bytes"].get(str(p), 0) - s[i - 1]["tx_bytes"].get(str(p), 0)) * 8
                                / max(1e-3, ts[i] - ts[i - 1]) / 1e6) for i in range(1, len(s))]
            axes[0][col].plot(ts, rate, label=f"{r['leaf']} uplink port {p}")
            depth = [next((v for n, lab, v in x["metrics"] if n == "metaroce_port_queue_depth"
                           and lab.get("switch") == r["leaf"] and lab.get("port") == str(p)), 0) for x in s]
            axes[1][col].plot(ts, depth, label=f"port {p}")
        lat = [(x["t"], x["worst_hop_us"] / 1000) for x in s if "worst_hop_us" in x]
        if lat:
            axes[2][col].plot([t for t, _ in lat], [v for _, v in lat], label="worst INT hop latency (EWMA)")
        axes[2][col].set_ylabel("ms")
        axes[2][col].set_xlabel("seconds")
        axes[0][col].set_title(f"controller mode: {r['mode']}")
        axes[0][col].set_ylabel("Mbit/s")
        axes[1][col].set_ylabel("queue depth (packets)")
        for ax in (axes[0][col], axes[1][col], axes[2][col]):
            ax.legend(loc="upper right", fontsize=8)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("topo")
    ap.add_argument("--controller-bin", default=os.path.join(REPO, "target/release/metaroce"))
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "target/mininet-demo"))
    ap.add_argument("--modes", default="observe,act")
    ap.add_argument("--time", type=float, default=20, help="seconds of traffic per mode")
    ap.add_argument("--rate", default="4Mbps", help="per flow (4 flows: two uplinks carry them spread, not collided)")
    ap.add_argument("--qps", type=int, default=2, help="queue pairs per host pair")
    ap.add_argument("--qp-base", default="0x100")
    ap.add_argument("--settle", type=float, default=3, help="seconds between controller ready and traffic")
    ap.add_argument("--listen", default="127.0.0.1:9180")
    ap.add_argument("--scale", default="auto", help="the launcher's --scale")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the modes alternately N times; the table shows medians")
    ap.add_argument("--static-only", action="store_true",
                    help="only a baseline on static ECMP without the controller (checks the testbed; "
                         "no digests, INT or reroutes)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        die(3, "needs root (Mininet); run: sudo make mininet-demo")
    if args.static_only:
        args.modes = "static"
    elif not controller_ready(args.controller_bin):
        die(3, f"this demo needs the controller (`{args.controller_bin} controller run ... --mode observe|act`), "
               "which is not available yet: build it with `make release` once it has landed. "
               "Meanwhile: sudo mininet/metaroce_net.py TOPO --no-controller, and mininet/traffic.py")
    try:
        topo = topo_yaml.load(args.topo)
    except (OSError, topo_yaml.TopoError) as e:
        die(1, str(e))
    os.makedirs(args.out, exist_ok=True)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results = []
    for i in range(args.repeat):  # alternate the modes, so slow drifts of the machine hit both
        for m in modes:
            results.append(run_mode(m, args, topo, args.out, m if args.repeat == 1 else f"{m}-{i + 1}"))
    text, sums = table(results)
    if args.repeat > 1:
        text = f"(medians over {args.repeat} runs per mode)\n" + text
    for r in results[:len(modes)]:
        paths = int_paths(r)
        if paths:
            text += f"\n\nINT paths seen by the controller ({r['mode']}):\n" + "\n".join(paths)
    print("\n" + text + "\n")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({m: s for m, s in zip(modes, sums)}, f, indent=1)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    if plot(results[:len(modes)], os.path.join(args.out, "demo.svg")):
        print(f"mininet-demo: plot in {args.out}/demo.svg, data in {args.out}/")


if __name__ == "__main__":
    main()
