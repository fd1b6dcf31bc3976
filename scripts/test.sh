#!/usr/bin/env bash
# Every test: installs what is missing, builds, runs ctest (unit, end-to-end,
# C ABI, command line, examples, the installed-package consumer).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROVE_BUILD_DIR:-$root/build}"
"$root/scripts/install_deps.sh"
GROVE_BUILD_DIR="$build" "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${GROVE_JOBS:-$(nproc)}" "$@"
