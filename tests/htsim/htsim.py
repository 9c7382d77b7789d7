"""htsim's RoCE model (Broadcom/csg-htsim, datacenter/htsim_roce): where it
is installed, its traffic matrix, its arguments matched to ours, and the
completion times it prints.

The patches this expects (kept outside the repository, see
ctrl/sim/README.md "Cross-check against htsim"): no time-based reseed in
the RoCE sender (so `-seed` makes a run reproducible), `-ooo_receiver`
(receivers that accept packets out of order and never NAK) and a line per
flow when its receiver holds every byte (`Sink Roce_S_D received all at T
us`). Without the last one the sender's `finished at` (an ACK's trip
later) is used, and the result says so.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DIR = "/opt/htsim"
# Bytes htsim adds to a data packet's payload (RocePacket::ACKSIZE).
HEADER_BYTES = 64

_SINK_DONE = re.compile(r"^Sink Roce_(\d+)_(\d+) received all at ([0-9.e+-]+) us")
_SRC_DONE = re.compile(r"^Flow Roce_(\d+)_(\d+) \d+ finished at ([0-9.e+-]+) total bytes")
_SUMMARY = re.compile(r"^New: (\d+) Rtx: (\d+)")


def find_binary(htsim_dir: str | None) -> tuple[Path | None, str]:
    """The htsim_roce binary under HTSIM_DIR (or /opt/htsim), or None and why."""
    root = Path(htsim_dir or os.environ.get("HTSIM_DIR") or DEFAULT_DIR)
    for candidate in (root / "bin" / "htsim_roce", root / "sim" / "datacenter" / "htsim_roce"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate, ""
    return None, f"{root}/bin/htsim_roce or {root}/sim/datacenter/htsim_roce not installed; see ctrl/sim/README.md"


def pfc_thresholds(xoff_pkts: int, xon_pkts: int, mtu: int) -> tuple[int, int]:
    """htsim's `-pfc_thresholds LOW HIGH` that pause and resume at the same
    packet counts as our xoff/xon.

    Ours: PAUSE when the bytes held from an ingress reach xoff packets,
    RESUME at or below xon packets. htsim: PAUSE when they exceed
    HIGH * mtu, RESUME below LOW * mtu, counting its packets of mtu + 64
    bytes. HIGH is the largest value that still pauses at xoff packets
    (and not before), LOW the largest that resumes at xon packets (and not
    at xon + 1).
    """
    wire = mtu + HEADER_BYTES
    return ((xon_pkts + 1) * wire) // mtu, (xoff_pkts * wire - 1) // mtu


def write_matrix(path: Path, nodes: int, pairs: list[tuple[int, int]], size: int) -> None:
    """htsim's connection matrix: every flow starts at 0 with `size` bytes."""
    lines = [f"Nodes {nodes}", f"Connections {len(pairs)}"]
    lines += [f"{s}->{d} id {i} start 0 size {size}" for i, (s, d) in enumerate(pairs, 1)]
    path.write_text("\n".join(lines) + "\n")


@dataclass
class Args:
    nodes: int
    matrix: Path
    mtu: int
    linkspeed_bps: int
    hop_latency_us: float
    pfc: tuple[int, int]
    seed: int
    mode: str  # ecmp | spray (htsim's ecmp_rr) | ecmp-mix, fair-spray (our rules, patch 03)
    out_of_order: bool
    end_us: int
    nak_once: bool = False  # one NAK per expected PSN (patch 03)
    rto_us: float = 0.0  # the requester's transport timer (patch 03); 0: none, htsim's own
    # A sender that adds a data packet only to an idle host queue (patch
    # 04), as our NIC sends only when its host link is free; htsim's paces
    # data at line rate whatever the queue holds.
    no_backlog: bool = False

    def argv(self, binary: Path) -> list[str]:
        strat = {
            "ecmp": ["-strat", "ecmp_host", "-paths", "1"],
            "ecmp-mix": ["-strat", "ecmp_mix", "-paths", "1"],
            "fair-spray": ["-strat", "fair_spray"],
        }.get(self.mode, ["-strat", "ecmp_rr"])
        argv = [
            str(binary), "-nodes", str(self.nodes), "-tiers", "3", "-tm", str(self.matrix),
            "-mtu", str(self.mtu), "-linkspeed", str(self.linkspeed_bps // 1_000_000),
            "-hop_latency", f"{self.hop_latency_us:g}", "-q", "10000",
            "-pfc_thresholds", str(self.pfc[0]), str(self.pfc[1]),
            "-seed", str(self.seed), "-end", str(self.end_us), "-o", os.devnull, *strat,
        ]
        if self.out_of_order:
            argv.append("-ooo_receiver")
        if self.nak_once:
            argv.append("-nak_once")
        if self.rto_us:
            argv += ["-rto_us", f"{self.rto_us:g}"]
        if self.no_backlog:
            argv.append("-nic_no_backlog")
        return argv


@dataclass
class Result:
    completion_us: float | None = None
    finished: int = 0
    measured_at: str = "receiver"  # or "sender" (an ACK's trip later)
    rtx_bytes: int = 0
    error: str = ""
    argv: list[str] = field(default_factory=list)


def run(binary: Path, args: Args, flows: int, log: Path) -> Result:
    """Runs htsim; its completion is the last flow's, from time 0."""
    argv = args.argv(binary)
    res = Result(argv=argv)
    # htsim writes idmap.txt into its working directory: the run's own.
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, cwd=log.parent)
    log.write_text(proc.stdout)
    if args.out_of_order and "out-of-order receivers" not in proc.stdout:
        res.error = "this htsim has no -ooo_receiver (apply the patch in ctrl/sim/README.md)"
        return res
    if (args.nak_once and "NAK once per expected" not in proc.stdout) or (args.rto_us and "transport timer" not in proc.stdout):
        res.error = "this htsim has no -nak_once or -rto_us (apply patch 03, ctrl/sim/README.md)"
        return res
    if args.no_backlog and "only into an idle host queue" not in proc.stdout:
        res.error = "this htsim has no -nic_no_backlog (apply patch 04, ctrl/sim/README.md)"
        return res
    banner = {"ecmp-mix": ("routing: ecmp, mixed hash", "ecmp_mix"), "fair-spray": ("routing: fair spray", "fair_spray")}
    if args.mode in banner and banner[args.mode][0] not in proc.stdout:
        res.error = f"this htsim has no -strat {banner[args.mode][1]} (apply patch 03, ctrl/sim/README.md)"
        return res
    sink, src = {}, {}
    for line in proc.stdout.splitlines():
        if m := _SINK_DONE.match(line):
            sink[(m.group(1), m.group(2))] = float(m.group(3))
        elif m := _SRC_DONE.match(line):
            src[(m.group(1), m.group(2))] = float(m.group(3))
        elif m := _SUMMARY.match(line):
            res.rtx_bytes = int(m.group(2))
    done = sink if sink else src
    res.measured_at = "receiver" if sink else "sender"
    res.finished = len(done)
    if proc.returncode != 0:
        tail = proc.stdout.strip().splitlines()[-1:] or ["no output"]
        res.error = f"htsim exited with {proc.returncode} ({tail[0][:120]}); log {log}"
    elif res.finished < flows:
        res.error = f"htsim finished {res.finished} of {flows} flows by -end {args.end_us} us; log {log}"
    else:
        res.completion_us = max(done.values())
    return res


def end_time_us(ideal_us: float) -> int:
    """A generous end for htsim's run: 50x the ideal bound, at least 10 ms."""
    return max(10_000, math.ceil(ideal_us * 50))
