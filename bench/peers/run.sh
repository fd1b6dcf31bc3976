#!/usr/bin/env bash
# grove against ONNX Runtime on the exported test models, in one command:
#
#   bench/peers/run.sh [--quick] [--models cnn,lstm] [--threads 1,2] [--json OUT] ...
#
# Makes (or reuses) a venv under $GROVE_BUILD_DIR/peers-venv (default
# build/peers-venv), pip-installs numpy, onnxruntime and the grove package
# (python/, which packs the build's libgrove.so; reinstalled when python/
# changes), then runs bench/peers/compare.py with the arguments given (its
# --help lists them). The timed library is the build's own libgrove.so
# ($GROVE_LIBRARY), so a rebuild is measured without reinstalling. Needs the
# network the first time (pip). Not a test: timings depend on the machine.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${GROVE_BUILD_DIR:-$repo/build}"
build="$(cd "$build" 2>/dev/null && pwd || echo "$build")"
die() { echo "bench/peers/run.sh: $*" >&2; exit 2; }

case " $* " in *" -h "*|*" --help "*|*" --list "*) ;; *)
  for f in "$build/grove" "$build/libgrove.so"; do
    [ -f "$f" ] || die "no $f: build grove first (cmake -S . -B build && cmake --build build --target grove grove_cli), or set GROVE_BUILD_DIR"
  done ;;
esac
command -v python3 >/dev/null || die "python3 is not installed"
python3 -c 'import venv, ensurepip' 2>/dev/null || die "python3 has no venv/ensurepip module (apt-get install python3-venv)"

venv="$build/peers-venv"
py="$venv/bin/python"
if ! "$py" -c 'import sys' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv $venv failed"
fi
if ! "$py" -c 'import numpy, onnxruntime, setuptools, wheel' 2>/dev/null; then
  echo "bench/peers: pip install numpy onnxruntime setuptools wheel into $venv" >&2
  "$py" -m pip install -q --disable-pip-version-check numpy onnxruntime setuptools wheel ||
    die "pip could not install numpy and onnxruntime into $venv (no network?)"
fi

# The grove package, from a copy (nothing is written into python/), again
# whenever python/'s sources change.
stamp="$(cat "$repo/python/pyproject.toml" "$repo/python/setup.py" "$repo/python/grove/"*.py | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$venv/grove-package.sha256" 2>/dev/null)" != "$stamp" ] || ! "$py" -c 'import grove' 2>/dev/null; then
  echo "bench/peers: pip install ./python into $venv" >&2
  src="$venv/grove-src"
  rm -rf "$src" && mkdir -p "$src"
  cp -r "$repo/python/grove" "$repo/python/pyproject.toml" "$repo/python/setup.py" "$src/"
  rm -f "$src/grove/libgrove.so"
  (cd "$venv" && GROVE_BUILD_DIR="$build" "$py" -m pip install -q --disable-pip-version-check --no-deps \
     --no-build-isolation --force-reinstall "$src") || die "pip install ./python failed"
  echo "$stamp" > "$venv/grove-package.sha256"
fi

cd "$repo"
export GROVE_LIBRARY="${GROVE_LIBRARY:-$build/libgrove.so}"
exec "$py" "$here/compare.py" --build "$build" "$@"
