"""Our fat-tree topology YAML, read far enough to map its hosts onto htsim's.

htsim's FatTreeTopology (datacenter/fat_tree_topology.cpp, 3 tiers, k
ports per switch) numbers hosts 0..k^3/4-1: host i hangs off ToR i/(k/2),
ToR t sits in pod t/(k/2), and every ToR of a pod links to every
aggregation switch of that pod; the aggregation switch at position j of
each pod links to the same k/2 cores (j, j+k/2, ...). Any fabric with the
same structure is the same graph up to relabelling the switches, so a host
maps to pod * k^2/4 + leaf-in-pod * k/2 + host-on-leaf, once we have
checked that ours has that structure: k/2 hosts per leaf, k/2 leaves per
pod each linked to all of the pod's k/2 spines, and each spine linked to
k/2 cores shared with exactly one spine of every other pod.

Only the standard library is used, so this reads the flow-style lines that
`metaroce topo gen` writes (`- {name: h1-1, ..., leaf: p1-leaf1, port: 1}`,
`- {a: "x:3", b: "y:1"}`); a topology in another YAML style is refused with
a message naming the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_ITEM = re.compile(r"^\s*-\s*\{(.*)\}\s*(#.*)?$")
_SECTION = re.compile(r"^([a-z_]+):\s*(#.*)?$")
_DEFAULT_LINK = re.compile(r"^\s*link:\s*\{(.*)\}")
_DEFAULT_HOST = re.compile(r"^\s*host:\s*\{(.*)\}")


class TopologyError(Exception):
    """The topology is not one this cross-check can map onto htsim."""


@dataclass
class FatTree:
    k: int
    hosts: list[str]  # our host names, in htsim node order
    node_of: dict[str, int]  # our host name -> htsim node number
    bandwidth_bps: int
    delay_us: float


def _fields(body: str) -> dict[str, str]:
    """`name: h1-1, leaf: "p1-leaf1"` -> {'name': 'h1-1', 'leaf': 'p1-leaf1'}."""
    out = {}
    for part in body.split(","):
        if ":" not in part:
            continue
        key, value = part.split(":", 1)
        out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def _rate_bps(text: str, where: str) -> int:
    m = re.fullmatch(r"([0-9.]+)\s*(G|M|K)bps", text)
    if not m:
        raise TopologyError(f"{where}: bandwidth {text!r} is not like 100Gbps")
    return int(float(m.group(1)) * {"G": 1e9, "M": 1e6, "K": 1e3}[m.group(2)])


def _delay_us(text: str, where: str) -> float:
    m = re.fullmatch(r"([0-9.]+)\s*(us|ns|ms)", text)
    if not m:
        raise TopologyError(f"{where}: delay {text!r} is not like 1us")
    return float(m.group(1)) * {"us": 1.0, "ns": 1e-3, "ms": 1e3}[m.group(2)]


def _read(path: Path) -> tuple[dict[str, dict[str, str]], list[dict[str, str]], list[tuple[str, str]], dict[str, str]]:
    """Switches by name, hosts in file order, links as switch-name pairs, default link."""
    switches: dict[str, dict[str, str]] = {}
    hosts: list[dict[str, str]] = []
    links: list[tuple[str, str]] = []
    default_link: dict[str, str] = {}
    section = None
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if m := _SECTION.match(line):
            section = m.group(1)
            continue
        if section == "defaults" and (m := _DEFAULT_LINK.match(line)):
            default_link.update(_fields(m.group(1)))
            continue
        if section == "defaults" and (m := _DEFAULT_HOST.match(line)):
            default_link.update({f"host_{k}": v for k, v in _fields(m.group(1)).items()})
            continue
        m = _ITEM.match(line)
        if not m:
            if section in ("switches", "hosts", "links") and line.strip() and not line.strip().startswith("#"):
                raise TopologyError(f"{path}:{lineno}: expected one flow-style item per line, as `metaroce topo gen` writes")
            continue
        f = _fields(m.group(1))
        if section == "switches":
            switches[f["name"]] = f
        elif section == "hosts":
            if "nic_rate" in f:
                raise TopologyError(f"{path}:{lineno}: a per-host NIC rate: htsim's hosts all run at the link speed")
            hosts.append(f)
        elif section == "links":
            if "bandwidth" in f or "delay" in f:
                raise TopologyError(f"{path}:{lineno}: per-link bandwidth or delay: htsim's fat-tree has one of each")
            links.append((f["a"].split(":")[0], f["b"].split(":")[0]))
    return switches, hosts, links, default_link


def load(path: Path) -> FatTree:
    """Reads `path` and checks it is a 3-tier k-ary fat-tree (see the module doc)."""
    switches, hosts, links, default_link = _read(path)
    role = {name: s.get("role", "") for name, s in switches.items()}
    up: dict[str, list[str]] = {name: [] for name in switches}
    for a, b in links:
        lo, hi = sorted((a, b), key=lambda n: ["leaf", "spine", "super-spine"].index(role.get(n, "leaf")))
        up[lo].append(hi)
    leaves = [n for n in switches if role[n] == "leaf"]
    k = 2 * len(up[leaves[0]]) if leaves else 0
    if k < 2 or len(hosts) != k**3 // 4:
        raise TopologyError(f"{path}: {len(hosts)} hosts is not k^3/4 for k = {k} (twice a leaf's uplinks)")
    # Pods: leaves with the same spines.
    pods: dict[tuple[str, ...], list[str]] = {}
    for leaf in leaves:
        pods.setdefault(tuple(sorted(up[leaf])), []).append(leaf)
    if len(pods) != k or any(len(v) != k // 2 or len(s) != k // 2 for s, v in pods.items()):
        raise TopologyError(f"{path}: not {k} pods of {k // 2} leaves each linked to the pod's {k // 2} spines")
    # Cores: spine positions share their cores across pods, one spine per pod.
    core_sets: dict[tuple[str, ...], list[str]] = {}
    for spines in pods:
        for spine in spines:
            core_sets.setdefault(tuple(sorted(up[spine])), []).append(spine)
    cores = [c for s in core_sets for c in s]
    if (len(core_sets) != k // 2 or len(set(cores)) != k * k // 4
            or any(len(v) != k or len(s) != k // 2 for s, v in core_sets.items())):
        raise TopologyError(f"{path}: spines are not wired to cores as a k={k} fat-tree's are")
    leaf_pos: dict[str, tuple[int, int]] = {}
    for p, pod_leaves in enumerate(pods.values()):
        for i, leaf in enumerate(pod_leaves):
            leaf_pos[leaf] = (p, i)
    on_leaf: dict[str, list[str]] = {}
    for h in hosts:
        on_leaf.setdefault(h["leaf"], []).append(h["name"])
    if sorted(on_leaf) != sorted(leaves) or any(len(v) != k // 2 for v in on_leaf.values()):
        raise TopologyError(f"{path}: not {k // 2} hosts on every leaf")
    node_of = {}
    for leaf, names in on_leaf.items():
        pod, i = leaf_pos[leaf]
        for j, name in enumerate(names):
            node_of[name] = pod * k * k // 4 + i * k // 2 + j
    where = f"{path}: defaults.link"
    bandwidth = _rate_bps(default_link.get("bandwidth", ""), where)
    nic = default_link.get("host_nic_rate")
    if nic and _rate_bps(nic, f"{path}: defaults.host") != bandwidth:
        raise TopologyError(f"{path}: defaults.host.nic_rate {nic} is not the link bandwidth: htsim has one speed")
    return FatTree(
        k=k,
        hosts=sorted(node_of, key=node_of.get),
        node_of=node_of,
        bandwidth_bps=bandwidth,
        delay_us=_delay_us(default_link.get("delay", ""), where),
    )
