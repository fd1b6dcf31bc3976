#!/usr/bin/env bash
# The sanitizer builds and their tests (scripts/test.sh runs both; CI too):
#
#   scripts/sanitize.sh asan   clang, ASan + UBSan (halting on the first
#                              report), with libFuzzer's coverage hooks so the
#                              same build links the fuzz targets (fuzz/); runs
#                              the unit, format, runtime, API, ONNX importer,
#                              command line and malformed-input tests, and
#                              replays the fuzz regressions and seeds.
#   scripts/sanitize.sh tsan   clang, TSan: the library and the concurrency
#                              suite only (test/concurrency/).
#
# Builds in $GROVE_ASAN_BUILD_DIR / $GROVE_TSAN_BUILD_DIR (default: build-asan,
# build-tsan beside $GROVE_BUILD_DIR), -O1 with line tables only (the test
# suites' own files -O0: test/CMakeLists.txt) and linked by lld (its links
# take a fifth of ld's time), so the CI run stays within its time. Extra
# arguments go to ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
main_build="${GROVE_BUILD_DIR:-$root/build}"
parent="$(dirname "$main_build")"
jobs="${GROVE_JOBS:-$(nproc)}"
kind="${1:?usage: scripts/sanitize.sh asan|tsan [ctest args...]}"
shift

configure() {  # configure DIR SANITIZERS [cmake args...]
  local dir="$1" sanitizers="$2"
  shift 2
  CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_SANITIZE="-O1 -gline-tables-only" \
    -DGROVE_SANITIZE="$sanitizers" -DGROVE_BUILD_BENCHMARKS=OFF -DGROVE_BUILD_SHARED=OFF \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld "$@" >/dev/null
}

# Nothing a sanitizer build links may need libcuda either (the sanitizer
# runtimes change the link: cmake/GroveDependencies.cmake).
check_no_libcuda() {
  local dir="$1"
  shift
  local files=()
  for t in "$@"; do
    f="$(find "$dir" -maxdepth 3 -type f -name "$t" -perm -u+x | head -n 1)"
    [ -n "$f" ] && files+=("$f")
  done
  bash "$root/test/no_libcuda_test.sh" "${files[@]}"
}

export OPENBLAS_NUM_THREADS=1
# Lets a test do less where a run costs ~10x (test/cli/malformed_models_test.sh).
export GROVE_TEST_SANITIZED="$kind"
export GROVE_CACHE_DIR="${GROVE_CACHE_DIR:-off}"
case "$kind" in
  asan)
    build="${GROVE_ASAN_BUILD_DIR:-$parent/build-asan}"
    configure "$build" address,undefined -DGROVE_BUILD_FUZZERS=ON
    targets=(grove_cli grove_make_models example_cpp example_c example_sequence example_text vad_stream
             grove_op_tests grove_format_tests grove_runtime_tests grove_api_tests grove_onnx_tests
             grove_fuzz_replay grove_fuzzers)
    cmake --build "$build" -j "$jobs" --target "${targets[@]}"
    check_no_libcuda "$build" grove grove_api_tests fuzz_model_loader fuzz_onnx_import
    # protect_shadow_gap=0: CUDA's runtime maps memory where ASan's shadow gap is.
    # allocator_may_return_null=1: an allocation too large for the machine
    # must come back as grove's ResourceExhausted, as it does without ASan.
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0:detect_stack_use_after_return=0:strict_string_checks=1:allocator_may_return_null=1}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
    cd "$build"
    # CaptureSafeTest and BucketReplayTest run every exported model on the
    # emulated device: minutes
    # under ASan for code the runtime and API suites already cover here; the
    # normal build runs it.
    log="$build/Testing/asan_ctest.log"
    mkdir -p "$build/Testing"
    set +e
    ctest --output-on-failure -j "$jobs" -L '^(ops|format|runtime|api|onnx|cli|fuzz|build)$' -E 'CaptureSafeTest|BucketReplayTest' "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    # LeakSanitizer's stop-the-world tracer sometimes crashes at a process's
    # exit after every test in it passed ("Tracer caught signal 11 ...
    # LeakSanitizer has encountered a fatal error"; google/sanitizers#1353,
    # seen once in CI on CApiCompileKernelsTest). That is the sanitizer
    # failing, not grove: when the log shows it, the failed tests run once
    # more and that run decides (a real failure among them fails again).
    # Without the signature a failure stands as it is.
    if [ "$rc" -ne 0 ] && grep -q 'Tracer caught signal' "$log" &&
       grep -q 'LeakSanitizer has encountered a fatal error' "$log"; then
      echo "grove test: LeakSanitizer's tracer crashed at a test's exit (google/sanitizers#1353); running the failed tests again"
      ctest --output-on-failure -j "$jobs" --rerun-failed
      rc=0
    fi
    exit "$rc"
    ;;
  tsan)
    build="${GROVE_TSAN_BUILD_DIR:-$parent/build-tsan}"
    configure "$build" thread
    cmake --build "$build" -j "$jobs" --target grove_concurrency_tests
    export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/test/concurrency/tsan_suppressions.txt}"
    cd "$build"
    ctest --output-on-failure -j 1 -L '^concurrency$' "$@"
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan [ctest args...]" >&2
    exit 2
    ;;
esac
