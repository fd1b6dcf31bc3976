#!/usr/bin/env bash
# The one-call GPU check: builds grove (or uses a prebuilt bundle), runs the
# GPU tests (every op and every test model on CUDA against the CPU), the GPU
# benchmarks and the kernel-cache round trip, and writes OUTDIR/summary.json
# with logs beside it (9 files). Exit status 0 when every GPU test passed.
#
#   bench/gpu/check.sh OUTDIR                   # build here (needs the build deps)
#   GROVE_BUNDLE=DIR bench/gpu/check.sh OUTDIR  # binaries from bench/gpu/bundle.sh
set -uo pipefail
OUT=${1:?usage: bench/gpu/check.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
log() { echo "[check $(date +%H:%M:%S)] $*" >&2; }

if [ -n "${GROVE_BUNDLE:-}" ]; then
  BUNDLE=$(cd "$GROVE_BUNDLE" && pwd)
  TESTS=$BUNDLE/grove_cuda_tests GPU_BENCH=$BUNDLE/gpu_bench JIT_BENCH=$BUNDLE/jit_bench
  GROVE=$BUNDLE/grove MAKE_MODELS=$BUNDLE/grove_make_models BUILD=$BUNDLE
  # CUDA's own libraries come from the machine (toolkit or the CUDA wheels).
  cuda_libs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
              /usr/local/lib/python3*/dist-packages/nvidia/*/lib /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib \
              2>/dev/null | tr '\n' ':')
  export LD_LIBRARY_PATH="$BUNDLE/lib:${cuda_libs}${LD_LIBRARY_PATH:-}"
else
  BUILD=${GROVE_BUILD_DIR:-$ROOT/build-gpu}
  log "building in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" --target grove_cuda_tests gpu_bench jit_bench grove_cli grove_make_models \
      >> "$OUT/build.log" 2>&1 || { log "build failed (see build.log)"; tail -30 "$OUT/build.log"; exit 1; }
  TESTS=$BUILD/test/grove_cuda_tests GPU_BENCH=$BUILD/bench/gpu_bench JIT_BENCH=$BUILD/bench/jit_bench
  GROVE=$BUILD/grove MAKE_MODELS=$BUILD/examples/grove_make_models
fi
export GROVE_SOURCE_DIR=$ROOT GROVE_TEST_TMP=$WORK/tmp GROVE_CACHE_DIR=$WORK/cache
mkdir -p "$GROVE_TEST_TMP"
(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi failed") > "$OUT/gpu.txt"
log "GPU: $(cat "$OUT/gpu.txt")"

# The GPU tests in GROVE_GPU_SHARDS processes side by side on the one GPU
# (most of their time is NVRTC compiling kernels on the host), each with its
# own temporary folder and kernel cache; GPU_TEST_FILTER narrows them.
SHARDS=${GROVE_GPU_SHARDS:-$(( $(nproc) > 1 ? $(nproc) / 2 : 1 ))}
log "GPU tests (GROVE_TEST_DEVICE=cuda) in $SHARDS shards"
mkdir -p "$WORK/shards"
for ((i = 0; i < SHARDS; i++)); do
  mkdir -p "$WORK/shards/tmp$i"
  GROVE_TEST_TMP=$WORK/shards/tmp$i GROVE_CACHE_DIR=$WORK/shards/tmp$i/cache GROVE_TEST_DEVICE=cuda GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i timeout "${GPU_TEST_TIMEOUT:-300}" \
    "$TESTS" --gtest_filter="${GPU_TEST_FILTER:-*}" --gtest_output=json:"$WORK/shards/$i.json" \
    > "$WORK/shards/$i.log" 2>&1 &
done
tests_rc=0
for job in $(jobs -p); do wait "$job" || tests_rc=1; done
cat "$WORK"/shards/*.log > "$OUT/gpu_tests.log"
python3 - "$WORK/shards" "$OUT/gpu_tests.json" "$SHARDS" <<'PY'
import glob, json, sys
merged = {"tests": 0, "failures": 0, "errors": 0, "testsuites": [], "missing_shards": []}
for i in range(int(sys.argv[3])):
    try:
        t = json.load(open(f"{sys.argv[1]}/{i}.json"))
    except Exception:
        merged["missing_shards"].append(i)  # crashed or timed out: see gpu_tests.log
        continue
    for k in ("tests", "failures", "errors"):
        merged[k] += t.get(k, 0)
    merged["testsuites"] += t["testsuites"]
json.dump(merged, open(sys.argv[2], "w"), indent=1)
PY
log "GPU tests exit $tests_rc; $(grep -cE '^\[       OK \]' "$OUT/gpu_tests.log") ok, $(grep -E '^\[  FAILED  \] [A-Za-z]' "$OUT/gpu_tests.log" | sort -u | wc -l) failed"

# Shared-memory races and barrier misuse in the tiled attention kernels (the
# emulated device runs a block's threads in lockstep between barriers, so CI
# cannot see a tile overwritten before every warp has read it):
# compute-sanitizer's racecheck and synccheck over the tiled attention cases,
# where the toolkit has it. RACECHECK_FILTER narrows them; SKIP_RACECHECK=1.
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ "${SKIP_RACECHECK:-0}" != 1 ] && [ -n "$SANITIZER" ]; then
  for tool in racecheck synccheck; do
    log "compute-sanitizer --tool $tool"
    GROVE_TEST_DEVICE=cuda timeout "${RACECHECK_TIMEOUT:-150}" "$SANITIZER" --tool "$tool" \
      "$TESTS" --gtest_filter="${RACECHECK_FILTER:-TiledShapes/CudaAttentionTest.HalvesMatch*}" \
      >> "$OUT/sanitizer.log" 2>&1 || log "compute-sanitizer $tool exit $?"
  done
else
  echo "compute-sanitizer not found (or SKIP_RACECHECK=1): not run" > "$OUT/sanitizer.log"
fi
[ "${GPU_TESTS_ONLY:-0}" = 1 ] && { rm -rf "$WORK"; exit $tests_rc; }

log "benchmarks"
timeout 200 "$GPU_BENCH" --benchmark_min_time=${GPU_BENCH_MIN_TIME:-0.2} --benchmark_filter="${GPU_BENCH_FILTER:-.}" --benchmark_format=json --benchmark_out="$OUT/gpu_bench.json" \
  > "$OUT/bench.log" 2>&1 || log "gpu_bench exit $?"
timeout 200 "$JIT_BENCH" --benchmark_format=json --benchmark_out="$OUT/jit_bench.json" \
  >> "$OUT/bench.log" 2>&1 || log "jit_bench exit $?"

log "kernel cache round trip: grove compile twice, then grove run --device cuda"
"$MAKE_MODELS" "$WORK/models" > /dev/null 2>&1
model=$(ls "$WORK"/models/*mlp*.grove 2>/dev/null | head -1)
{
  echo "== compile 1"; "$GROVE" compile "$model" --arch "sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d '.' | head -1)" --shape x=8x16 --cache-dir "$WORK/aot"
  echo "== compile 2"; "$GROVE" compile "$model" --arch "sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d '.' | head -1)" --shape x=8x16 --cache-dir "$WORK/aot"
  python3 -c "import numpy as np; np.save('$WORK/x.npy', np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16))"
  echo "== run cuda"; GROVE_CACHE_DIR=$WORK/aot "$GROVE" run "$model" --device cuda --input x="$WORK/x.npy" --repeat 20
  echo "== run cpu"; "$GROVE" run "$model" --device cpu --input x="$WORK/x.npy" --repeat 20
} > "$OUT/roundtrip.log" 2>&1

# Kernel tuning (issue 13): a dispatch table for this GPU from the exported
# transformer models' shapes (the GPT block's sequence is at most 64), then
# the same models run with and without it (tables/ ships only tables from
# such runs: copy OUTDIR/tables/*.bin there with the provenance they carry).
mkdir -p "$OUT/tables"
[ "${SKIP_TUNE:-0}" = 1 ] && echo "SKIP_TUNE=1: not tuned" > "$OUT/tune.log"
[ "${SKIP_TUNE:-0}" = 1 ] || {
arch="sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d '.' | head -1)"
{
  for spec in "gpt_block ids=1x1 seq=1:64" "transformer_encoder x=1x1x32 seq=1:512"; do
    set -- $spec
    [[ ",${TUNE_MODELS:-gpt_block,transformer_encoder}," == *",$1,"* ]] || continue
    "$GROVE" import "$ROOT/test/models/$1/model.onnx" -o "$WORK/$1.grove" || continue
    echo "== tune $1"
    timeout "${TUNE_TIMEOUT:-240}" "$GROVE" tune "$WORK/$1.grove" --shape "$2" --sweep "$3" --top-k 4 -o "$OUT/tables/${arch}_$1.bin"
    if [ -f "$OUT/tables/${arch}_$1.bin" ]; then
      echo "== bench $1 without and with the table"
      timeout 120 "$GROVE" bench "$WORK/$1.grove" --device cuda --shape "$2" --sweep "$3:7" --iterations 20
      timeout 120 "$GROVE" bench "$WORK/$1.grove" --device cuda --shape "$2" --sweep "$3:7" --iterations 20 \
        --kernel-table "$OUT/tables/${arch}_$1.bin"
    fi
  done
} > "$OUT/tune.log" 2>&1 || log "tune exit $?"
}

# Peers (issue 12, item 8): PyTorch eager and torch.compile against grove on
# this GPU, where the machine's Python has PyTorch with CUDA.
# TUNE_MODELS and TUNE_TIMEOUT narrow the tuning above; COMPARE_MODELS and
# COMPARE_DECODE narrow this (torch.compile's compiles take
# most of its time).
if [ "${SKIP_COMPARE:-0}" != 1 ] && python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  log "peers: bench/gpu/compare.py"
  GROVE_LIBRARY=$BUILD/libgrove.so PYTHONUNBUFFERED=1 timeout "${COMPARE_TIMEOUT:-300}" python3 "$ROOT/bench/gpu/compare.py" \
    --build "$BUILD" --repeats 20 --models "${COMPARE_MODELS:-gpt_block,transformer_encoder,early_exit,loop_decoder,cnn,lstm}" \
    --decode "${COMPARE_DECODE:-64}" --json "$OUT/compare.json" > "$OUT/compare.log" 2>&1 || log "compare.py exit $?"
else
  echo "no PyTorch with CUDA here (or SKIP_COMPARE=1): compare.py not run" > "$OUT/compare.log"
fi

python3 "$ROOT/bench/gpu/summarize.py" "$OUT" "$tests_rc"
rm -rf "$WORK"
exit $tests_rc
