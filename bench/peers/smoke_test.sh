#!/usr/bin/env bash
# ctest bench.peers_smoke: bench/peers' arguments and its failures without a
# build, with the system's python3 only (no venv, no pip, no network, nothing
# timed). The benchmark itself is bench/peers/run.sh, run by hand.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
fail=0
expect() {  # expect WANT_RC PATTERN -- COMMAND...
  local want="$1" pattern="$2"; shift 3
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  if [ "$rc" != "$want" ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: $* exited $rc (want $want) and printed:"; echo "$out" | tail -5
    echo "  (wanted a line matching '$pattern')"
    fail=1
  else
    echo "ok: $*"
  fi
}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
missing="$tmp/no-build"
expect 0 "--quick" -- python3 "$here/compare.py" --help
expect 0 "--no-settle" -- python3 "$here/compare.py" --help
expect 0 "transformer_encoder: b1 s8" -- python3 "$here/compare.py" --list
expect 0 "^lstm: " -- python3 "$here/compare.py" --list --models lstm
expect 2 "unknown model" -- python3 "$here/compare.py" --models nosuch
expect 2 "thread counts of at least 1" -- python3 "$here/compare.py" --threads 0
expect 2 "comma-separated integers" -- python3 "$here/compare.py" --threads x
expect 2 "must be positive" -- python3 "$here/compare.py" --open-reps -1
expect 2 "open-warmup must be 0 or more" -- python3 "$here/compare.py" --open-warmup -1
expect 0 "--open-warmup" -- python3 "$here/compare.py" --help
expect 1 "no $missing/grove or $missing/libgrove.so: build grove first" -- python3 "$here/compare.py" --build "$missing"
expect 2 "no $missing/grove: build grove first" -- env GROVE_BUILD_DIR="$missing" bash "$here/run.sh" --quick
[ ! -e "$missing" ] || { echo "FAIL: run.sh made $missing"; fail=1; }
# export_variants.py needs torch to run; here it must at least parse.
if python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$here/export_variants.py"; then
  echo "ok: export_variants.py parses"
else
  echo "FAIL: export_variants.py does not parse"; fail=1
fi
exit $fail
