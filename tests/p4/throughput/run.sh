#!/usr/bin/env bash
# BMv2 throughput of metaroce's program against a plain L3 program built the
# same way: iperf3 (TCP) between two network namespaces through one
# simple_switch_grpc, started and run identically for both (logging off),
# the two programs interleaved ROUNDS times (ABBA order, so that a change in
# the machine's load hits both alike). The first second of every run (slow
# start) is left out. Then the instruction profile (profile.sh), a figure
# that does not depend on load; PROFILE_PACKETS=0 skips it.
#
#   tests/p4/throughput/run.sh [SECONDS] [ROUNDS]
#   METAROCE_JSON=old.json tests/p4/throughput/run.sh   (another build of ours)
#
# Needs root, p4c, simple_switch_grpc, simple_switch_CLI, iperf3, ethtool.
# Prints each run with the load average, and the ratio of the medians
# (target: >= 0.8). Timings are printed, never asserted: the machine may be
# shared, so compare the load averages too.
set -u
cd "$(dirname "$0")"
secs=${1:-10}
rounds=${2:-4}
for tool in p4c simple_switch_grpc simple_switch_CLI iperf3 ethtool ip; do
  command -v "$tool" >/dev/null || { echo "skip: BMv2 throughput ($tool not installed)"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "skip: BMv2 throughput (needs root for network namespaces)"; exit 0; }
ours=${METAROCE_JSON:-../../../p4src/build/main.json}
case $ours in /*) ;; *) ours=$PWD/$ours ;; esac
[ -f "$ours" ] || { echo "no $ours: run 'make p4' first" >&2; exit 1; }
work=$(mktemp -d)
sw=
cleanup() {
  [ -n "$sw" ] && kill "$sw" 2>/dev/null && wait "$sw" 2>/dev/null
  ip netns del mrtp1 2>/dev/null; ip netns del mrtp2 2>/dev/null
  ip link del mrsw1 2>/dev/null; ip link del mrsw2 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
p4c --target bmv2 --arch v1model -o "$work" l3_baseline.p4 2>/dev/null || { echo "p4c failed on l3_baseline.p4" >&2; exit 1; }

# One run: start the switch on JSON, load CMDS, measure, tear down. Prints
# Mbit/s and the switch's CPU seconds (user + system, all its threads) per
# GB received while iperf3 ran: a figure that depends far less on the
# machine's load than the throughput does.
measure() {
  local json=$1 cmds=$2
  cleanup_run
  for i in 1 2; do
    ip netns add mrtp$i
    ip link add mrh$i type veth peer name mrsw$i
    ip link set mrh$i netns mrtp$i
    ip -n mrtp$i link set mrh$i address 02:00:00:00:0$i:01
    ip -n mrtp$i addr add 10.0.$i.1/24 dev mrh$i
    ip -n mrtp$i link set mrh$i up
    ip -n mrtp$i link set lo up
    ip link set mrsw$i up
    ip -n mrtp$i neigh add 10.0.$i.254 lladdr 02:00:00:00:0$i:fe dev mrh$i
    ip -n mrtp$i route add 10.0.0.0/16 via 10.0.$i.254 dev mrh$i
    # BMv2 does not complete offloaded checksums.
    ip netns exec mrtp$i ethtool -K mrh$i tx off rx off >/dev/null 2>&1
    ethtool -K mrsw$i tx off rx off >/dev/null 2>&1
  done
  simple_switch_grpc --device-id 7 -i 1@mrsw1 -i 2@mrsw2 --thrift-port 9390 --log-level off "$json" \
    -- --grpc-server-addr 127.0.0.1:50390 >"$work/switch.log" 2>&1 &
  sw=$!
  for _ in $(seq 50); do simple_switch_CLI --thrift-port 9390 <<< "show_ports" >/dev/null 2>&1 && break; sleep 0.2; done
  simple_switch_CLI --thrift-port 9390 < "$cmds" > "$work/cli.log" 2>&1
  if grep -qiE "error|invalid" "$work/cli.log"; then cat "$work/cli.log" >&2; echo 0; return; fi
  ip netns exec mrtp2 iperf3 -s -1 -D -B 10.0.2.1 >/dev/null 2>&1
  sleep 0.5
  local t0 t1
  t0=$(awk '{print $14 + $15}' /proc/"$sw"/stat)
  ip netns exec mrtp1 iperf3 -c 10.0.2.1 -t "$secs" -O 1 -J > "$work/iperf.json" 2>&1
  t1=$(awk '{print $14 + $15}' /proc/"$sw"/stat)
  python3 -c "
import json, os, sys
d = json.load(open(sys.argv[1]))['end']['sum_received']
# The omitted first second is in the CPU time but not in the bytes: the
# same share for both programs, so their ratio holds.
cpu = (int(sys.argv[3]) - int(sys.argv[2])) / os.sysconf('SC_CLK_TCK')
print('%.1f %.2f' % (d['bits_per_second'] / 1e6, cpu / (d['bytes'] / 1e9)))" "$work/iperf.json" "$t0" "$t1" 2>/dev/null || echo "0 0"
  kill "$sw" 2>/dev/null; wait "$sw" 2>/dev/null; sw=
}
cleanup_run() {
  ip netns del mrtp1 2>/dev/null; ip netns del mrtp2 2>/dev/null
  ip link del mrsw1 2>/dev/null; ip link del mrsw2 2>/dev/null
  return 0
}

load() { cut -d' ' -f1 /proc/loadavg; }
l3=(); mr=(); l3cpu=(); mrcpu=()
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    la=$(load); a=$(measure "$work/l3_baseline.json" l3_baseline.cmds)
    lb=$(load); b=$(measure "$ours" metaroce.cmds)
  else
    lb=$(load); b=$(measure "$ours" metaroce.cmds)
    la=$(load); a=$(measure "$work/l3_baseline.json" l3_baseline.cmds)
  fi
  echo "round $r: plain L3 ${a% *} Mbit/s, ${a#* } CPU s/GB (load $la), metaroce ${b% *} Mbit/s, ${b#* } CPU s/GB (load $lb)"
  l3+=("${a% *}"); mr+=("${b% *}"); l3cpu+=("${a#* }"); mrcpu+=("${b#* }")
done
python3 - "${l3[*]}" "${mr[*]}" "${l3cpu[*]}" "${mrcpu[*]}" <<'PY'
import statistics, sys
l3, mr, l3cpu, mrcpu = ([float(x) for x in arg.split()] for arg in sys.argv[1:5])
a, b = statistics.median(l3), statistics.median(mr)
print(f"median: plain L3 {a:.1f} Mbit/s, metaroce {b:.1f} Mbit/s, ratio {b / a if a else 0:.2f} (target >= 0.8)")
print("per round: " + ", ".join(f"{y / x:.2f}" if x else "-" for x, y in zip(l3, mr)))
c, d = statistics.median(l3cpu), statistics.median(mrcpu)
print(f"switch CPU per GB, median: plain L3 {c:.2f} s, metaroce {d:.2f} s, ratio plain L3 / metaroce {c / d if d else 0:.2f}")
PY
if [ "${PROFILE_PACKETS:-2000}" != 0 ]; then
  ./profile.sh "${PROFILE_PACKETS:-2000}"
fi
