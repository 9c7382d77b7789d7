#!/usr/bin/env bash
# Compiles the TNA program with the Tofino compiler into p4src/build/tofino/:
# P4Info (standard objects, as the SDE's P4Runtime server needs them),
# bf-rt.json, pipe/context.json, pipe/tofino.bin and the resource summary.
#   p4src/compile-tna.sh [OUT_DIR]     (default: p4src/build/tofino)
# BF_P4C: the compiler driver (default: p4c, run with --target tofino).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-p4src/build/tofino}
BF_P4C=${BF_P4C:-p4c}
# The driver runs p4c-barefoot for --target tofino: no back end, no build.
if ! command -v "$BF_P4C" >/dev/null 2>&1 || ! command -v p4c-barefoot >/dev/null 2>&1; then
  echo "skip: Tofino build (no $BF_P4C with the Tofino back end; see p4src/README.md, Building the Tofino compiler)"
  exit 0
fi
mkdir -p "$out"
# The driver deletes *.txt, *.json and *.bin in OUT at each compile: the
# P4Info is written outside it and copied in afterwards.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# -S: the driver stops after the compiler. At p4c 34b86e9 its own
# assembler step fails in Python before it starts ("'PosixPath' object has
# no attribute 'find'", p4c_src/barefoot.py), so bfas runs here, as the
# driver would run it.
"$BF_P4C" --target tofino --arch tna --std p4-16 -I p4src -S \
  --bf-rt-schema "$out/bf-rt.json" \
  --p4runtime-files "$tmp/main.p4info.txtpb" --p4runtime-force-std-externs \
  -o "$out" p4src/tna/main.p4
bfas=$(dirname "$(command -v p4c-barefoot)")/bfas
"$bfas" --target tofino --table-handle-offset0 -o "$out/pipe" "$out/pipe/main.bfa"
cp "$tmp/main.p4info.txtpb" "$out/main.p4info.txtpb"
echo "compiled p4src/tna/main.p4 -> $out"
