# --threads N of `grove run` and `grove bench` (SessionOptions::intra_op_threads):
# the transformer demo at a size whose attention scores, Softmax, LayerNorm
# and elementwise ops split over threads gives the same output bytes at 1, 2
# and 3 threads; bench takes the flag; bad values are usage errors (exit 2).
source "$(dirname "$0")/common.bash"
make_models
G=$GROVE_BIN

# x f32[4, 512, 32]: 65,536 elements, scores 4x512x512.
BIG="$TEST_TMP/transformer_x_4x512.npy"
write_npy "$BIG" '<f4' '(4, 512, 32)' "$(f32_data 65536)"

for threads in 1 2 3 0; do
  if expect_ok "$G" run "$MODELS/transformer.grove" --input "x=$BIG" --device cpu --threads "$threads" \
      --output-dir "$TEST_TMP/out_$threads"; then
    expect_stdout '^y: f32\[4,512,32\]'
  fi
done
for threads in 2 3 0; do
  if ! cmp -s "$TEST_TMP/out_1/y.npy" "$TEST_TMP/out_$threads/y.npy"; then
    fail "run --threads $threads wrote other bytes than --threads 1"
  fi
done

if expect_ok "$G" bench "$MODELS/transformer.grove" --shape x=4x512x32 --iterations 2 --warmup 1 --device cpu \
    --threads 2 --json; then
  if ! python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['shapes'][0]['inputs']['x'] == [4, 512, 32], d" \
      "$OUT"; then
    fail "bench --threads 2 --json: unexpected output"
  fi
fi

for bad in -1 257 two 1.5; do
  expect_fail 2 "--threads wants 1 to 256, or 0 for one per core, not '$bad'" \
    "$G" run "$MODELS/transformer.grove" --input "x=$BIG" --device cpu --threads "$bad"
  expect_fail 2 "--threads wants 1 to 256, or 0 for one per core, not '$bad'" \
    "$G" bench "$MODELS/transformer.grove" --shape x=1x8x32 --device cpu --threads "$bad"
done

if expect_ok "$G" run --help; then expect_stdout '^  --threads N +CPU: split each large kernel'; fi
if expect_ok "$G" bench --help; then expect_stdout '^  --threads N +CPU: intra-op threads'; fi

finish
