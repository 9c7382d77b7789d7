#!/usr/bin/env bash
# The Tofino side of the contract, where its tools exist; one skip line
# each where they do not:
#  - p4src/build/tna/main.p4info.txtpb is what p4src/tna-p4info.sh makes
#    of p4src/ today (needs p4test and p4c's tna.p4);
#  - p4src/build/tofino/ is what bf-p4c makes of it (needs the Tofino
#    compiler): P4Info and bf-rt.json byte for byte, context.json without
#    its date and run id; a program bf-p4c or bfas refuses fails here;
#  - the v1model/TNA P4Info parity itself runs in `cargo test`
#    (ctrl/pipeline/tests/parity.rs), which says here whether it can.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f p4src/build/tna/main.p4info.txtpb ]; then
  echo "ok: P4Info parity is checked by ctrl/pipeline/tests/parity.rs"
else
  echo "skip: P4Info parity (p4src/build/tna/main.p4info.txtpb missing: make p4-tna-p4info)"
fi
if command -v "${P4TEST:-p4test}" >/dev/null 2>&1; then
  if p4src/tna-p4info.sh "$tmp/p4info.txtpb" >"$tmp/log" 2>&1; then
    if ! cmp -s "$tmp/p4info.txtpb" p4src/build/tna/main.p4info.txtpb; then
      echo "FAIL: p4src/build/tna/main.p4info.txtpb is stale: run 'make p4-tna-p4info' and commit it" >&2
      exit 1
    fi
    echo "ok: p4src/build/tna/main.p4info.txtpb matches p4src/"
  else
    cat "$tmp/log" >&2
    echo "FAIL: p4test refuses p4src/tna (above)" >&2
    exit 1
  fi
else
  echo "skip: TNA P4Info freshness (p4test not installed)"
fi
if command -v p4c-barefoot >/dev/null 2>&1; then
  if ! p4src/compile-tna.sh "$tmp/tofino" >"$tmp/log" 2>&1; then
    grep -E "error:" "$tmp/log" >&2 || cat "$tmp/log" >&2
    echo "FAIL: the Tofino compiler refuses p4src/tna (above; see p4src/README.md, Resources on Tofino 1)" >&2
    exit 1
  fi
  if [ ! -d p4src/build/tofino ]; then
    echo "FAIL: p4src/build/tofino/ is missing: run 'make p4-tna' and commit it" >&2
    exit 1
  fi
  # bfas writes the build's date and a per-compile run id into
  # context.json (bf-asm/bfas.cpp): compared without them. tofino.bin is
  # only checked to be there.
  ctx() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k,None) for k in ("build_date","run_id")]; print(json.dumps(d,sort_keys=True))' "$1"; }
  for f in main.p4info.txtpb bf-rt.json; do
    if ! cmp -s "$tmp/tofino/$f" "p4src/build/tofino/$f"; then
      echo "FAIL: p4src/build/tofino/$f is stale: run 'make p4-tna' and commit the result" >&2
      exit 1
    fi
  done
  if ! cmp -s <(ctx "$tmp/tofino/pipe/context.json") <(ctx p4src/build/tofino/pipe/context.json); then
    echo "FAIL: p4src/build/tofino/pipe/context.json is stale: run 'make p4-tna' and commit the result" >&2
    exit 1
  fi
  if [ ! -s p4src/build/tofino/pipe/tofino.bin ]; then
    echo "FAIL: p4src/build/tofino/pipe/tofino.bin is missing or empty: run 'make p4-tna' and commit it" >&2
    exit 1
  fi
  echo "ok: p4src/build/tofino/ matches p4src/"
else
  echo "skip: Tofino build freshness (the Tofino compiler is not installed)"
fi
