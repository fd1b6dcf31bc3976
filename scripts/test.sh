#!/usr/bin/env bash
# Every test (what CI runs): installs what is missing, builds, runs ctest
# (unit, end-to-end, C ABI, command line, examples, the installed-package
# consumer, the fuzz regressions); then, unless GROVE_TEST_SANITIZERS=0:
#   1. the ASan + UBSan build and its tests     (scripts/sanitize.sh asan)
#   2. each fuzz target for GROVE_FUZZ_SECONDS  (scripts/fuzz.sh, default 60)
#   3. the TSan build and the concurrency tests (scripts/sanitize.sh tsan)
# Arguments go to the first ctest. GROVE_TEST_SANITIZERS=0 scripts/test.sh is
# the quick local run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROVE_BUILD_DIR:-$root/build}"
jobs="${GROVE_JOBS:-$(nproc)}"
stage_start=$SECONDS
stage() {  # prints how long the stage before took
  echo "grove test: $1 took $((SECONDS - stage_start)) s"
  stage_start=$SECONDS
}

"$root/scripts/install_deps.sh"
GROVE_BUILD_DIR="$build" "$root/scripts/build.sh"
stage "build"
(cd "$build" && ctest --output-on-failure -j "$jobs" "$@")
stage "ctest"
if [ "${GROVE_TEST_SANITIZERS:-1}" = "0" ]; then
  exit 0
fi
GROVE_BUILD_DIR="$build" "$root/scripts/sanitize.sh" asan
stage "ASan + UBSan build and tests"
GROVE_BUILD_DIR="$build" "$root/scripts/fuzz.sh" "${GROVE_FUZZ_SECONDS:-60}"
stage "fuzzing"
GROVE_BUILD_DIR="$build" "$root/scripts/sanitize.sh" tsan
stage "TSan build and concurrency tests"
echo "grove test: all passed in $SECONDS s"
