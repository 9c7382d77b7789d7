#!/usr/bin/env bash
# Compiles the v1model program into BMv2 JSON + P4Info text.
#   p4src/compile.sh [OUT_DIR]     (default: p4src/build)
# Run from anywhere; paths in the outputs are relative to the repository
# root so that the committed files do not depend on where a clone lives.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-p4src/build}
P4C=${P4C:-p4c}
main=p4src/v1model/main.p4
if ! command -v "$P4C" >/dev/null 2>&1; then
  echo "p4c not found: cannot compile $main. Build p4c from the p4lang/p4c repository (see README, 'P4 toolchain') or set P4C=/path/to/p4c." >&2
  exit 1
fi
if [ ! -f "$main" ]; then
  echo "$main not found: there is no v1model program to compile yet." >&2
  exit 1
fi
mkdir -p "$out"
"$P4C" --target bmv2 --arch v1model --std p4-16 \
  -I p4src \
  --p4runtime-files "$out/main.p4info.txtpb" \
  -o "$out" "$main"
echo "compiled $main -> $out/main.json, $out/main.p4info.txtpb"
