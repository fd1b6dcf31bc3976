#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) for SECONDS each, all at once:
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default 60 s, every target
#   scripts/fuzz.sh 3600                      a developer's longer run
#
# Builds the ASan + UBSan build with the fuzz targets (scripts/sanitize.sh
# asan's build dir; only the fuzzers when nothing else is built yet). Each
# target starts from its committed seeds (fuzz/corpus/<target>/) plus what
# earlier runs found (<build>/fuzz-corpus/<target>/, kept between runs, not
# committed). A crash, a sanitizer report, a leak, a run past 10 s or one over
# 2 GiB fails the run: its input is saved under <build>/fuzz-crashes/<target>/
# and the log's tail is printed. Make it a regression test by copying the
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
    -DGROVE_BUILD_FUZZERS=ON >/dev/null
fi
cmake --build "$build" -j "$jobs" --target $(printf 'fuzz_%s ' "${targets[@]}")

export OPENBLAS_NUM_THREADS=1 GROVE_CACHE_DIR=off
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
pids=()
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"
  crashes="$build/fuzz-crashes/$t"
  mkdir -p "$corpus" "$crashes"
  dict=()
  [ -f "$root/fuzz/$t.dict" ] && dict=("-dict=$root/fuzz/$t.dict")
  "$build/fuzz/fuzz_$t" "$corpus" "$root/fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" ${GROVE_FUZZ_ARGS:-} >"$build/fuzz-$t.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  t="${targets[$i]}"
  if wait "${pids[$i]}"; then
    runs="$(grep -o 'stat::number_of_executed_units: [0-9]*' "$build/fuzz-$t.log" | awk '{print $2}')"
    echo "fuzz $t: ${seconds} s, ${runs:-?} inputs, no crash"
  else
    status=1
    echo "fuzz $t: FAILED (log: $build/fuzz-$t.log; inputs: $build/fuzz-crashes/$t/)"
    grep -A 30 -m 1 -E '^==[0-9]+==ERROR|runtime error|ERROR: libFuzzer|^==[0-9]+== ERROR' "$build/fuzz-$t.log" | head -40 || tail -30 "$build/fuzz-$t.log"
  fi
done
exit $status
