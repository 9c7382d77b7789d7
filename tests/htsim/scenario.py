"""A cross-check scenario, read far enough to replay it on htsim, and its
per-seed copies for our simulator.

Only the standard library is used, so this reads the lines it needs by
pattern and refuses, naming the file and the setting, anything it cannot
replay on htsim's RoCE model: congestion control, chunks, iterations,
start times, rate caps, thresholds not in packets, more than one job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# RoCEv2 headers our simulator adds to each packet's payload.
OUR_HEADER_BYTES = 62
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1000, "MB": 1000**2, "GB": 1000**3}


class ScenarioError(Exception):
    """The scenario cannot be replayed on htsim as it is."""


@dataclass
class CrossScenario:
    path: Path
    text: str
    topology: Path
    size: int  # bytes per sender
    mtu: int
    xoff_pkts: int
    xon_pkts: int
    rto_us: float = 200.0  # network.rto, our simulator's default 200us


def _bytes(text: str, where: str) -> int:
    m = re.fullmatch(r"([0-9]+)\s*(B|KiB|MiB|GiB|KB|MB|GB)", text.strip())
    if not m:
        raise ScenarioError(f"{where}: {text!r} is not a size like 2MiB")
    return int(m.group(1)) * _UNITS[m.group(2)]


def _micros(text: str, where: str) -> float:
    m = re.fullmatch(r"([0-9.]+)\s*(ns|us|µs|ms)", text.strip())
    if not m:
        raise ScenarioError(f"{where}: {text!r} is not a duration like 200us")
    return float(m.group(1)) * {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3}[m.group(2)]


def _job_line(path: Path, text: str) -> str:
    jobs = [ln for ln in text.splitlines() if re.match(r"^\s*-\s*\{.*\bpattern:", ln)]
    if len(jobs) != 1:
        raise ScenarioError(f"{path}: the cross-check replays exactly one job (a flow-style line), found {len(jobs)}")
    job = jobs[0]
    if not re.search(r"\bpattern:\s*(permutation|incast)\b", job):
        raise ScenarioError(f"{path}: the job must be a permutation or an incast (its pairs are in report.json)")
    for key in ("chunk", "iterations", "start", "rate", "compute"):
        if re.search(rf"\b{key}:", job):
            raise ScenarioError(f"{path}: job setting `{key}` has no htsim counterpart here; remove it")
    return job


def load(path: Path) -> CrossScenario:
    text = path.read_text()
    topo = re.search(r"^topology:\s*(\S+)", text, re.M)
    if not topo:
        raise ScenarioError(f"{path}: no `topology:` line")
    if not re.search(r"\bdcqcn:\s*false\b", text):
        raise ScenarioError(f"{path}: htsim's RoCE model has no congestion control: set `network: {{dcqcn: false}}`")
    job = _job_line(path, text)
    size = re.search(r"\bsize:\s*([^,}]+)", job)
    if not size:
        raise ScenarioError(f"{path}: the job has no `size`")
    mtu = re.search(r"\bmtu:\s*([^,}\s]+)", text)
    xoff = re.search(r"\bxoff:\s*([^,}\s]+)", text)
    xon = re.search(r"\bxon:\s*([^,}\s]+)", text)
    rto = re.search(r"\brto:\s*([^,}\s]+)", text)

    def pkts(m: re.Match | None, default: int, what: str) -> int:
        if not m:
            return default
        got = re.fullmatch(r"([0-9]+)pkt", m.group(1))
        if not got:
            raise ScenarioError(f"{path}: network.pfc.{what} must be in packets (like 24pkt) to map onto htsim")
        return int(got.group(1))

    return CrossScenario(
        path=path,
        text=text,
        topology=(path.parent / topo.group(1)).resolve(),
        size=_bytes(size.group(1), f"{path}: job size"),
        mtu=_bytes(mtu.group(1), f"{path}: network.mtu") if mtu else 4096,
        xoff_pkts=pkts(xoff, 24, "xoff"),
        xon_pkts=pkts(xon, 12, "xon"),
        rto_us=_micros(rto.group(1), f"{path}: network.rto") if rto else 200.0,
    )


def seeded_copy(sc: CrossScenario, seed: int, dest: Path) -> Path:
    """The scenario with `seed: SEED` (so the seed draws the permutation
    and the hashes, whether or not `--seed` redraws placements) and its
    topology as an absolute path, written to `dest`."""
    text = re.sub(r"^topology:\s*\S+", f"topology: {sc.topology}", sc.text, count=1, flags=re.M)
    if re.search(r"^seed:", text, re.M):
        text = re.sub(r"^seed:.*$", f"seed: {seed}", text, count=1, flags=re.M)
    else:
        text = f"seed: {seed}\n" + text
    dest.write_text(text)
    return dest
