#!/usr/bin/env bash
# Writes the TNA program's P4Info with p4test, where the Tofino compiler
# (bf-p4c) is not available:
#   p4src/tna-p4info.sh [OUT]      (default: p4src/build/tna/main.p4info.txtpb)
#
# 1. p4test checks p4src/tna against the real tna.p4 (TNA_INCLUDE, the
#    p4c source's backends/tofino/bf-p4c/p4include).
# 2. p4test writes the P4Info through its PSA handler, with
#    p4src/tna/p4test/tna.p4 standing in for tna.p4 (why: see that file),
#    and the architecture recorded as bf-p4c records it ("tna").
# bf-p4c's own P4Info (p4src/build/tofino/, with
# --p4runtime-force-std-externs) supersedes this one where it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-p4src/build/tna/main.p4info.txtpb}
P4TEST=${P4TEST:-p4test}
if ! command -v "$P4TEST" >/dev/null 2>&1; then
  echo "p4test not found: cannot write the TNA P4Info (set P4TEST=/path/to/p4test)" >&2
  exit 1
fi
if [ -z "${TNA_INCLUDE:-}" ]; then
  for d in /opt/bf-p4c/share/p4c/p4include /opt/tofino-src/p4c/backends/tofino/bf-p4c/p4include /opt/p4-build/src/p4c/backends/tofino/bf-p4c/p4include /usr/local/share/p4c/p4include/tofino; do
    if [ -f "$d/tna.p4" ]; then TNA_INCLUDE=$d; break; fi
  done
fi
if [ -z "${TNA_INCLUDE:-}" ] || [ ! -f "$TNA_INCLUDE/tna.p4" ]; then
  echo "tna.p4 not found: set TNA_INCLUDE to p4c's backends/tofino/bf-p4c/p4include" >&2
  exit 1
fi
# core.p4: p4test finds its own once installed; from a build tree, take
# the p4c source's (P4C_INCLUDE, default: beside TNA_INCLUDE).
core=()
P4C_INCLUDE=${P4C_INCLUDE:-$TNA_INCLUDE/../../../../p4include}
if [ -f "$P4C_INCLUDE/core.p4" ]; then core=(-I "$P4C_INCLUDE"); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$P4TEST" --std p4-16 -D__TARGET_TOFINO__=1 "${core[@]}" -I "$TNA_INCLUDE" -I p4src p4src/tna/main.p4
"$P4TEST" --std p4-16 --arch psa -D__TARGET_TOFINO__=1 "${core[@]}" -I p4src/tna/p4test -I p4src \
  --p4runtime-files "$tmp/main.p4info.txtpb" p4src/tna/main.p4
mkdir -p "$(dirname "$out")"
sed 's/^  arch: "psa"$/  arch: "tna"/' "$tmp/main.p4info.txtpb" > "$out"
echo "wrote $out (p4test, PSA handler, p4src/tna/p4test/tna.p4 standing in for tna.p4)"
