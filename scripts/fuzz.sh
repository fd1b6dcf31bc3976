#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) for SECONDS each, $GROVE_JOBS (nproc)
# targets at a time:
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default 60 s, every target
#   scripts/fuzz.sh 3600                      a developer's longer run
#
# Builds the ASan + UBSan build with the fuzz targets (scripts/sanitize.sh
# asan's build dir; only the fuzzers when nothing else is built yet). Each
# target starts from its committed seeds (fuzz/corpus/<target>/) plus what
# earlier runs found (<build>/fuzz-corpus/<target>/, kept between runs, not
# committed). A crash, a sanitizer report, a leak or an input that runs past
# 10 s fails the run: the input is saved under <build>/fuzz-crashes/<target>/
# and the report printed. An input that needs more than 2 GiB is saved and
# listed but does not fail the run (libFuzzer's fork mode, -ignore_ooms): a
# model may ask for a lot of memory within grove's limits (SECURITY.md).
# GROVE_FUZZ_ARGS adds libFuzzer flags (a long run: "-ignore_crashes=1
# -ignore_timeouts=1" to go on past findings). Make it a regression test by copying the
# input to test/fuzz_regressions/<target>/ (grove_fuzz_replay replays that
# folder in every build's ctest), then fix the cause.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
main_build="${GROVE_BUILD_DIR:-$root/build}"
build="${GROVE_ASAN_BUILD_DIR:-$(dirname "$main_build")/build-asan}"
jobs="${GROVE_JOBS:-$(nproc)}"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(model_loader onnx_import npy_reader op_run)

if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_SANITIZE="-O1 -gline-tables-only" \
    -DGROVE_SANITIZE=address,undefined -DGROVE_BUILD_BENCHMARKS=OFF -DGROVE_BUILD_SHARED=OFF \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld \
    -DGROVE_BUILD_FUZZERS=ON >/dev/null
fi
# GROVE_FUZZ_NO_BUILD=1: run the fuzzers as built (while that build dir is busy).
if [ "${GROVE_FUZZ_NO_BUILD:-0}" != "1" ]; then
  cmake --build "$build" -j "$jobs" --target $(printf 'fuzz_%s ' "${targets[@]}")
fi

export OPENBLAS_NUM_THREADS=1 GROVE_CACHE_DIR=off
# allocator_may_return_null=1, as in scripts/sanitize.sh: an allocation too
# large for the machine (a plan's arena for a crafted model's huge but legal
# shapes) must come back as grove's ResourceExhausted, as it does without ASan,
# not abort the fuzzer.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
run_target() {  # run_target TARGET: one fuzzer, its summary line, 0 when no failure
  local t="$1" corpus="$build/fuzz-corpus/$1" crashes="$build/fuzz-crashes/$1" log="$build/fuzz-$1.log"
  mkdir -p "$corpus" "$crashes"
  local dict=()
  [ -f "$root/fuzz/$t.dict" ] && dict=("-dict=$root/fuzz/$t.dict")
  local rc=0 marker="$build/fuzz-$1.start"
  touch "$marker"
  "$build/fuzz/fuzz_$t" "$corpus" "$root/fuzz/corpus/$t" "${dict[@]}" -fork=1 -ignore_ooms=1 -ignore_timeouts=0 \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" ${GROVE_FUZZ_ARGS:-} >"$log" 2>&1 || rc=$?
  local stats
  stats="$(grep -a -E '^#[0-9]+: cov' "$log" | tail -n 1 | sed -E 's/^#([0-9]+): .*oom\/timeout\/crash: ([0-9/]+).*/\1 inputs, oom\/timeout\/crash \2/')"
  # Fork mode can end with an out-of-memory job's exit status (71) even with
  # -ignore_ooms: when this run saved only oom-* inputs and its log has no
  # other finding, they are listed, not a failure (see above).
  local ooms
  ooms="$(find "$crashes" -type f -name 'oom-*' -newer "$marker")"
  if [ $rc -ne 0 ] && [ -n "$ooms" ] && [ -z "$(find "$crashes" -type f ! -name 'oom-*' -newer "$marker")" ] &&
     ! grep -a -q -E 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|runtime error|ALARM|libFuzzer: (timeout|deadly signal)' "$log"; then
    rc=0
  fi
  [ -n "$ooms" ] && echo "fuzz $t: inputs past the 2 GiB limit (listed, not a failure):" $ooms
  if [ $rc -eq 0 ]; then
    echo "fuzz $t: ${seconds} s, ${stats:-no stats}"
  else
    echo "fuzz $t: FAILED after ${stats:-?} (log: $log; inputs: $crashes/)"
    grep -a -m 1 -A 25 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|ALARM' "$log" || tail -n 30 "$log"
  fi
  return $rc
}

status=0
running=()
for t in "${targets[@]}"; do
  run_target "$t" &
  running+=($!)
  if [ ${#running[@]} -ge "$jobs" ]; then
    for p in "${running[@]}"; do wait "$p" || status=1; done
    running=()
  fi
done
for p in "${running[@]}"; do wait "$p" || status=1; done
exit $status
