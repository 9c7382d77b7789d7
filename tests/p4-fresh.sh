#!/usr/bin/env bash
# L3 contract check: the committed p4src/build/ must be what p4c makes of
# p4src/ today. Skips with one line where p4c or the program is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
P4C=${P4C:-p4c}
if ! command -v "$P4C" >/dev/null 2>&1; then
  echo "skip: P4 contract freshness check (p4c not installed)"
  exit 0
fi
# The driver runs p4c-bm2-ss for --target bmv2. A p4c built for Tofino
# alone (/opt/bf-p4c, on PATH for the Tofino tier) has no such back end.
if ! command -v p4c-bm2-ss >/dev/null 2>&1 && ! [ -x "$(dirname "$(command -v "$P4C")")/p4c-bm2-ss" ]; then
  echo "skip: P4 contract freshness check ($P4C has no BMv2 back end: p4c-bm2-ss not installed)"
  exit 0
fi
if [ ! -f p4src/v1model/main.p4 ]; then
  echo "skip: P4 contract freshness check (p4src/v1model/main.p4 does not exist yet)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p4src/compile.sh "$tmp" >/dev/null
# p4c writes its output path into the JSON's "program" field; compare without it.
normalize() { sed -E 's#("program" *: *")[^"]*(")#\1main.p4i\2#' "$1"; }
for f in main.json main.p4info.txtpb; do
  if ! cmp -s <(normalize "$tmp/$f") <(normalize "p4src/build/$f"); then
    echo "FAIL: p4src/build/$f is stale: run 'make p4' and commit the result" >&2
    exit 1
  fi
done
echo "ok: p4src/build/ matches p4src/"
