#!/usr/bin/env bash
# ctest bench.gpu_check_smoke: bench/gpu/check.sh end to end where there is no
# GPU, so that a machine lent for a few minutes does not spend them on the
# script's own mistakes:
#   1. summarize.py on a made-up OUTDIR: its ratios from known times, a failed
#      benchmark (no time) left out of them rather than dividing by zero, and a
#      missing file named in its section;
#   2. check.sh itself in bundle mode over this build's binaries (symbolic
#      links, as bench/gpu/bundle.sh would pack them), narrowed to a few tests
#      and benchmarks: it must write summary.json with every section and no
#      Python traceback. Without a GPU the tests skip and the benchmarks fail
#      (that is what it checks: the summary survives them).
#
#   bench/gpu/smoke_test.sh BUILD_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:?usage: bench/gpu/smoke_test.sh BUILD_DIR}"
build="$(cd "$build" && pwd)"
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
# What check.sh runs from a bundle (bench/gpu/bundle.sh packs the same).
bins=(test/grove_cuda_tests bench/gpu_bench bench/jit_bench grove examples/grove_make_models libgrove.so)
for bin in "${bins[@]}"; do
  [ -e "$build/$bin" ] || { echo "SKIPPED: no $build/$bin (a build without CUDA or tests)"; exit 77; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0

# 1. The summary from made-up results.
out="$tmp/made_up"
mkdir -p "$out/tables"
echo "NVIDIA H200, 570.00, 143771 MiB" > "$out/gpu.txt"
cat > "$out/gpu_tests.json" <<'JSON'
{"tests": 2, "failures": 1, "errors": 0, "testsuites": [{"name": "Suite", "testsuite": [
  {"name": "Passes"}, {"name": "Fails", "failures": [{"failure": "x"}]}]}]}
JSON
python3 - "$out/gpu_bench.json" <<'PY'
import json, sys
def b(name, us, **extra):
    return dict(name=name, real_time=us, time_unit="us", **extra)
json.dump({"benchmarks": [
    b("BM_MatMul_Grove/64/real_time", 10.0), b("BM_MatMul_Cublas/64/real_time", 5.0),
    b("BM_MatMul_Grove/128/real_time", 10.0),
    b("BM_MatMul_Cublas/128/real_time", 0.0, error_occurred=True, error_message="cuBLAS failed"),
    b("BM_SmallM_Cuda/1/768/768/1/real_time", 32.0, label="gemv ksplit4"),
    b("BM_SmallM_Cuda/1/768/768/0/real_time", 48.0),
    b("BM_Attention_Cuda/256/0/real_time", 90.0), b("BM_Attention_Cuda/256/1/real_time", 30.0),
    b("BM_Attention_Cuda/256/2/real_time", 30.0), b("BM_Attention_Cuda/256/3/real_time", 45.0),
    b("BM_Chain200_Graphs/real_time", 100.0), b("BM_Chain200_Eager/real_time", 1000.0),
    b("BM_GrowingSeq_Eager/real_time", 8.0), b("BM_GrowingSeq_Buckets/real_time", 2.0, graphs_captured=7),
]}, open(sys.argv[1], "w"))
PY
echo "========= ERROR SUMMARY: 0 errors" > "$out/sanitizer.log"
printf '== compile 1\ncompiled 3 modules\n' > "$out/roundtrip.log"
echo "SKIP_TUNE=1: not tuned" > "$out/tune.log"
# (no jit_bench.json, no compare.log: each is named in its section)
if ! python3 "$here/summarize.py" "$out" 1 > "$tmp/made_up.log" 2>&1; then
  echo "FAIL: summarize.py on made-up results:"; tail -20 "$tmp/made_up.log"; fail=1
elif ! python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
want = {
    "tests_exit": 1,
    "tests": {"total": 2, "failed": 1, "errors": 0, "failed_names": ["Suite.Fails"]},
    "matmul_vs_cublas": {"64/real_time": {"grove_us": 10.0, "cublas_us": 5.0, "ratio": 2.0}},
    "small_m_gemv_vs_cublaslt": {"M=1 N=768 K=768": {"gemv_us": 2.0, "cublaslt_us": 3.0, "variant": "gemv ksplit4",
                                                     "speedup": 1.5}},
    "attention_fused_vs_unfused": {"Attention/S=256": {"fused_us": 30.0, "unfused_us": 90.0, "speedup": 3.0,
                                                       "kernel_form_us": 30.0, "gemm_form_us": 45.0}},
}
bad = [k for k, v in want.items() if s.get(k) != v]
p1 = s.get("graphs_p1", {})
if p1.get("chain_replay_over_launched") != 0.1:
    bad.append("graphs_p1")
if s.get("growing_sequence", {}).get("buckets", {}).get("vs_eager") != 0.25:
    bad.append("growing_sequence")
if s.get("gpu_bench", {}).get("BM_MatMul_Cublas/128/real_time", {}).get("error") != "cuBLAS failed":
    bad.append("gpu_bench (the failed benchmark listed with its error)")
if "error" not in s.get("jit_bench", {}):
    bad.append("jit_bench (the missing file named)")
if s.get("sanitizer") != ["========= ERROR SUMMARY: 0 errors"]:
    bad.append("sanitizer")
for k in bad:
    print(f"FAIL: summary.json's {k}: {json.dumps(s.get(k))}")
sys.exit(1 if bad else 0)
PY
then
  fail=1
else
  echo "ok: summarize.py on made-up results"
fi

# 2. check.sh over this build, narrowed.
bundle="$tmp/bundle"
mkdir -p "$bundle/lib"
for bin in "${bins[@]}" libgrove_onnx_import.so; do  # (the importer is optional)
  [ -e "$build/$bin" ] && ln -s "$build/$bin" "$bundle/$(basename "$bin")"
done
GROVE_BUNDLE="$bundle" GPU_TEST_FILTER='CudaAttentionKernelTest.*' GPU_TEST_TIMEOUT=120 GROVE_GPU_SHARDS=1 \
  GPU_BENCH_FILTER='SmallM_Cuda/1/768/768|MatMul_Grove/64|Chain200' GPU_BENCH_MIN_TIME=0.01 \
  SKIP_TUNE=1 SKIP_COMPARE=1 SKIP_RACECHECK=1 \
  bash "$here/check.sh" "$tmp/check" > "$tmp/check.log" 2>&1
rc=$?
if grep -q "Traceback" "$tmp/check.log"; then
  echo "FAIL: check.sh (exit $rc) printed a Python traceback:"; grep -A8 "Traceback" "$tmp/check.log" | head -20; fail=1
elif ! python3 - "$tmp/check/summary.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"FAIL: no summary.json from check.sh ({e})")
sections = ["gpu", "tests_exit", "tests", "matmul_vs_cublas", "small_m_gemv_vs_cublaslt", "attention_fused_vs_unfused",
            "graphs_p1", "growing_sequence", "tune", "peers", "gpu_bench", "jit_bench", "sanitizer", "roundtrip"]
missing = [k for k in sections if k not in s]
if missing:
    sys.exit(f"FAIL: summary.json from check.sh lacks {missing}")
if not s["gpu_bench"]:
    sys.exit("FAIL: check.sh ran no GPU benchmark (GPU_BENCH_FILTER matched none?)")
PY
then
  tail -15 "$tmp/check.log"; fail=1
else
  echo "ok: check.sh in bundle mode (exit $rc) wrote summary.json with every section"
fi
exit $fail
