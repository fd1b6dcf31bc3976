#!/usr/bin/env bash
# Starts Triton Inference Server on a grove model repository, with the server
# binary and Python backend that PyPI's nvidia-pytriton wheel ships (no
# container, no GPU needed: the configs use KIND_CPU instances).
#
#   python3 -m venv venv && venv/bin/pip install nvidia-pytriton==0.7.0 ./python
#   examples/triton/prepare_repository.sh build/grove /tmp/grove_repo
#   PYTHON=venv/bin/python examples/triton/serve.sh /tmp/grove_repo [tritonserver flags...]
#
# PYTHON (default python3) is the interpreter whose site-packages hold
# nvidia-pytriton, numpy and grove; the Python backend's stub (built for
# that Python's minor version) imports them from there. Extra arguments go to
# tritonserver (--http-port, --grpc-port, --http-address, ...). Runs in the
# foreground: exec, so the caller's signal reaches the server.
set -euo pipefail
repo=${1:?usage: serve.sh MODEL_REPOSITORY [tritonserver flags...]}
shift
py=${PYTHON:-python3}

# Where the wheel put things, and the stub for this Python (3.8 .. 3.13).
read -r pytriton site libs minor < <("$py" - <<'PY'
import pathlib, sys, sysconfig
import pytriton
root = pathlib.Path(pytriton.__file__).resolve().parent
print(root, sysconfig.get_paths()["purelib"], root.parent / "nvidia_pytriton.libs", f"{sys.version_info[0]}.{sys.version_info[1]}")
PY
)
server="$pytriton/tritonserver/bin/tritonserver"
stub="$pytriton/tritonserver/python_backend_stubs/$minor/triton_python_backend_stub"
[ -x "$server" ] || { echo "serve.sh: no tritonserver at $server" >&2; exit 2; }
[ -f "$stub" ] || { echo "serve.sh: nvidia-pytriton has no Python backend stub for Python $minor" >&2; exit 2; }

# The Python backend looks for its stub beside libtriton_python.so: make a
# backends folder of our own (the wheel's is shared and has no stub):
# GROVE_TRITON_BACKENDS, default one per wheel install in the user's cache.
# Files are replaced by rename, never rewritten in place, so a server
# already running from the folder keeps its stub.
key=$(printf '%s' "$pytriton" | cksum | cut -d' ' -f1)
backends=${GROVE_TRITON_BACKENDS:-${XDG_CACHE_HOME:-$HOME/.cache}/grove/triton-backends/$key}
mkdir -p "$backends/python"
install_file() {  # SOURCE TARGET
  cmp -s "$1" "$2" && return 0
  cp "$1" "$2.tmp.$$" && chmod +x "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"
}
for f in "$pytriton/tritonserver/backends/python/"*; do
  [ -f "$f" ] && install_file "$f" "$backends/python/$(basename "$f")"
done
install_file "$stub" "$backends/python/triton_python_backend_stub"

# The stub embeds libpython$minor and imports grove and numpy from $py's
# site-packages.
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$(dirname "$(command -v "$py")"):$PATH"
exec "$server" --model-repository="$repo" --backend-directory="$backends" \
  --cache-directory="$pytriton/tritonserver/caches" "$@"
