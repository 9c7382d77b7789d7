#!/usr/bin/env bash
# The Tofino build's freshness: where the Tofino compiler (bf-p4c) is
# installed, p4src/build/tofino/ must be what p4src/compile-tna.sh makes of
# p4src/ today; elsewhere one skip line. (The v1model/TNA P4Info parity
# runs in `cargo test`, ctrl/pipeline/tests/parity.rs, on the committed
# files, with or without the compiler.)
#
# Compared: main.p4info.txtpb byte for byte; bf-rt.json without its
# snapshot tables (pipe.snapshot.*: the debugger's, whose order and ids
# bf-p4c draws differently from one compile to the next), as canonical
# JSON; the rest of bf-rt.json is stable. bfas writes a
# per-compile run id into both pipe/context.json and pipe/tofino.bin, and
# the build's date into context.json (bf-asm/bfas.cpp): context.json is
# compared without run_id and build_date, tofino.bin with each file's own
# run id (read from its context.json) blanked. Everything else is stable
# from one compile to the next.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v "${BF_P4C:-p4c}" >/dev/null 2>&1 || ! command -v p4c-barefoot >/dev/null 2>&1; then
  echo "skip: Tofino build freshness (the Tofino compiler is not installed; see p4src/README.md, Building the Tofino compiler)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! p4src/compile-tna.sh "$tmp/tofino" >"$tmp/log" 2>&1; then
  grep -E "error:" "$tmp/log" >&2 || cat "$tmp/log" >&2
  echo "FAIL: the Tofino compiler refuses p4src/tna (above; see p4src/README.md, Resources on Tofino 1)" >&2
  exit 1
fi
stale() {
  echo "FAIL: p4src/build/tofino/$1 is stale or missing: run 'make p4-tna' and commit p4src/build/tofino/" >&2
  exit 1
}
cmp -s "$tmp/tofino/main.p4info.txtpb" p4src/build/tofino/main.p4info.txtpb || stale main.p4info.txtpb
# FILE -> bf-rt.json's digest without the snapshot tables.
bfrt() {
  python3 - "$1" <<'PY'
import hashlib, json, sys
d = json.load(open(sys.argv[1]))
d["tables"] = [t for t in d.get("tables", []) if not t.get("name", "").startswith("pipe.snapshot.")]
print(hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest())
PY
}
[ -f p4src/build/tofino/bf-rt.json ] || stale bf-rt.json
[ "$(bfrt "$tmp/tofino/bf-rt.json")" = "$(bfrt p4src/build/tofino/bf-rt.json)" ] || stale bf-rt.json
# DIR -> context.json without run_id and build_date, then tofino.bin with
# its run id blanked (it must appear there exactly once).
stable() {
  python3 - "$1" <<'PY'
import hashlib, json, sys
d = sys.argv[1]
ctx = json.load(open(f"{d}/pipe/context.json"))
run_id = ctx.pop("run_id", "")
ctx.pop("build_date", None)
print(hashlib.sha256(json.dumps(ctx, sort_keys=True).encode()).hexdigest())
blob = open(f"{d}/pipe/tofino.bin", "rb").read()
if not run_id or blob.count(run_id.encode()) != 1:
    sys.exit(f"{d}/pipe/tofino.bin: its run id {run_id!r} is not in it once")
print(hashlib.sha256(blob.replace(run_id.encode(), b"0" * len(run_id))).hexdigest())
PY
}
[ -f p4src/build/tofino/pipe/context.json ] && [ -f p4src/build/tofino/pipe/tofino.bin ] || stale pipe/
new=$(stable "$tmp/tofino") || exit 1
old=$(stable p4src/build/tofino) || stale "pipe/ (unreadable)"
[ "$(sed -n 1p <<<"$new")" = "$(sed -n 1p <<<"$old")" ] || stale pipe/context.json
[ "$(sed -n 2p <<<"$new")" = "$(sed -n 2p <<<"$old")" ] || stale pipe/tofino.bin
echo "ok: p4src/build/tofino/ matches p4src/ (bf-rt.json but its snapshot tables, context.json and tofino.bin up to bfas's run id and date)"
