# `grove tune`: the dry run lists the search space anywhere; without a GPU a
# real run says so and exits 1; on the emulated device the timing loop runs
# and writes a table (provenance: emulated) that run and inspect then use via
# --kernel-table; corrupt tables are refused with a message.
source "$(dirname "$0")/common.bash"
make_models
make_inputs
G=$GROVE_BIN

# --- the search space, no GPU needed ------------------------------------------
if expect_ok "$G" tune "$MODELS/mlp.grove" --shape x=8x16 --dry-run --top-k 2; then
  expect_stdout '^search space on sm_90 \(dry run\): [0-9]+ buckets, [0-9]+ variants \(top-k 2\)$'
  # The MLP's two GEMMs (x @ fc1: m=8 k=16 n=32; then k=32 n=4): cuBLASLt's first two answers each.
  expect_stdout '^gemm f32 batch=1,k=16,m=8,n=32 \(problem batch=1,k=16,m=8,n=32\): gemm__f32__algo0 \[generic\] gemm__f32__algo1$'
  expect_stdout '^gemm f32 batch=1,k=32,m=8,n=4 '
fi
# A sweep: each bucket once (batch 1..20: m = 1..8 each, then 16 and 32, per GEMM).
# Planned as a GPU session with graphs plans: a session's shape bucket (batch
# 9..16, then 17..32) is planned at its bound first, so the table's bucket is
# first met at the bound's problem.
if expect_ok "$G" tune "$MODELS/mlp.grove" --sweep batch=1:20 --dry-run --arch sm_80; then
  expect_stdout '^search space on sm_80 \(dry run\): '
  [ "$(grep -c '^gemm f32 batch=1,k=16,m=' "$OUT")" -eq 10 ] || { fail "10 buckets of fc1's GEMM expected"; show tune sweep; }
  expect_stdout '^gemm f32 batch=1,k=16,m=16,n=32 \(problem batch=1,k=16,m=16,n=32\)'
  expect_stdout '^gemm f32 batch=1,k=16,m=32,n=32 \(problem batch=1,k=16,m=32,n=32\)'
fi

# --- timing: a GPU, or the emulated device --------------------------------------
capture "$G" tune "$MODELS/mlp.grove" --shape x=8x16 -o "$TEST_TMP/gpu.bin" --repeats 3
if [ "$RC" -eq 0 ]; then
  echo "note: a GPU is here; tuned on it" >&2
  [ -s "$TEST_TMP/gpu.bin" ] || fail "tune on a GPU wrote no table"
else
  [ "$RC" -eq 1 ] || { fail "tune without a GPU should exit 1"; show tune; }
  grep -qE 'grove: error: tune: no CUDA GPU here .*--dry-run lists the search space' "$ERR" ||
    { fail "tune without a GPU should say so"; show tune; }
  [ ! -e "$TEST_TMP/gpu.bin" ] || fail "tune without a GPU wrote a table"
fi

# 13 rows: the session's bucket (9..16) is planned at its bound, m=16; the
# timing session (graphs off) poses that problem at the bound's shapes.
if expect_ok "$G" tune "$MODELS/mlp.grove" --shape x=13x16 --device emulated-cuda -o "$TEST_TMP/bound.bin" \
    --top-k 1 --warmup 0 --repeats 1; then
  grep -qE '^tune: \[[0-9]+\] gemm f32 batch=1,k=16,m=16,n=32 \(problem batch=1,k=16,m=16,n=32\): 1 variants, best gemm__f32__algo0 [0-9.]+ us' "$ERR" ||
    { fail "tune should time the bound's GEMM"; show tune bound; }
  expect_stdout "^tuned ([1-9][0-9]*) of \\1 buckets on emulated CUDA device"
fi

TABLE=$TEST_TMP/emulated.bin
if expect_ok "$G" tune "$MODELS/mlp.grove" --shape x=16x16 --device emulated-cuda -o "$TABLE" --top-k 2 \
    --warmup 1 --repeats 3; then
  expect_stdout "^tuned [1-9][0-9]* of [1-9][0-9]* buckets on emulated CUDA device.*; table: $TABLE\$"
  grep -qE '^tune: \[[0-9]+\] gemm f32 batch=1,k=16,m=16,n=32 \(problem batch=1,k=16,m=16,n=32\): 2 variants(, best gemm__f32__algo[01] [0-9.]+ us|, none timed)' "$ERR" ||
    { fail "tune should print a progress line per bucket"; show tune emulated; }
  [ -s "$TABLE" ] || fail "tune wrote no table"
fi
# The table reaches the dispatcher: inspect shows steps' choices from it (a
# member of a tuned bucket: m=13 is in m=16's).
if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=13x16 --device cuda --kernel-table "$TABLE" --json; then
  expect_stdout '"source":"table","problem":"[a-z0-9=,]*m=13[a-z0-9=,]*","bucket":"[a-z0-9=,]*m=16[a-z0-9=,]*"'
fi
if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=13x16 --device cuda; then
  expect_stdout 'kernel gemm__f32 \(generic, batch=1,k=16,m=13,n=32\)'
fi
expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device emulated-cuda --kernel-table "$TABLE"
expect_ok "$G" bench "$MODELS/mlp.grove" --shape x=4x16 --iterations 2 --device emulated-cuda --kernel-table "$TABLE"
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=13x16 --cache-dir "$TEST_TMP/cache" \
    --kernel-table "$TABLE"; then
  expect_stdout '^kernel variants chosen: [0-9]+ \(table [1-9][0-9]*, '
fi

# --- bad tables and usage -------------------------------------------------------
head -c 40 "$TABLE" >"$TEST_TMP/truncated.bin"
expect_fail 1 "truncated.bin: not a valid kernel table" \
  "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device emulated-cuda --kernel-table "$TEST_TMP/truncated.bin"
expect_fail 1 "none.bin: cannot be read" \
  "$G" inspect "$MODELS/mlp.grove" --shape x=7x16 --device cuda --kernel-table "$TEST_TMP/none.bin"
expect_fail 2 "--kernel-table goes with --device cuda" "$G" inspect "$MODELS/mlp.grove" --kernel-table "$TABLE"
expect_fail 2 "tune: -o TABLE.bin is required" "$G" tune "$MODELS/mlp.grove" --shape x=8x16
expect_fail 2 "tune: --dry-run writes no table" "$G" tune "$MODELS/mlp.grove" --shape x=8x16 --dry-run -o "$TABLE"
expect_fail 2 "--top-k wants 1 to 64" "$G" tune "$MODELS/mlp.grove" --shape x=8x16 --dry-run --top-k 0
expect_fail 2 "tune: --device takes emulated-cuda" "$G" tune "$MODELS/mlp.grove" --shape x=8x16 --device cpu -o "$TABLE"
expect_fail 2 "tune: --arch goes with --dry-run" "$G" tune "$MODELS/mlp.grove" --shape x=8x16 --arch sm_90 -o "$TABLE"
expect_fail 1 "missing|no value" "$G" tune "$MODELS/mlp.grove" --dry-run
expect_fail 1 "cannot load model" "$G" tune "$TEST_TMP/none.grove" --shape x=8x16 --dry-run
finish
