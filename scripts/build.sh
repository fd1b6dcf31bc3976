#!/usr/bin/env bash
# Configures and builds grove in ${GROVE_BUILD_DIR:-build}: scripts/build.sh [TARGET...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROVE_BUILD_DIR:-$root/build}"
jobs="${GROVE_JOBS:-$(nproc)}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${GROVE_CMAKE_ARGS:-} >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$build" -j "$jobs" --target "$@"
else
  cmake --build "$build" -j "$jobs"
fi
