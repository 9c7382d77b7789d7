#!/usr/bin/env bash
# The idle controller's cost in instructions, not CPU seconds: CPU time on a
# shared virtual machine moves by a third from one run to the next, an
# instruction count by under 1%. `sim serve` serves a generated k-ary
# fat-tree; the controller runs under callgrind at default settings; once it
# has programmed every switch and settled, its counters are zeroed, and after
# SECS seconds of idle they are dumped. Prints instructions per switch-second.
#
#   tests/idle-instructions.sh [BIN] [K] [SECS]
#     BIN   the metaroce binary (default target/release/metaroce)
#     K     fat-tree k, even, >= 4 (default 8: 80 switches)
#     SECS  idle window in seconds (default 20)
#   EXTRA="--ecn-ms 2000" passes controller flags.
#
# Compare two builds by running both, one after the other. Needs valgrind
# (Debian package valgrind); without it, prints one skip line and exits 0.
set -euo pipefail

bin=${1:-target/release/metaroce}
k=${2:-8}
secs=${3:-20}
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
    echo "skip: idle instruction count (valgrind with callgrind_control not installed)"
    exit 0
fi
if [ ! -x "$bin" ]; then
    echo "error: $bin is not an executable metaroce binary (build it: cargo build --release -p metaroce-cli)" >&2
    exit 2
fi
case "$k" in '' | *[!0-9]*) echo "error: K must be an even number >= 4, not '$k'" >&2; exit 2 ;; esac
if [ "$k" -lt 4 ] || [ $((k % 2)) -ne 0 ]; then
    echo "error: K must be an even number >= 4, not $k" >&2
    exit 2
fi
case "$secs" in '' | *[!0-9]*) echo "error: SECS must be a whole number of seconds, not '$secs'" >&2; exit 2 ;; esac

dir=$(mktemp -d /tmp/metaroce-idle-instr.XXXX)
serve_pid=""
ctl_pid=""
cleanup() {
    [ -n "$ctl_pid" ] && kill "$ctl_pid" 2>/dev/null || true
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

switches=$((5 * k * k / 4))
# The serve harness listens on one port per switch: a block below Linux's
# ephemeral range, another one if something already listens in it.
for attempt in 1 2 3 4 5; do
    base=$((20000 + (RANDOM % 40) * 200))
    "$bin" topo gen fat-tree --k "$k" --thrift-base-port 0 --p4rt-base-port "$base" \
        -o "$dir/fabric.yaml" >/dev/null 2>"$dir/topo.log" || { cat "$dir/topo.log" >&2; exit 1; }
    cat >"$dir/quiet.yaml" <<EOF
name: idle-instructions
topology: fabric.yaml
seed: 1
modes: [flowlet]
network: {mtu: 4096B, dcqcn: false}
jobs:
  - {name: later, pattern: permutation, hosts: [h1-1, h2-1], shift: 1, size: 4MiB, start: 100000ms}
EOF
    echo "idle instructions: $switches switches (k=$k) on ports $base..., $bin; starting sim serve" >&2
    "$bin" sim serve "$dir/fabric.yaml" "$dir/quiet.yaml" --quiet --dilation 1000 --wait 900 \
        --out "$dir/serve" >"$dir/serve.log" 2>&1 &
    serve_pid=$!
    up=""
    for _ in $(seq 1 600); do
        [ "$(grep -c '(device ' "$dir/serve.log" || true)" -ge "$switches" ] && { up=1; break; }
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.5
    done
    [ -n "$up" ] && break
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=""
    if ! grep -q "cannot listen" "$dir/serve.log" || [ "$attempt" -eq 5 ]; then
        echo "error: sim serve did not come up: $(tail -3 "$dir/serve.log")" >&2
        exit 1
    fi
done
echo "scheduler idle-instructions-token" >"$dir/tokens"
chmod 600 "$dir/tokens"
echo "idle instructions: starting the controller under callgrind (programming is slow there)" >&2
# shellcheck disable=SC2086
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out.%p" "$bin" controller run "$dir/fabric.yaml" \
    --mode act --listen 127.0.0.1:0 --tokens "$dir/tokens" ${EXTRA:-} >"$dir/controller.log" 2>&1 &
ctl_pid=$!
for _ in $(seq 1 1200); do
    grep -q "the control loop runs" "$dir/controller.log" && break
    kill -0 "$ctl_pid" 2>/dev/null || { echo "error: the controller ended: $(tail -3 "$dir/controller.log")" >&2; exit 1; }
    sleep 0.5
done
grep -q "the control loop runs" "$dir/controller.log" || { echo "error: the controller did not program the fabric in 10 minutes" >&2; exit 1; }
sleep 8
callgrind_control -z "$ctl_pid" >/dev/null 2>&1
t0=$(date +%s.%N)
echo "idle instructions: counting for $secs s" >&2
sleep "$secs"
callgrind_control -d "$ctl_pid" >/dev/null 2>&1
t1=$(date +%s.%N)
sleep 1
ir=$(grep -h '^summary:\|^totals:' "$dir"/cg.out.*.1 2>/dev/null | awk '{s += $2} END {print s + 0}')
if [ "$ir" -eq 0 ]; then
    echo "error: callgrind dumped no counts (see $dir/controller.log)" >&2
    exit 1
fi
awk -v ir="$ir" -v t0="$t0" -v t1="$t1" -v n="$switches" -v k="$k" 'BEGIN {
    printf "idle instructions: k=%d, %d switches, %.1f s: %d instructions, %.0f per switch-second\n", k, n, t1 - t0, ir, ir / ((t1 - t0) * n)
}'
