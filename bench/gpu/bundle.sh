#!/usr/bin/env bash
# Packs what bench/gpu/check.sh runs (the GPU tests, the benchmarks, the CLI)
# with the shared libraries they need that a bare CUDA machine lacks (Abseil,
# OpenBLAS, ONNX, Protobuf...; not libc, not CUDA's own), for a GPU machine
# without grove's build dependencies:
#   bench/gpu/bundle.sh BUILD_DIR OUT_DIR
#   GROVE_BUNDLE=OUT_DIR bench/gpu/check.sh RESULTS   # on the GPU machine
set -euo pipefail
BUILD=${1:?usage: bench/gpu/bundle.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: bench/gpu/bundle.sh BUILD_DIR OUT_DIR}
rm -rf "$OUT"
mkdir -p "$OUT/lib"
for bin in test/grove_cuda_tests bench/gpu_bench bench/jit_bench grove examples/grove_make_models; do
  cp "$BUILD/$bin" "$OUT/"
  strip "$OUT/$(basename "$bin")"
done
# compare.py loads libgrove.so through the Python package; the CPU backend
# dlopens OpenBLAS; `grove import` dlopens the ONNX importer beside the binary.
cp "$BUILD/libgrove.so" "$BUILD/libgrove_onnx_import.so" "$OUT/" && strip "$OUT"/*.so
cp -L "$(ldconfig -p | awk '/libopenblas.so.0 .*x86-64/ {print $NF; exit}')" "$OUT/lib/libopenblas.so.0" 2>/dev/null || true
for bin in "$OUT"/*; do
  [ -f "$bin" ] || continue
  ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcu*|libnvrtc*|libnvJitLink*) ;;  # CUDA's own: from the GPU machine
      *) cp -Ln "$lib" "$OUT/lib/" ;;
    esac
  done
done
du -sh "$OUT"
