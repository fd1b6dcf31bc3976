# `grove compile`: fills the kernel disk cache for an arch with no GPU, a
# second run compiles nothing, damaged entries are found and rebuilt.
source "$(dirname "$0")/common.bash"
make_models
make_inputs
G=$GROVE_BIN
CACHE=$TEST_TMP/cache
rm -rf "$CACHE"

if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 --cache-dir "$CACHE"; then
  # Each step's kernel variant (jit/kernel_config.h) spells its parameters.
  expect_stdout '^kernel modules for sm_90: 2 \(elementwise__f32__ipt[0-9]+_threads[0-9]+, softmax__f32__lanes[0-9]+_threads[0-9]+\)$'
  expect_stdout '^compiled 2, found in cache 0, found corrupt 0, stale 0; NVRTC time [0-9.]+ ms$'
  expect_stdout "^cache: $CACHE\$"
fi
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 --cache-dir "$CACHE"; then
  expect_stdout '^compiled 0, found in cache 2, found corrupt 0, stale 0; NVRTC time 0.0 ms$'
fi
[ "$(ls "$CACHE"/*.cubin 2>/dev/null | wc -l)" -eq 2 ] || fail "the cache should hold 2 entries"

# Damage both entries: one truncated, one with a flipped byte.
set -- "$CACHE"/*.cubin
truncate -s 100 "$1"
printf '\xff' | dd of="$2" bs=1 seek=300 conv=notrunc status=none
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 --cache-dir "$CACHE"; then
  expect_stdout '^compiled 2, found in cache 0, found corrupt 2, stale 0; '
fi
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 --cache-dir "$CACHE"; then
  expect_stdout '^compiled 0, found in cache 2, found corrupt 0'
fi

# Another arch is another key.
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_80 --shape x=8x16 --cache-dir "$CACHE"; then
  expect_stdout '^compiled 2, found in cache 0'
fi
# --sweep: the union of the variants chosen over a symbol's range, counted
# per kernel file; a second run compiles nothing.
SWEEP_CACHE=$TEST_TMP/sweep_cache
rm -rf "$SWEEP_CACHE"
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --sweep batch=1:300:13 --cache-dir "$SWEEP_CACHE"; then
  expect_stdout '^kernel modules for sm_90 over batch=1\.\.300 \(24 shapes\): [0-9]+ \(elementwise__f32__ipt'
  expect_stdout '^variant modules per kernel file: elementwise [0-9]+, softmax [0-9]+$'
  expect_stdout '^compiled [1-9][0-9]*, found in cache [0-9]+, found corrupt 0, stale 0'
  compiled=$(grep -oE '^kernel modules for sm_90 over [^:]*: [0-9]+' "$OUT" | grep -oE '[0-9]+$')
  [ "$(ls "$SWEEP_CACHE"/*.cubin | wc -l)" -eq "$compiled" ] || fail "the cache should hold the $compiled modules listed"
fi
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --sweep batch=1:300:13 --cache-dir "$SWEEP_CACHE"; then
  expect_stdout '^compiled 0, found in cache [1-9][0-9]*, found corrupt 0, stale 0; NVRTC time 0.0 ms$'
fi
expect_fail 2 "--sweep wants SYMBOL=LO:HI" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --sweep batch=5 --cache-dir "$SWEEP_CACHE"
expect_fail 1 "--sweep names 'seq', which is no symbol" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --sweep seq=1:4 \
  --cache-dir "$SWEEP_CACHE"
expect_fail 1 "outside batch's range" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --sweep batch=1:2000 \
  --cache-dir "$SWEEP_CACHE"
expect_fail 2 "does not go with --all" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --sweep batch=1:4 --all

# Control flow: the dry run takes one path and says so.
if expect_ok "$G" compile "$MODELS/early_exit.grove" --arch sm_90 --shape x=2x8 --cache-dir "$CACHE"; then
  expect_stdout '^note: the model branches on data'
fi

# --- errors --------------------------------------------------------------------
expect_fail 2 "compile: --arch is required" "$G" compile "$MODELS/mlp.grove" --shape x=8x16
expect_fail 2 "compile: missing MODEL.grove" "$G" compile --arch sm_90
expect_fail 1 "missing --shape for 'x'" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --cache-dir "$CACHE"
expect_fail 1 "compile failed: .*arch" "$G" compile "$MODELS/mlp.grove" --arch sm_1 --shape x=8x16 --cache-dir "$CACHE"
expect_fail 1 "compile failed: .*" "$G" compile "$MODELS/mlp.grove" --arch banana --shape x=8x16 --cache-dir "$CACHE"
expect_fail 1 "cannot load model" "$G" compile "$TEST_TMP/none.grove" --arch sm_90

# NVRTC is loaded on first use: without it `compile` fails naming it, and
# what needs no CUDA library still runs.
expect_fail 1 "cannot load NVRTC \($TEST_TMP/no_nvrtc.so \(GROVE_NVRTC_LIBRARY\)\)" \
  env GROVE_NVRTC_LIBRARY="$TEST_TMP/no_nvrtc.so" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 \
  --cache-dir "$TEST_TMP/empty_cache"
expect_ok env GROVE_NVRTC_LIBRARY="$TEST_TMP/no_nvrtc.so" GROVE_CUBLASLT_LIBRARY="$TEST_TMP/no_cublaslt.so" \
  "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device cpu
finish
