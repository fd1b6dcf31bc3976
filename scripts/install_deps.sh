#!/usr/bin/env bash
# Installs the Debian packages grove builds with, only those missing.
set -euo pipefail
packages=(cmake make g++ pkg-config libabsl-dev libflatbuffers-dev flatbuffers-compiler
          libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libdnnl-dev
          libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata libdlpack-dev
          python3 python3-venv  # ctest python.package (its venv pip-installs numpy and pytest)
          libpython3.11  # ctest examples.triton: the wheel's Python backend stub embeds Debian 12's libpython (2 MB)
          clang libclang-rt-14-dev lld binutils)  # the sanitizer and fuzz builds (clang's runtimes, its linker, readelf)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "grove: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
