#!/usr/bin/env bash
# Compiles the TNA program with the Tofino compiler into p4src/build/tofino/:
# P4Info (standard objects, as the SDE's P4Runtime server needs them),
# bf-rt.json, pipe/context.json, pipe/tofino.bin and the resource summary.
#   p4src/compile-tna.sh [OUT_DIR]     (default: p4src/build/tofino)
# BF_P4C: the compiler driver (default: p4c, run with --target tofino).
# Not run in the session that wrote it: bf-p4c was not built there.
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
"$BF_P4C" --target tofino --arch tna --std p4-16 -I p4src \
  --bf-rt-schema "$out/bf-rt.json" \
  --p4runtime-files "$tmp/main.p4info.txtpb" --p4runtime-force-std-externs \
  -o "$out" p4src/tna/main.p4
cp "$tmp/main.p4info.txtpb" "$out/main.p4info.txtpb"
echo "compiled p4src/tna/main.p4 -> $out"
