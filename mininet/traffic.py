#!/usr/bin/python3
"""AI-style traffic on a running metaroce Mininet fabric; per-flow results as JSON.

    mininet/traffic.py incast --dst h1 --src h2,h3,h4 --rate 5Mbps --time 10 -o incast.json
    mininet/traffic.py all-to-all --hosts h1,h2,h3,h4 --rate 2Mbps --time 10
    mininet/traffic.py permutation --hosts h1,h2,h3,h4 --seed 7 --time 10
    mininet/traffic.py pairs --flow h1:h3 --flow h2:h4 --qps 2 --tool iperf3

RoCEv2-like UDP (default, --tool roce): destination port 4791; the payload
starts with a 12-byte InfiniBand BTH (opcode RC SEND-only, P_Key 0xffff,
destination QP, PSN) and ends with a 4-byte ICRC placeholder. Like a real
RNIC, each QP uses one fixed UDP source port (0xC000 + QP low byte), so a
host pair has as little entropy as real RoCE traffic. Senders pace at
--rate per flow; receivers count bytes per flow, PSN gaps (loss),
reordering and a 100 ms throughput timeline. --tool iperf3 runs iperf3
(TCP, or UDP with --iperf-udp) for the same flows instead.

The fabric is found through the launcher's state file (--prefix, default
mr); traffic runs only inside the Mininet hosts' namespaces.
"""

import argparse
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import time

STATE_ROOT = "/tmp/metaroce-mn"
ROCE_PORT = 4791
BTH = struct.Struct("!BBHI I")  # opcode, flags, P_Key, (resv8 | dest QP 24), (A | resv7 | PSN 24)
OP_RC_SEND_ONLY = 0x04
BIN = 0.1  # seconds per timeline bin


def rate(text):
    import re
    m = re.fullmatch(r"\s*([0-9.]+)\s*(bps|Kbps|Mbps|Gbps)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a rate (e.g. 5Mbps)")
    return float(m.group(1)) * {"bps": 1, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, None: 1}[m.group(2)]


def source_port(qp):
    """What an RNIC does: one fixed UDP source port per QP, from a small range."""
    return 0xC000 + (qp & 0xFF)


# ---------------------------------------------------------------- agents (run inside a host)

def agent_send(args):
    """Pace every flow at its rate for `time` seconds; print what was sent."""
    flows = json.loads(args.flows)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    socks = {}
    for f in flows:
        if f["sport"] not in socks:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            s.bind(("0.0.0.0", f["sport"]))
            socks[f["sport"]] = s
        f["psn"] = 0
        f["sent_pkts"] = 0
        f["sent_bytes"] = 0
        f["interval"] = f["size"] * 8 / f["rate_bps"]
        # Messages: `message` packets, then `gap` seconds idle (longer than
        # the flowlet timeout, the gap is a flowlet boundary, where a switch
        # may move the flow); the packets of a message are paced closer so
        # that the flow's average rate stays its rate.
        f["message"], f["gap"] = f.get("message", 0), f.get("gap", 0.0)
        if f["message"] > 0 and f["gap"] > 0:
            f["interval"] = (f["interval"] * f["message"] - f["gap"]) / f["message"]
    sock.close()
    start = time.monotonic()
    end = start + args.time
    for i, f in enumerate(flows):  # stagger the flows' first packets
        f["next"] = start + f["interval"] * i / max(1, len(flows))
    while True:
        now = time.monotonic()
        if now >= end:
            break
        soonest = end
        for f in flows:
            while f["next"] <= now:
                bth = BTH.pack(OP_RC_SEND_ONLY, 0, 0xFFFF, f["dqp"] & 0xFFFFFF, f["psn"] & 0xFFFFFF)
                payload = bth + bytes(f["size"] - BTH.size - 4) + b"\0\0\0\0"  # ICRC placeholder
                try:
                    socks[f["sport"]].sendto(payload, (f["dst_ip"], ROCE_PORT))
                    f["sent_pkts"] += 1
                    f["sent_bytes"] += len(payload)
                except OSError:
                    pass  # a full socket buffer is a drop at the NIC; the receiver sees the PSN gap
                f["psn"] += 1
                f["next"] += f["interval"]
                if f["message"] > 0 and f["gap"] > 0 and f["psn"] % f["message"] == 0:
                    f["next"] += f["gap"]
                if now - f["next"] > 0.05:  # far behind (CPU starved): do not burst, skip ahead
                    f["next"] = now
            soonest = min(soonest, f["next"])
        delay = soonest - time.monotonic()
        if delay > 0:
            time.sleep(min(delay, 0.01))
    out = [{k: f[k] for k in ("dst_ip", "sport", "dqp", "sent_pkts", "sent_bytes")} for f in flows]
    print(json.dumps({"elapsed": time.monotonic() - start, "flows": out}), flush=True)


class FlowStats:
    def __init__(self, now):
        self.pkts = self.bytes = 0
        self.first = self.last = now
        self.psn_base = None
        self.psn_max = -1
        self.reordered = self.dups = 0
        self.seen = set()
        self.timeline = {}

    def add(self, psn, size, now, t0):
        if self.psn_base is None:
            self.psn_base = psn
        # Unwrap the 24-bit PSN relative to the highest one seen.
        rel = (psn - self.psn_base) & 0xFFFFFF
        if self.psn_max >= 0:
            hi = self.psn_max & ~0xFFFFFF
            cand = hi + rel
            if cand < self.psn_max - 0x800000:
                cand += 0x1000000
            rel = cand
        if rel in self.seen:
            self.dups += 1
            return
        self.seen.add(rel)
        if rel < self.psn_max:
            self.reordered += 1
        self.psn_max = max(self.psn_max, rel)
        self.pkts += 1
        self.bytes += size
        self.last = now
        b = int((now - t0) / BIN)
        self.timeline[b] = self.timeline.get(b, 0) + size


def agent_recv(args):
    """Count RoCEv2 packets per (source IP, source port, dest QP) until SIGTERM or --time."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("0.0.0.0", ROCE_PORT))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    t0 = time.time()
    deadline = time.monotonic() + args.time
    flows = {}
    bad = 0
    print("ready", flush=True)
    while not stop and time.monotonic() < deadline:
        r, _, _ = select.select([sock], [], [], 0.1)
        if not r:
            continue
        while True:
            try:
                data, (ip, port) = sock.recvfrom(65535, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if len(data) < BTH.size:
                bad += 1
                continue
            _op, _fl, _pkey, dqp, apsn = BTH.unpack_from(data)
            key = (ip, port, dqp & 0xFFFFFF)
            now = time.time()
            st = flows.get(key)
            if st is None:
                st = flows[key] = FlowStats(now)
            st.add(apsn & 0xFFFFFF, len(data), now, t0)
    out = []
    for (ip, port, dqp), st in sorted(flows.items()):
        n = max(st.timeline) + 1 if st.timeline else 0
        out.append({"src_ip": ip, "sport": port, "dqp": dqp, "rx_pkts": st.pkts, "rx_bytes": st.bytes,
                    "first": st.first, "last": st.last, "psn_span": st.psn_max + 1,
                    "lost_psn_gaps": st.psn_max + 1 - st.pkts, "reordered": st.reordered,
                    "duplicates": st.dups, "timeline_start": t0,
                    "timeline": [st.timeline.get(i, 0) for i in range(n)]})
    print(json.dumps({"flows": out, "malformed": bad}), flush=True)


# ---------------------------------------------------------------- orchestration

def load_state(prefix):
    path = os.path.join(STATE_ROOT, prefix, "state.json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        sys.exit(f"traffic: no running fabric with prefix {prefix!r} ({path} missing); "
                 "start mininet/metaroce_net.py first")


def in_host(state, host, argv, **kw):
    """Popen argv inside host's network namespace (mnexec -a attaches to its shell's)."""
    pid = state["hosts"][host]["pid"]
    return subprocess.Popen(["mnexec", "-a", str(pid)] + argv, **kw)


def make_flows(args, hosts):
    def names(text):
        out = [h.strip() for h in text.split(",") if h.strip()] if text else sorted(hosts)
        for h in out:
            if h not in hosts:
                sys.exit(f"traffic: unknown host {h!r} (hosts: {', '.join(sorted(hosts))})")
        return out

    if args.pattern == "incast":
        dst = names(args.dst)
        if len(dst) != 1:
            sys.exit("traffic: incast needs exactly one --dst")
        pairs = [(s, dst[0]) for s in names(args.src) if s != dst[0]]
    elif args.pattern == "all-to-all":
        hs = names(args.hosts)
        pairs = [(a, b) for a in hs for b in hs if a != b]
    elif args.pattern == "permutation":
        hs = names(args.hosts)
        rng = random.Random(args.seed)
        while True:  # a derangement: nobody sends to itself
            perm = hs[:]
            rng.shuffle(perm)
            if all(a != b for a, b in zip(hs, perm)) or len(hs) < 2:
                break
        pairs = list(zip(hs, perm))
    else:
        pairs = []
        for f in args.flow or []:
            a, _, b = f.partition(":")
            names(a), names(b)
            pairs.append((a, b))
    if not pairs:
        sys.exit("traffic: the pattern gives no flows")
    flows = []
    for i, (a, b) in enumerate(pairs):
        for k in range(args.qps):
            qp = args.qp_base + i * args.qps + k
            flows.append({"src": a, "dst": b, "src_ip": hosts[a]["ip"], "dst_ip": hosts[b]["ip"],
                          "dqp": qp, "sport": source_port(qp), "rate_bps": args.rate, "size": args.size,
                          "message": args.message, "gap": args.gap_ms / 1e3})
    return flows


def run_roce(state, flows, args):
    me = os.path.abspath(__file__)
    py = "/usr/bin/python3"
    dsts = sorted({f["dst"] for f in flows})
    srcs = sorted({f["src"] for f in flows})
    recv = {h: in_host(state, h, [py, me, "_recv", "--time", str(args.time + 30)],
                       stdout=subprocess.PIPE, text=True) for h in dsts}
    for h, p in recv.items():
        if p.stdout.readline().strip() != "ready":
            sys.exit(f"traffic: receiver on {h} did not start")
    send = {}
    for h in srcs:
        keys = ("dst_ip", "sport", "dqp", "rate_bps", "size", "message", "gap")
        mine = [{k: f[k] for k in keys} for f in flows if f["src"] == h]
        send[h] = in_host(state, h, [py, me, "_send", "--time", str(args.time), "--flows", json.dumps(mine)],
                          stdout=subprocess.PIPE, text=True)
    sent = {}
    for h, p in send.items():
        out, _ = p.communicate(timeout=args.time + 60)
        for f in json.loads(out)["flows"]:
            sent[(h, f["sport"], f["dqp"])] = f
    time.sleep(0.5)  # the last packets are still in the queues
    got = {}
    for h, p in recv.items():
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        for f in json.loads(out)["flows"]:
            got[(f["src_ip"], f["sport"], f["dqp"])] = f
    ip_of = {name: h["ip"] for name, h in state["hosts"].items()}
    results = []
    for f in flows:
        s = sent.get((f["src"], f["sport"], f["dqp"]), {})
        r = got.get((ip_of[f["src"]], f["sport"], f["dqp"]), {})
        rx_bytes = r.get("rx_bytes", 0)
        span = max(1e-9, r.get("last", 0) - r.get("first", 0))
        results.append({
            "src": f["src"], "dst": f["dst"], "src_ip": f["src_ip"], "dst_ip": f["dst_ip"],
            "sport": f["sport"], "dport": ROCE_PORT, "dqp": f["dqp"], "offered_bps": f["rate_bps"],
            "sent_pkts": s.get("sent_pkts", 0), "sent_bytes": s.get("sent_bytes", 0),
            "rx_pkts": r.get("rx_pkts", 0), "rx_bytes": rx_bytes,
            "throughput_bps": rx_bytes * 8 / args.time,
            "throughput_active_bps": rx_bytes * 8 / span if r.get("rx_pkts", 0) > 1 else 0.0,
            "lost_pkts": max(0, s.get("sent_pkts", 0) - r.get("rx_pkts", 0)),
            "lost_psn_gaps": r.get("lost_psn_gaps", 0), "reordered": r.get("reordered", 0),
            "loss_ratio": (max(0, s.get("sent_pkts", 0) - r.get("rx_pkts", 0)) / s["sent_pkts"]
                           if s.get("sent_pkts") else 0.0),
            "timeline_start": r.get("timeline_start"), "timeline_bin_s": BIN,
            "timeline_bps": [b * 8 / BIN for b in r.get("timeline", [])],
        })
    return results


def run_iperf3(state, flows, args):
    servers, clients = [], []
    try:
        for i, f in enumerate(flows):
            port = 5201 + i
            servers.append(in_host(state, f["dst"], ["iperf3", "-s", "-1", "-p", str(port), "-B", f["dst_ip"]],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        for i, f in enumerate(flows):
            cmd = ["iperf3", "-c", f["dst_ip"], "-p", str(5201 + i), "-t", str(int(args.time)), "-J",
                   "--cport", str(f["sport"])]
            if args.iperf_udp:
                cmd += ["-u", "-b", str(int(f["rate_bps"])), "-l", str(args.size)]
            clients.append(in_host(state, f["src"], cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True))
        results = []
        for f, p in zip(flows, clients):
            out, _ = p.communicate(timeout=args.time + 60)
            try:
                d = json.loads(out)
            except ValueError:
                d = {"error": out.strip()[-300:]}
            end = d.get("end", {})
            rx = end.get("sum_received") or end.get("sum") or {}
            r = {"src": f["src"], "dst": f["dst"], "src_ip": f["src_ip"], "dst_ip": f["dst_ip"],
                 "sport": f["sport"], "tool": "iperf3", "throughput_bps": rx.get("bits_per_second", 0.0),
                 "rx_bytes": rx.get("bytes", 0), "error": d.get("error")}
            if args.iperf_udp:
                r["loss_ratio"] = (end.get("sum") or {}).get("lost_percent", 0.0) / 100
            else:
                r["retransmits"] = (end.get("sum_sent") or {}).get("retransmits")
            results.append(r)
        return results
    finally:
        for p in servers + clients:
            if p.poll() is None:
                p.kill()
                p.wait()


def summarize(results):
    tp = [r["throughput_bps"] for r in results]
    total = sum(tp)
    jain = total ** 2 / (len(tp) * sum(t * t for t in tp)) if any(tp) else 0.0
    return {"flows": len(tp), "aggregate_bps": total, "min_flow_bps": min(tp), "max_flow_bps": max(tp),
            "jain_fairness": jain,
            "lost_pkts": sum(r.get("lost_pkts", 0) for r in results)}


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("_send", "_recv"):
        ap = argparse.ArgumentParser()
        ap.add_argument("role")
        ap.add_argument("--time", type=float, required=True)
        ap.add_argument("--flows")
        a = ap.parse_args()
        return agent_send(a) if a.role == "_send" else agent_recv(a)
    ap = argparse.ArgumentParser(prog="traffic.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("pattern", choices=["incast", "all-to-all", "permutation", "pairs"])
    ap.add_argument("--prefix", default="mr", help="the fabric's --prefix (default mr)")
    ap.add_argument("--hosts", help="all-to-all/permutation: comma-separated hosts (default all)")
    ap.add_argument("--src", help="incast: senders (default all others)")
    ap.add_argument("--dst", help="incast: the receiver")
    ap.add_argument("--flow", action="append", help="pairs: SRC:DST (repeatable)")
    ap.add_argument("--seed", type=int, default=1, help="permutation seed")
    ap.add_argument("--qps", type=int, default=1, help="queue pairs (flows) per host pair")
    ap.add_argument("--qp-base", type=lambda s: int(s, 0), default=0x100, help="first QP number")
    ap.add_argument("--rate", type=rate, default=rate("4Mbps"), help="per flow (default 4Mbps)")
    ap.add_argument("--size", type=int, default=1400, help="UDP payload bytes (default 1400)")
    ap.add_argument("--message", type=int, default=0,
                    help="roce: packets per message, each followed by --gap-ms idle (default 0: one "
                         "endless message, so a flow never leaves a flowlet gap and never moves)")
    ap.add_argument("--gap-ms", type=float, default=0.0,
                    help="roce: idle milliseconds after each message; longer than the fabric's flowlet "
                         "timeout, it lets the switches move the flow there (default 0)")
    ap.add_argument("--time", type=float, default=10, help="seconds (default 10)")
    ap.add_argument("--tool", choices=["roce", "iperf3"], default="roce")
    ap.add_argument("--iperf-udp", action="store_true", help="iperf3 in UDP mode at --rate")
    ap.add_argument("-o", "--output", help="write results here (default: stdout)")
    args = ap.parse_args()
    if not 16 <= args.size <= 1472:
        ap.error("--size must be 16..1472 (one frame)")
    if args.message < 0 or args.gap_ms < 0:
        ap.error("--message and --gap-ms must not be negative")
    if (args.message > 0) != (args.gap_ms > 0):
        ap.error("--message and --gap-ms go together: messages of N packets, each followed by G ms idle")
    if args.message > 0 and args.tool != "roce":
        ap.error("--message and --gap-ms shape the roce tool's flows; iperf3 paces its own")
    if args.message > 0 and args.gap_ms > 0:
        message_ms = args.message * args.size * 8 / args.rate * 1e3
        if args.gap_ms >= message_ms:
            ap.error(f"--gap-ms {args.gap_ms:g} leaves no time to send a message of {args.message} packets "
                     f"at --rate (it lasts {message_ms:.3g} ms): fewer, longer messages or a shorter gap")
    if os.geteuid() != 0:
        sys.exit("traffic: needs root (it enters the Mininet hosts' namespaces)")
    state = load_state(args.prefix)
    flows = make_flows(args, state["hosts"])
    each = "as fast as TCP goes" if args.tool == "iperf3" and not args.iperf_udp else f"{args.rate / 1e6:g} Mbit/s each"
    print(f"traffic: {args.pattern}, {len(flows)} flows, {args.tool}, {each}, {args.time:g} s", file=sys.stderr)
    results = run_roce(state, flows, args) if args.tool == "roce" else run_iperf3(state, flows, args)
    doc = {"pattern": args.pattern, "tool": args.tool, "time_s": args.time, "rate_bps": args.rate,
           "size": args.size, "scale": state.get("scale"), "flows": results, "summary": summarize(results)}
    text = json.dumps(doc, indent=1)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    s = doc["summary"]
    print(f"traffic: aggregate {s['aggregate_bps'] / 1e6:.2f} Mbit/s, per flow "
          f"{s['min_flow_bps'] / 1e6:.2f}..{s['max_flow_bps'] / 1e6:.2f} Mbit/s, "
          f"Jain {s['jain_fairness']:.2f}, lost {s['lost_pkts']} pkts", file=sys.stderr)


if __name__ == "__main__":
    main()
