#!/usr/bin/env bash
# Compiles the TNA program with the Tofino compiler and writes what the
# controller and the SDE load into p4src/build/tofino/ (committed):
#   main.p4info.txtpb   P4Info (standard objects, as the SDE's P4Runtime
#                       server needs them)
#   bf-rt.json          BF-RT schema
#   pipe/tofino.bin     the binary config (bfas)
#   pipe/context.json   the driver's context
#   p4src/compile-tna.sh [OUT_DIR]     (default: p4src/build/tofino)
# KEEP_BUILD=DIR keeps the compiler's whole output (logs, main.bfa, the
# resource reports) in DIR. BF_P4C: the driver (default: p4c, run with
# --target tofino).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-p4src/build/tofino}
BF_P4C=${BF_P4C:-p4c}
# The driver runs p4c-barefoot for --target tofino: no back end, no build.
if ! command -v "$BF_P4C" >/dev/null 2>&1 || ! command -v p4c-barefoot >/dev/null 2>&1; then
  echo "skip: Tofino build (no $BF_P4C with the Tofino back end; see p4src/README.md, Building the Tofino compiler)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build=${KEEP_BUILD:-$tmp/build}
mkdir -p "$build"
# The driver deletes *.txt, *.json and *.bin in its output directory at
# each compile: the P4Info is written outside it.
# -S: the driver stops after the compiler. At p4c 34b86e9 its own
# assembler step fails in Python before it starts ("'PosixPath' object has
# no attribute 'find'", p4c_src/barefoot.py), so bfas runs here, as the
# driver would run it.
"$BF_P4C" --target tofino --arch tna --std p4-16 -I p4src -S --verbose 1 \
  --bf-rt-schema "$build/bf-rt.json" \
  --p4runtime-files "$tmp/main.p4info.txtpb" --p4runtime-force-std-externs \
  -o "$build" p4src/tna/main.p4
bfas=$(dirname "$(command -v p4c-barefoot)")/bfas
"$bfas" --target tofino --table-handle-offset0 -o "$build/pipe" "$build/pipe/main.bfa"
rm -rf "$out"
mkdir -p "$out/pipe"
cp "$tmp/main.p4info.txtpb" "$build/bf-rt.json" "$out/"
cp "$build/pipe/tofino.bin" "$build/pipe/context.json" "$out/pipe/"
echo "compiled p4src/tna/main.p4 -> $out"
