#!/usr/bin/env bash
# Instructions per packet that BMv2 (simple_switch) spends on metaroce's
# program and on the plain L3 program (l3_baseline.p4), counted by
# callgrind: a figure that does not depend on the machine's load, unlike
# run.sh's iperf3 throughput. Packets come from a pcap file (--use-files):
# N TCP packets of one flow, 1514 bytes, port 1 -> port 2, where metaroce
# routes them to a one-member group (flowlets) and the plain program to
# its LPM next hop.
#
#   tests/p4/throughput/profile.sh [PACKETS]
#   METAROCE_JSON=old.json tests/p4/throughput/profile.sh   (another build of ours)
#   KEEP=/tmp/prof tests/p4/throughput/profile.sh   (keep callgrind's outputs:
#       KEEP/run.{l3,mr}/cg.out, cg.txt, tree.txt, for callgrind_annotate)
#
# Needs p4c, simple_switch, simple_switch_CLI, valgrind. Prints figures only.
set -u
cd "$(dirname "$0")"
n=${1:-2000}
for tool in p4c simple_switch simple_switch_CLI valgrind callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "skip: BMv2 instruction profile ($tool not installed)"; exit 0; }
done
[ -f ../../../p4src/build/main.json ] || { echo "no p4src/build/main.json: run 'make p4' first" >&2; exit 1; }
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work"
sw=
cleanup() {
  [ -n "$sw" ] && kill "$sw" 2>/dev/null && wait "$sw" 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
p4c --target bmv2 --arch v1model -o "$work" l3_baseline.p4 2>/dev/null || { echo "p4c failed on l3_baseline.p4" >&2; exit 1; }
python3 - "$work" "$n" <<'PY'
import struct, sys
work, n = sys.argv[1], int(sys.argv[2])
def csum(b):
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def pcap(path, pkts):
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, p in enumerate(pkts):
            f.write(struct.pack('<IIII', i // 1000, i % 1000, len(p), len(p)) + p)
tcp = struct.pack('!HHIIBBHHH', 40000, 5201, 1000, 2000, 0x50, 0x10, 65535, 0, 0) + bytes(1514 - 54)
ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, bytes([10, 0, 1, 1]), bytes([10, 0, 2, 1]))
ip = ip[:10] + struct.pack('!H', csum(ip)) + ip[12:]
eth = bytes([2, 0, 0, 0, 1, 0xfe, 2, 0, 0, 0, 1, 1]) + b'\x08\x00'
pcap(work + '/p1_in.pcap', [eth + ip + tcp] * n)
pcap(work + '/p2_in.pcap', [])
PY

# One run under callgrind; prints instructions per packet of the threads
# that handle packets (receive, ingress, egress, transmit), leaving out the
# one-time growth of BMv2's pool of packet header vectors, then the parts
# (inclusive; the total also has queues, packet buffers, I/O). The total
# varies by a few percent between runs with thread scheduling.
profile() {
  local json=$1 cmds=$2 dir=$work/run.$3
  case $json in /*) ;; *) json=$PWD/$json ;; esac
  mkdir -p "$dir" && cp "$work"/p*_in.pcap "$dir"/
  # --use-files reads and writes DIR/pN_in.pcap, DIR/pN_out.pcap.
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
     simple_switch --use-files 20 -i "1@$dir/p1" -i "2@$dir/p2" --thrift-port 9490 "$json" >"$dir/sw.log" 2>&1 &
  sw=$!
  for _ in $(seq 150); do simple_switch_CLI --thrift-port 9490 <<< "show_ports" >/dev/null 2>&1 && break; sleep 0.2; done
  # Egress queues long enough for every packet: none may be dropped while
  # the file is read faster than valgrind's switch drains it.
  { cat "$cmds"; echo "set_queue_depth 1000000"; } > "$dir/cmds"
  simple_switch_CLI --thrift-port 9490 < "$dir/cmds" > "$dir/cli.log" 2>&1
  if grep -qiE "error|invalid" "$dir/cli.log"; then cat "$dir/cli.log" >&2; echo 0; return; fi
  # Wait until the packets are through: the switch has used no CPU for 8 s
  # (the output file is buffered, its size says nothing).
  local prev=-1 now idle=0
  sleep 20
  while [ $idle -lt 4 ]; do sleep 2
    now=$(awk '{print $14 + $15}' /proc/"$sw"/stat 2>/dev/null || echo 0)
    if [ "$now" = "$prev" ]; then idle=$((idle + 1)); else idle=0; fi; prev=$now; done
  kill "$sw" 2>/dev/null; wait "$sw" 2>/dev/null; sw=
  callgrind_annotate --inclusive=yes --threshold=100 "$dir/cg.out" 2>/dev/null > "$dir/cg.txt"
  callgrind_annotate --inclusive=yes --tree=calling --threshold=100 "$dir/cg.out" 2>/dev/null > "$dir/tree.txt"
  python3 - "$dir/cg.txt" "$dir/tree.txt" <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+\S*?:(.*?) \[', line)
    if m: rows.setdefault(m.group(2), int(m.group(1).replace(',', '')))
def get(name): return sum(v for k, v in rows.items() if k.startswith(name))
# Packets that made it through the deparser (calls, from the call tree).
n = max([int(m.group(1).replace(',', '')) for m in
         re.finditer(r'bm::Deparser::deparse\(bm::Packet\*\) const \(([\d,]+)x\)', open(sys.argv[2]).read())] or [1])
total = (get('SimpleSwitch::receive_(') - get('bm::PHVFactory::create()') + get('SimpleSwitch::ingress_thread(')
         + get('SimpleSwitch::egress_thread(') + get('SimpleSwitch::transmit_thread('))
parts = [('parser', 'bm::Parser::parse('), ('checksum verify', 'bm::Parser::verify_checksums('),
         ('pipelines', 'bm::Pipeline::apply('), ('deparser', 'bm::Deparser::deparse('),
         ('metadata reset', 'bm::PHV::reset_metadata('), ('header reset', 'bm::PHV::reset(')]
print(round(total / n), ', '.join(f"{k} {round(get(f) / n)}" for k, f in parts) + f" ({n} packets)")
PY
}
a=$(profile "$work/l3_baseline.json" l3_baseline.cmds l3)
b=$(profile "${METAROCE_JSON:-../../../p4src/build/main.json}" metaroce.cmds mr)
echo "instructions per packet (callgrind, simple_switch):"
echo "  plain L3: $a"
echo "  metaroce: $b"
python3 - "${a%%,*}" "${b%%,*}" <<'PY'
import sys
a, b = int(sys.argv[1].split()[0]), int(sys.argv[2].split()[0])
print(f"  ratio plain L3 / metaroce: {a / b if b else 0:.2f} (BMv2's own work only; iperf3 adds the kernel's)")
PY
