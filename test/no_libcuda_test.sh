#!/usr/bin/env bash
# grove never links libcuda (the driver is loaded on first use), so every
# binary starts on a machine without it: no file given here may list
# libcuda.so* as NEEDED, directly or through another library it needs.
#   test/no_libcuda_test.sh BINARY_OR_LIBRARY...
set -euo pipefail
status=0
for f in "$@"; do
  if [ ! -e "$f" ]; then
    echo "no_libcuda: $f: not built"; status=1; continue
  fi
  if readelf -d "$f" | grep -E 'NEEDED.*\[libcuda\.so' >/dev/null; then
    echo "no_libcuda: $f links libcuda directly:"; readelf -d "$f" | grep NEEDED; status=1
  elif ldd "$f" 2>/dev/null | grep -E '^\s*libcuda\.so' >/dev/null; then
    echo "no_libcuda: $f needs libcuda through:"; ldd "$f"; status=1
  fi
done
[ $status -eq 0 ] && echo "no_libcuda: $# files, none needs libcuda"
exit $status
