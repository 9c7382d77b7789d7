#!/usr/bin/env bash
# Every target named in .PHONY must have a rule. make treats a phony target
# without one as "nothing to be done" and exits 0, so a lost rule (lint,
# demo, bench) would pass CI silently; this check makes it fail.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for t in $(sed -n 's/^\.PHONY:[[:space:]]*//p' Makefile); do
  grep -qE "^${t}:" Makefile || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: Makefile: .PHONY names targets with no rule: ${missing[*]} (make would do nothing for them and succeed)" >&2
  exit 1
fi
echo "ok: every .PHONY target in the Makefile has a rule"
