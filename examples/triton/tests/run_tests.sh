#!/usr/bin/env bash
# ctest triton.serving: serves examples/triton's model repository (Silero VAD
# and an exported transformer, imported with `grove import`) on the real
# tritonserver from PyPI's nvidia-pytriton wheel, CPU instances only, and runs
# test_triton.py against it (HTTP and gRPC, several threads, answers compared
# with `grove run`).
#
# The venv ($TEST_TMP/venv: nvidia-pytriton 0.7.0, tritonclient[http,grpc],
# numpy, pytest, installed by name) is kept between runs; the grove package is
# reinstalled from this build each run. Exits 77 (ctest: skipped) with the
# reason when python3 or its venv module is missing, pip cannot download the
# packages (offline), or the wheel's server cannot run here (no stub for this
# Python, no libpython shared library).
set -euo pipefail
: "${SOURCE_DIR:?}" "${GROVE_BUILD_DIR:?}" "${GROVE_BIN:?}" "${TEST_TMP:?}"
skip() { echo "SKIPPED: $*"; exit 77; }
here="$SOURCE_DIR/examples/triton"

command -v python3 >/dev/null || skip "python3 is not installed"
python3 -c 'import venv, ensurepip' 2>/dev/null || skip "python3 has no venv/ensurepip module (apt-get install python3-venv)"
[ -f "$GROVE_BUILD_DIR/libgrove.so" ] || skip "no $GROVE_BUILD_DIR/libgrove.so (configure with -DGROVE_BUILD_SHARED=ON)"
[ "$(uname -m)" = x86_64 ] || skip "nvidia-pytriton's wheel is x86_64 (and aarch64) Linux only; this is $(uname -m)"

mkdir -p "$TEST_TMP"
venv="$TEST_TMP/venv"
requirements=(nvidia-pytriton==0.7.0 "tritonclient[http,grpc]" "numpy<2" pytest setuptools wheel)
stamp="$venv/.grove-requirements"
if [ "$(cat "$stamp" 2>/dev/null)" != "${requirements[*]}" ] || ! "$venv/bin/python" -c 'import pytriton, tritonclient.grpc, tritonclient.http, numpy, pytest' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" || skip "python3 -m venv failed"
  echo "triton: pip install ${requirements[*]} (once; the venv is kept in $venv)"
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "${requirements[@]}"; then
    rm -rf "$venv"
    skip "pip could not install ${requirements[*]} (no network? the Triton test needs PyPI once)"
  fi
  echo "${requirements[*]}" >"$stamp"
fi
py="$venv/bin/python"

# The server and stub of the wheel must be able to start on this machine.
read -r pytriton minor < <("$py" -c 'import pathlib, sys, pytriton; print(pathlib.Path(pytriton.__file__).parent, f"{sys.version_info[0]}.{sys.version_info[1]}")')
stub="$pytriton/tritonserver/python_backend_stubs/$minor/triton_python_backend_stub"
[ -f "$stub" ] || skip "nvidia-pytriton 0.7.0 has no Python backend stub for Python $minor (it has 3.8 to 3.13)"
libs="$pytriton/../nvidia_pytriton.libs"
missing=$(LD_LIBRARY_PATH="$libs" ldd "$stub" "$pytriton/tritonserver/bin/tritonserver" 2>&1 | grep "not found" | sort -u || true)
[ -z "$missing" ] || skip "the wheel's tritonserver or Python backend stub lacks shared libraries here: $(echo $missing)" \
  "(the stub needs libpython$minor.so.1.0: apt-get install libpython$minor)"

# The grove package from this build (a copy, so the source tree stays clean).
rm -rf "$TEST_TMP/src"
mkdir -p "$TEST_TMP/src"
cp -r "$SOURCE_DIR/python/grove" "$SOURCE_DIR/python/pyproject.toml" "$SOURCE_DIR/python/setup.py" "$TEST_TMP/src/"
rm -f "$TEST_TMP/src/grove/libgrove.so"
GROVE_BUILD_DIR="$(cd "$GROVE_BUILD_DIR" && pwd)" "$py" -m pip install -q --disable-pip-version-check --no-deps \
  --no-build-isolation --force-reinstall "$TEST_TMP/src"

rm -rf "$TEST_TMP/repo" "$TEST_TMP/grove_run"
bash "$here/prepare_repository.sh" "$GROVE_BIN" "$TEST_TMP/repo"
# Exported models with configs written by make_config.py from their
# declarations (batched, a scalar output, data-dependent shapes).
for model in cnn early_exit list_decoder; do
  "$GROVE_BIN" import "$SOURCE_DIR/test/models/$model/model.onnx" -o "$TEST_TMP/$model.grove" >/dev/null
  "$py" "$here/make_config.py" "$TEST_TMP/$model.grove" "$TEST_TMP/repo" "$model" --instances 1
done

# Whatever ends this script, no server outlives it: test_triton.py stops the
# server's process group itself and removes server.pid; this trap covers a
# pytest that dies first.
cleanup() {
  if [ -f "$TEST_TMP/server.pid" ]; then
    kill -TERM -- "-$(cat "$TEST_TMP/server.pid")" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$(cat "$TEST_TMP/server.pid")" 2>/dev/null || true
    rm -f "$TEST_TMP/server.pid"
  fi
}
trap cleanup EXIT INT TERM

cd "$TEST_TMP"
unset GROVE_LIBRARY
TRITON_REPO="$TEST_TMP/repo" SERVE="$here/serve.sh" GROVE_BIN="$GROVE_BIN" TEST_TMP="$TEST_TMP" \
  "$py" -m pytest -q -s -p no:cacheprovider "$here/tests/test_triton.py" "$@"
