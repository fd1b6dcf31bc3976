#!/usr/bin/env bash
# grove links no CUDA library: the driver (libcuda), NVRTC and cuBLASLt are
# loaded on first use (jit/shared_library.h), so every binary starts, runs on
# the CPU and compiles nothing CUDA on a machine without them: no file given
# here may list libcuda, libnvrtc or libcublas* as NEEDED, directly or
# through another library it needs.
#   test/no_libcuda_test.sh BINARY_OR_LIBRARY...
set -euo pipefail
status=0
cuda_libs='(libcuda|libnvrtc|libcublas(Lt)?)\.so'
for f in "$@"; do
  if [ ! -e "$f" ]; then
    echo "no_libcuda: $f: not built"; status=1; continue
  fi
  if readelf -d "$f" | grep -E "NEEDED.*\[$cuda_libs" >/dev/null; then
    echo "no_libcuda: $f links a CUDA library directly:"; readelf -d "$f" | grep NEEDED; status=1
  elif ldd "$f" 2>/dev/null | grep -E "^\s*$cuda_libs" >/dev/null; then
    echo "no_libcuda: $f needs a CUDA library through:"; ldd "$f"; status=1
  fi
done
[ $status -eq 0 ] && echo "no_libcuda: $# files, none needs libcuda, libnvrtc or libcublas"
exit $status
