#!/usr/bin/env python3
"""Cross-check `metaroce sim` against htsim (Broadcom/csg-htsim's RoCE model).

For each scenario and seed, runs our simulator (`metaroce sim run`), reads
the host pairs its report.json says the job used, maps them onto htsim's
fat-tree numbering, writes htsim's traffic matrix for the same pairs, runs
htsim with the matching link speed, latency, MTU and PFC thresholds, and
prints both completion times over our ideal bound, per seed and as
medians. Cases: ECMP (one hashed path per flow), spray with out-of-order
receivers, spray with go-back-N receivers. See ctrl/sim/README.md
("Cross-check against htsim") for the setup, the patch htsim needs, and
the measured table with its explanations.

Without htsim (HTSIM_DIR, default /opt/htsim) it prints one skip line and
exits 0. Exit codes: 0 ran (whatever the figures; an htsim run that
aborts is shown in the table, not fatal, except with --quick), 1 a run of
ours failed or its report could not be read, or htsim failed the --quick
case, 2 bad arguments or a scenario it cannot replay.

    tests/htsim/crosscheck.py                      # the shipped cases
    tests/htsim/crosscheck.py --quick              # one small case (make test)
    tests/htsim/crosscheck.py scenarios/crosscheck-perm-k8.yaml:1-3 --cases spray-ooo
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fattree  # noqa: E402
import htsim  # noqa: E402
import scenario  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# k=4 ECMP is bimodal (two or three flows on the busiest link, about 2x or
# 3x), so its median needs many seeds to settle: 100 runs take seconds.
DEFAULT_SCENARIOS = ["scenarios/crosscheck-perm-k4.yaml:1-100", "scenarios/crosscheck-perm-k8.yaml:1-10"]
QUICK = ["scenarios/crosscheck-perm-k4.yaml:1"]
# case -> (our mode, our NIC ordering, htsim routing, htsim out-of-order
# receiver, htsim NAKs once per expected PSN, target)
CASES = {
    "ecmp": ("ecmp", "go-back-n", "ecmp", False, False, 0.15),
    "spray-ooo": ("spray", "out-of-order", "spray", True, False, 0.10),
    "spray-gbn": ("spray", "go-back-n", "spray", False, False, 0.10),
    # htsim with our rules (its patch 03): `-strat ecmp_mix`, a hash as
    # uniform as ours; `-strat fair_spray`, our spray rule; `-nak_once`,
    # one NAK per expected PSN as an RC responder (and ours) sends, with
    # `-rto_us`, our transport timer (a responder that NAKs once needs the
    # requester's timer when that NAK's resend is overtaken too); and (its
    # patch 04) `-nic_no_backlog`, a sender that queues data only behind an
    # idle host link, as our NIC does. The same decisions in both, so what
    # is left is the engines.
    "ecmp-same": ("ecmp", "go-back-n", "ecmp-mix", False, True, 0.15),
    "spray-ooo-same": ("spray", "out-of-order", "fair-spray", True, True, 0.10),
    "spray-gbn-same": ("spray", "go-back-n", "fair-spray", False, True, 0.10),
}


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"seeds {text!r}: use a range 1-6, a list 1,5,9, or both")
        seeds += range(int(lo), int(hi or lo) + 1)
    return seeds


def cli() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Exit codes: 0 ran, 1 a run of ours failed (or htsim's, with --quick), 2 bad arguments or scenario.")
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO[:SEEDS]",
                   help=f"scenario YAML with its seeds (range 1-6, list 1,5,9); default {' '.join(DEFAULT_SCENARIOS)}")
    p.add_argument("--cases", default=",".join(CASES),
                   help="comma-separated: ecmp, spray-ooo (out-of-order receivers), spray-gbn (go-back-N receivers); "
                        "ecmp-same, spray-ooo-same, spray-gbn-same: htsim hashes and sprays by our rules (its patch 03)")
    p.add_argument("--quick", action="store_true", help=f"one small case ({QUICK[0]}, ecmp and spray-ooo) as in make test")
    p.add_argument("--metaroce", default=None,
                   help="our binary (default target/release/metaroce; target/debug/metaroce with --build debug)")
    p.add_argument("--build", choices=["none", "debug", "release"], default="none",
                   help="cargo-build our binary first (only when htsim is installed)")
    p.add_argument("--htsim-dir", default=None, help="where htsim is installed (default $HTSIM_DIR, else /opt/htsim)")
    p.add_argument("-o", "--out", default=str(REPO / "target/crosscheck"), help="directory for runs, results.md and results.json")
    args = p.parse_args()
    if args.quick:
        args.scenarios, args.cases = args.scenarios or QUICK, "ecmp,spray-ooo"
    args.scenarios = args.scenarios or DEFAULT_SCENARIOS
    args.cases = [c for c in args.cases.split(",") if c]
    bad = [c for c in args.cases if c not in CASES]
    if bad:
        p.error(f"unknown case {bad[0]!r}; use {', '.join(CASES)}")
    return args


def build(kind: str) -> bool:
    """cargo-builds our binary; False if cargo failed (it said why)."""
    if kind == "none":
        return True
    cmd = [os.environ.get("CARGO", "cargo"), "build", "-q", "-p", "metaroce-cli"] + (["--release"] if kind == "release" else [])
    return subprocess.run(cmd, cwd=REPO, check=False).returncode == 0


def run_ours(metaroce: Path, copy: Path, mode: str, ordering: str, out: Path) -> dict:
    """Our report.json's entry for `mode`."""
    cmd = [str(metaroce), "sim", "run", str(copy), "--modes", mode, "--ordering", ordering, "-o", str(out), "-q"]
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}: {proc.stderr.strip()[-400:]}")
    report = json.loads((out / "report.json").read_text())
    (entry,) = [m for m in report["modes"] if m["mode"] == mode]
    return entry


def one_case(ctx: dict, case: str, seed: int, copy: Path, run_dir: Path) -> dict:
    """Both simulators on one (scenario, seed, case)."""
    mode, ordering, hmode, ooo, nak_once, _ = CASES[case]
    ours = run_ours(ctx["metaroce"], copy, mode, ordering, run_dir / f"ours-{case}")
    job = ours["jobs"][0]
    if not job.get("pairs"):
        raise RuntimeError(f"{copy}: report.json has no `pairs` for job {job['name']} (a metaroce older than this script?)")
    tree: fattree.FatTree = ctx["tree"]
    try:
        pairs = [(tree.node_of[s], tree.node_of[d]) for s, d in job["pairs"]]
    except KeyError as e:
        raise RuntimeError(f"{copy}: host {e} of report.json is not in {ctx['sc'].topology}") from e
    matrix = run_dir / f"htsim-{case}.tm"
    htsim.write_matrix(matrix, len(tree.hosts), pairs, ctx["sc"].size)
    ideal = job["ideal_us"]
    hargs = htsim.Args(
        nodes=len(tree.hosts), matrix=matrix, mtu=ctx["sc"].mtu, linkspeed_bps=tree.bandwidth_bps,
        hop_latency_us=tree.delay_us, pfc=ctx["pfc"], seed=seed, mode=hmode, out_of_order=ooo, nak_once=nak_once,
        rto_us=ctx["sc"].rto_us if nak_once else 0.0, no_backlog=nak_once,
        end_us=htsim.end_time_us(ideal),
    )
    h = htsim.run(ctx["binary"], hargs, len(pairs), run_dir / f"htsim-{case}.log")
    return {
        "scenario": ctx["sc"].path.name, "k": tree.k, "case": case, "seed": seed, "pairs": job["pairs"],
        "ideal_us": ideal, "ours_us": job["completion_us"], "ours": job["slowdown"],
        "htsim_us": h.completion_us, "htsim": h.completion_us / ideal if h.completion_us else None,
        "htsim_measured_at": h.measured_at, "htsim_error": h.error, "htsim_rtx_bytes": h.rtx_bytes,
        "ours_pfc_pauses": ours["pfc"]["pauses"], "ours_out_of_order": ours["out_of_order"]["packets"],
        "ours_retransmitted_bytes": ours["out_of_order"]["retransmitted_bytes"],
        "htsim_argv": " ".join(h.argv[1:]),
    }


def fmt(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for key in dict.fromkeys((r["scenario"], r["case"]) for r in rows):
        rs = [r for r in rows if (r["scenario"], r["case"]) == key]
        ours = [r["ours"] for r in rs if r["ours"]]
        theirs = [r["htsim"] for r in rs if r["htsim"]]
        mo = statistics.median(ours) if ours else None
        mh = statistics.median(theirs) if theirs else None
        diff = (mh - mo) / mo if mo and mh else None
        target = CASES[key[1]][-1]
        out.append({
            "scenario": key[0], "k": rs[0]["k"], "case": key[1], "seeds": len(rs), "htsim_runs": len(theirs),
            "ours_median": mo, "htsim_median": mh, "difference": diff, "target": target,
            "within": diff is not None and abs(diff) <= target,
        })
    return out


def markdown(rows: list[dict], summary: list[dict], header: str) -> str:
    lines = [header, "", "| scenario | case | seed | ours | htsim | ours µs | htsim µs | note |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        note = r["htsim_error"] or ("" if r["htsim_measured_at"] == "receiver" else "htsim at the sender")
        lines.append(f"| {r['scenario']} | {r['case']} | {r['seed']} | {fmt(r['ours'])} | {fmt(r['htsim'])} | "
                     f"{r['ours_us'] or 0:.1f} | {r['htsim_us'] or 0:.1f} | {note} |")
    lines += ["", "| scenario | k | case | seeds | ours median | htsim median | htsim vs ours | target |",
              "|---|---:|---|---:|---:|---:|---:|---|"]
    for s in summary:
        d = f"{s['difference'] * 100:+.1f}%" if s["difference"] is not None else "-"
        runs = "" if s["htsim_runs"] == s["seeds"] else f" (htsim ran {s['htsim_runs']})"
        verdict = ("within" if s["within"] else "OUTSIDE") if s["seeds"] >= 3 else "not judged on < 3 seeds"
        lines.append(f"| {s['scenario']} | {s['k']} | {s['case']} | {s['seeds']}{runs} | {fmt(s['ours_median'])} | "
                     f"{fmt(s['htsim_median'])} | {d} | ±{s['target'] * 100:.0f}% {verdict} |")
    return "\n".join(lines) + "\n"


def revision() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()
    return (git("rev-parse", "--short", "HEAD") or "unknown") + (" (uncommitted changes)" if git("status", "--porcelain", "--", "ctrl") else "")


def main() -> int:
    args = cli()
    binary, why = htsim.find_binary(args.htsim_dir)
    if binary is None:
        print(f"skip: htsim cross-check ({why})")
        return 0
    default = "target/debug/metaroce" if args.build == "debug" else "target/release/metaroce"
    metaroce = Path(args.metaroce or REPO / default).resolve()
    if not build(args.build):
        print(f"error: cargo build ({args.build}) failed", file=sys.stderr)
        return 1
    if not metaroce.is_file():
        print(f"error: {metaroce} not found: run `make release` (or pass --metaroce, --build)", file=sys.stderr)
        return 1
    out = Path(args.out).resolve()  # htsim runs in each run's directory
    rows: list[dict] = []
    for spec in args.scenarios:
        path_text, _, seeds_text = spec.partition(":")
        try:
            seeds = parse_seeds(seeds_text or "1")
            sc = scenario.load(Path(path_text))
            tree = fattree.load(sc.topology)
        except (ValueError, OSError, scenario.ScenarioError, fattree.TopologyError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        ctx = {"metaroce": metaroce, "binary": binary, "sc": sc, "tree": tree,
               "pfc": htsim.pfc_thresholds(sc.xoff_pkts, sc.xon_pkts, sc.mtu)}
        for seed in seeds:
            run_dir = out / sc.path.stem / f"seed-{seed}"
            run_dir.mkdir(parents=True, exist_ok=True)
            copy = scenario.seeded_copy(sc, seed, run_dir / "scenario.yaml")
            for case in args.cases:
                try:
                    row = one_case(ctx, case, seed, copy, run_dir)
                except (RuntimeError, OSError, KeyError, ValueError) as e:
                    print(f"error: {sc.path.name} seed {seed} {case}: {e}", file=sys.stderr)
                    return 1
                rows.append(row)
                print(f"{sc.path.name} seed {seed} {case}: ours {fmt(row['ours'])} htsim {fmt(row['htsim'])}"
                      + (f" ({row['htsim_error']})" if row["htsim_error"] else ""), file=sys.stderr)
    summary = summarize(rows)
    header = f"metaroce sim ({revision()}) vs htsim ({binary}): completion over our ideal bound, same host pairs."
    md = markdown(rows, summary, header)
    for name in dict.fromkeys(r["scenario"] for r in rows):
        first = next(r for r in rows if r["scenario"] == name)
        md += f"\n{name}, htsim's arguments (ecmp, seed {first['seed']}): {first['htsim_argv']}\n"

    (out / "results.md").write_text(md)
    (out / "results.json").write_text(json.dumps({"runs": rows, "summary": summary}, indent=1) + "\n")
    print(md, end="")
    print(f"(runs, traffic matrices and logs in {out}/)")
    if args.quick and any(r["htsim_error"] for r in rows):
        print("error: htsim did not run the small case (above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
