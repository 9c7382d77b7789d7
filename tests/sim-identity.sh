#!/bin/sh
# Checks that two builds of `metaroce` simulate alike: runs shipped
# scenarios (every mode each names, plus a second seed) and a sample of the
# Clos family with both binaries and compares the JSON reports. A change to
# the engine that is meant to be only faster must leave them identical.
#
#   tests/sim-identity.sh OLD_METAROCE NEW_METAROCE [WORKDIR]
#
# Exit 0: identical; 1: a report differs (the differing files are named,
# with the first lines of their diff); 2: usage or a run failed.
set -u

if [ $# -lt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    echo "usage: $0 OLD_METAROCE NEW_METAROCE [WORKDIR]" >&2
    echo "  runs shipped scenarios and a Clos family sample with both binaries and compares their JSON reports" >&2
    exit 2
fi
old=$1
new=$2
work=${3:-target/sim-identity}
root=$(cd "$(dirname "$0")/.." && pwd)
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "sim-identity: $b is not an executable" >&2; exit 2; }
done

# Small enough to run in seconds, and between them: ECMP, flowlets, spray
# and metaroce; go-back-N and out-of-order NICs; PFC trees, link failures,
# lossy classes, the controller in the loop, Poisson arrivals and jitter.
scenarios="fat-tree-permutation ecmp-collisions incast-bystander incast-tree link-failure
two-jobs clos3-all-to-all staggered-jitter conweave-load50 crosscheck-perm-k4"

run_all() { # BINARY DIR
    mkdir -p "$2"
    for s in $scenarios; do
        for seed in 1 2; do
            "$1" sim run "$root/scenarios/$s.yaml" --seed "$seed" --quiet --json \
                -o "$2/$s-$seed" > "$2/$s-$seed.json" 2> "$2/$s-$seed.err" || {
                echo "sim-identity: $1 failed on $s seed $seed (see $2/$s-$seed.err)" >&2
                return 2
            }
        done
    done
    "$1" sim suite "$root/scenarios/families/clos.yaml" --cases 3 --seeds 1-2 --quiet --jobs 1 \
        -o "$2/suite" > "$2/suite.out" 2> "$2/suite.err" || {
        echo "sim-identity: $1 failed on the Clos suite (see $2/suite.err)" >&2
        return 2
    }
}

rm -rf "$work/old" "$work/new"
run_all "$old" "$work/old" || exit 2
run_all "$new" "$work/new" || exit 2

# The engine's own event count is left out: fewer events for the same
# packets is what a faster engine may do. Every other figure must match.
python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k != "events"}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
def events(x, acc):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "events" and isinstance(v, int):
                acc.append(v)
            else:
                events(v, acc)
    elif isinstance(x, list):
        for v in x:
            events(v, acc)
    return acc
files = sorted(
    os.path.relpath(os.path.join(d, f), os.path.join(work, "old"))
    for d, _, fs in os.walk(os.path.join(work, "old")) for f in fs if f.endswith(".json"))
bad, ev_old, ev_new = 0, 0, 0
for f in files:
    try:
        with open(os.path.join(work, "old", f)) as a, open(os.path.join(work, "new", f)) as b:
            x, y = json.load(a), json.load(b)
    except (OSError, ValueError) as e:
        print(f"sim-identity: {f}: {e}")
        bad += 1
        continue
    ev_old += sum(events(x, []))
    ev_new += sum(events(y, []))
    if strip(x) != strip(y):
        print(f"sim-identity: {f} differs (beyond the event count)")
        bad += 1
print(f"sim-identity: {len(files) - bad} of {len(files)} JSON reports identical but for the event count; "
      f"events {ev_old} before, {ev_new} after")
sys.exit(1 if bad else 0)
PY
