# `grove run`: the demo models on .npy inputs, saved outputs, repeats,
# devices, and every way the command line or its files can be wrong.
source "$(dirname "$0")/common.bash"
make_models
make_inputs
G=$GROVE_BIN

# --- happy paths -------------------------------------------------------------
if expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy"; then
  expect_stdout '^y: f32\[2,4\] min=[0-9.e-]+ max=[0-9.e-]+ mean=0\.25 values=\['
  expect_stdout '^time: first run [0-9.]+ ms$'
  expect_stdout '^session: device cpu, runs 1, plans created 1, plan cache hits 0'
fi

if expect_ok "$G" run "$MODELS/mlp.grove" --input="x=$INPUTS/mlp_x.npy" --repeat 4 --device cpu; then
  expect_stdout '^time: first run [0-9.]+ ms, then mean [0-9.]+ ms over 3 runs$'
  expect_stdout 'runs 4, plans created 1, plan cache hits 3'
fi

expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device auto

# Saved outputs are .npy files with the printed shape.
if expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --output-dir "$TEST_TMP/out/nested"; then
  y="$TEST_TMP/out/nested/y.npy"
  if [ ! -f "$y" ]; then
    fail "--output-dir wrote no y.npy"
  else
    [ "$(head -c 6 "$y" | tail -c 5)" = "NUMPY" ] || fail "y.npy has no .npy magic"
    grep -q "'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }" "$y" || fail "y.npy header is wrong"
    # A 128-byte header (numpy pads to 64) plus 2*4 floats.
    [ "$(wc -c <"$y")" -eq $((128 + 32)) ] || fail "y.npy has $(wc -c <"$y") bytes, want 160"
    # A saved output feeds back in as an input of the right dtype (and is
    # refused from its header for its shape).
    expect_fail 1 "y\.npy holds f32\[2,4\] but the model expects f32\[batch,16\]: dim 1 is 4, wants 16" \
      "$G" run "$MODELS/mlp.grove" --input "x=$y"
  fi
fi

if expect_ok "$G" run "$MODELS/transformer.grove" --input "x=$INPUTS/transformer_x.npy"; then
  expect_stdout '^y: f32\[2,5,32\]'
fi

# The output width depends on the data (8 deep, 3 shallow).
if expect_ok "$G" run "$MODELS/early_exit.grove" --input "x=$INPUTS/early_exit_x.npy"; then
  expect_stdout '^y: f32\[3,(8|3)\]'
fi

# make_models' sample inputs pick each branch: the shape follows the data.
if expect_ok "$G" run "$MODELS/early_exit.grove" --input "x=$MODELS/early_exit_pos.npy"; then
  expect_stdout '^y: f32\[[0-9]+,8\]'
fi
if expect_ok "$G" run "$MODELS/early_exit.grove" --input "x=$MODELS/early_exit_neg.npy"; then
  expect_stdout '^y: f32\[[0-9]+,3\]'
fi

# Scalar (0-d) inputs; a Loop; outputs whose length depends on the data.
if expect_ok "$G" run "$MODELS/loop.grove" --input "trip_count=$INPUTS/loop_trip_count.npy" \
    --input "x=$INPUTS/loop_x.npy" --input "limit=$INPUTS/loop_limit.npy" --output-dir "$TEST_TMP/loop_out"; then
  expect_stdout '^final: f32\[4\]'
  expect_stdout '^sums: f32\[[0-9]+\]'
  grep -q "'shape': (4,), }" "$TEST_TMP/loop_out/final.npy" || fail "final.npy header is wrong"
fi

# CUDA: a clear error naming the reason where there is no GPU (and auto then
# runs on the CPU); on a GPU, a normal run on it.
capture "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device cuda
if [ "$RC" -ne 0 ]; then
  expect_fail 1 "CUDA backend not available: device 'cuda' requested: no CUDA device: " \
    "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device cuda
  if expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device auto; then
    expect_stdout '^session: device cpu, '
  fi
else
  expect_stdout '^session: device cuda, '
  expect_stdout '^cuda: .*cpu fallback steps 0'
  expect_stdout '^graphs: captured 1, replays 0, held 1 '
fi
expect_fail 2 "unknown GEMM math 'fp8'" "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --gemm-math fp8
expect_fail 2 "unknown graph mode 'maybe'" "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --graphs maybe
# --graphs is a CUDA option: on the CPU it changes nothing.
expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device cpu --graphs off

# --- several cases in one session (--case) and --json ------------------------
mkdir -p "$TEST_TMP/cases/a" "$TEST_TMP/cases/b" "$TEST_TMP/other/a"
cp "$INPUTS/mlp_x.npy" "$TEST_TMP/cases/a/x.npy"
write_npy "$TEST_TMP/cases/b/x.npy" '<f4' '(3, 16)' "$(f32_data 48)"
cp "$INPUTS/mlp_x.npy" "$TEST_TMP/other/a/x.npy"
if expect_ok "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b/" \
    --output-dir "$TEST_TMP/case_out"; then
  expect_stdout '^case .*/cases/a:$'
  expect_stdout '^  y: f32\[2,4\] '
  expect_stdout '^  y: f32\[3,4\] '
  expect_stdout '^session: device cpu, runs 2, plans created 2'
  grep -q "'shape': (2, 4), }" "$TEST_TMP/case_out/a/y.npy" || fail "--case a wrote no case_out/a/y.npy of shape (2, 4)"
  grep -q "'shape': (3, 4), }" "$TEST_TMP/case_out/b/y.npy" || fail "--case b wrote no case_out/b/y.npy of shape (3, 4)"
fi

# json_check CODE: runs python3 on the last stdout parsed as JSON (as `d`).
json_check() {
  if ! python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $1" "$OUT"; then
    fail "JSON check failed: $1"
    sed 's/^/  stdout: /' "$OUT" | head -5 >&2
  fi
}
if expect_ok "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" --case "$TEST_TMP/cases/a" \
    --repeat 2 --json --device cpu; then
  json_check '
r = d["runs"]; t = d["totals"]
assert d["device"] == "cpu" and len(r) == 6, d
assert [x["case"].rstrip("/").split("/")[-1] for x in r] == ["a", "a", "b", "b", "a", "a"], r
keys = ["graphs_captured", "graph_replays", "launches_outside_graphs", "syncs"]
for x in r:
    assert x["time_ms"] >= 0 and all(x[k] == 0 for k in keys), x
    assert x["copies"] == {"device_to_host_reads": 0, "bytes_host_to_device": 0, "bytes_device_to_host": 0}, x
assert [x["plans_created"] for x in r] == [1, 0, 1, 0, 0, 0], r
assert r[0]["outputs"] == [{"name": "y", "dtype": "f32", "shape": [2, 4]}], r[0]
assert r[2]["outputs"][0]["shape"] == [3, 4], r[2]
assert t["runs"] == 6 and t["plans_created"] == 2 and t["graph_bytes"] == 0 and t["arena_bytes"] > 0, t
assert all(t[k] == 0 for k in keys), t'
fi
# --device emulated-cuda: the CUDA path on the host emulation, graphs
# included. Cases twice over: the first pass captures one graph per shape,
# the second replays them with no kernel launched outside a graph, and the
# outputs equal the CPU's.
if expect_ok "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" \
    --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" --json --device emulated-cuda; then
  json_check '
r = d["runs"]; t = d["totals"]
assert d["device"] == "cuda" and "emulated" in d["device_description"], d
assert [x["graphs_captured"] for x in r] == [1, 1, 0, 0], r
assert [x["graph_replays"] for x in r] == [0, 0, 1, 1], r
assert all(x["launches_outside_graphs"] == 0 and x["graph_refreshes"] == 0 for x in r), r
assert t["graphs_captured"] == 2 and t["graph_bytes"] > 0, t'
fi
# --bucket: batches 2 (a) and 3 (b) in one bucket of bound 4 share one graph,
# captured once and refreshed per shape; the padding of the input's slot is
# counted. A rule that is not SYMBOL=RULE, or names no symbol, is refused.
if expect_ok "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" \
    --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" --json --device emulated-cuda --bucket batch=4,64; then
  json_check '
r = d["runs"]; t = d["totals"]
assert [x["graphs_captured"] for x in r] == [1, 0, 0, 0], r
assert [x["graph_refreshes"] for x in r] == [0, 1, 1, 1], r
assert all(x["launches_outside_graphs"] == 0 for x in r), r
assert t["buckets_made"] == 1 and t["bucket_input_bytes"] == 4 * 4 * 16 * 4, t
assert t["bucket_padding_bytes"] == (2 + 1 + 2 + 1) * 16 * 4, t
assert t["bucket_fallback_reason"] == "", t'
fi
expect_fail 2 "--bucket wants SYMBOL=RULE" "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --bucket batch
expect_fail 1 "no symbol 'seq'" "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --device emulated-cuda \
  --bucket seq=pow2
if expect_ok "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" \
      --device emulated-cuda --output-dir "$TEST_TMP/emu_out" &&
   expect_ok "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" \
      --device cpu --output-dir "$TEST_TMP/cpu_out"; then
  for c in a b; do
    python3 - "$TEST_TMP/emu_out/$c/y.npy" "$TEST_TMP/cpu_out/$c/y.npy" <<'PY' || fail "emulated-cuda case $c differs from the CPU"
import struct, sys
def floats(path):
    b = open(path, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    body = b[10 + n:]
    return struct.unpack("<%df" % (len(body) // 4), body)
x, y = floats(sys.argv[1]), floats(sys.argv[2])
assert len(x) == len(y) and len(x) > 0
assert all(abs(p - q) <= 1e-5 * (1 + abs(q)) for p, q in zip(x, y)), (x, y)
PY
  done
fi
expect_fail 2 "unknown device 'emulated' \(cpu, cuda, auto or emulated-cuda\)" \
  "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device emulated
# Without --case, one entry per --repeat with a null case; nothing else on stdout.
if expect_ok "$G" run "$MODELS/loop.grove" --input "trip_count=$INPUTS/loop_trip_count.npy" \
    --input "x=$INPUTS/loop_x.npy" --input "limit=$INPUTS/loop_limit.npy" --json --repeat 2; then
  json_check '
assert [x["case"] for x in d["runs"]] == [None, None], d
assert d["totals"]["runs"] == 2 and d["totals"]["plans_created"] >= 1, d
assert [o["name"] for o in d["runs"][1]["outputs"]] == ["final", "sums"], d'
fi

# Bad cases are refused, naming the case and the file, before anything runs.
mkdir -p "$TEST_TMP/cases/empty" "$TEST_TMP/cases/extra" "$TEST_TMP/cases/bad_dtype" "$TEST_TMP/cases/bad_shape" \
  "$TEST_TMP/cases/garbage"
cp "$INPUTS/mlp_x.npy" "$TEST_TMP/cases/extra/x.npy"
cp "$INPUTS/mlp_x.npy" "$TEST_TMP/cases/extra/z.npy"
write_npy "$TEST_TMP/cases/bad_dtype/x.npy" '<i8' '(2, 16)' "$(f32_data 64)"
write_npy "$TEST_TMP/cases/bad_shape/x.npy" '<f4' '(2, 15)' "$(f32_data 30)"
printf 'this is not an npy file' >"$TEST_TMP/cases/garbage/x.npy"
expect_fail 1 "case .*/cases/empty: missing x\.npy \(input 'x' f32\[batch,16\]\)" \
  "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/empty"
[ -s "$OUT" ] && fail "a bad second case still ran the first"
expect_fail 1 "case .*/cases/extra: z\.npy is no model input \(its inputs: 'x'\)" \
  "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/extra"
expect_fail 1 "case .*/cases/bad_dtype: input 'x': .*bad_dtype/x\.npy holds i64\[2,16\] but the model expects f32\[batch,16\]" \
  "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/bad_dtype"
expect_fail 1 "case .*/cases/bad_shape: input 'x': .*x\.npy holds f32\[2,15\] .*dim 1 is 15, wants 16" \
  "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/bad_shape"
expect_fail 1 "case .*/cases/garbage: input 'x': .*garbage/x\.npy: not a \.npy file" \
  "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/garbage"
expect_fail 1 "case .*/no_such_case: not a directory" "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/no_such_case"
expect_fail 2 "--case and --input do not go together" \
  "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --input "x=$INPUTS/mlp_x.npy"
expect_fail 2 "--case .*/cases/a and --case .*/other/a have the same base name 'a'" \
  "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/other/a" --output-dir "$TEST_TMP/dup_out"
[ -e "$TEST_TMP/dup_out" ] && fail "same base names still wrote $TEST_TMP/dup_out"
# One directory given twice (a second pass, as "twice over" checks run) is not
# two directories with one base name: both runs go, its subdirectory is written.
if expect_ok "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --case "$TEST_TMP/cases/b" \
    --case "$TEST_TMP/cases/a/" --case "$TEST_TMP/cases/../cases/b" --output-dir "$TEST_TMP/twice_out" --json; then
  json_check '
assert [x["case"].rstrip("/").split("/")[-1] for x in d["runs"]] == ["a", "b", "a", "b"], d'
  [ -s "$TEST_TMP/twice_out/a/y.npy" ] && [ -s "$TEST_TMP/twice_out/b/y.npy" ] ||
    fail "a case given twice did not write its outputs"
fi
expect_fail 2 "--case wants a directory, not ''" "$G" run "$MODELS/mlp.grove" --case ""
expect_fail 2 "--case needs a value" "$G" run "$MODELS/mlp.grove" --case
expect_fail 2 "--json takes no value" "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --json=yes
expect_fail 2 "--json given more than once" "$G" run "$MODELS/mlp.grove" --case "$TEST_TMP/cases/a" --json --json

# --- errors of the operation: exit 1 ---------------------------------------
expect_fail 1 "cannot load model .*no_such\.grove" "$G" run "$TEST_TMP/no_such.grove" --input "x=$INPUTS/mlp_x.npy"
expect_fail 1 "missing --input for 'x' f32\[batch,16\]" "$G" run "$MODELS/mlp.grove"
expect_fail 1 "missing --input for 'limit'" "$G" run "$MODELS/loop.grove" \
  --input "trip_count=$INPUTS/loop_trip_count.npy" --input "x=$INPUTS/loop_x.npy"
expect_fail 1 "the model has no input 'z' \(its inputs: 'x'\)" \
  "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --input "z=$INPUTS/mlp_x.npy"
expect_fail 1 "input 'x' given more than once" \
  "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --input "x=$INPUTS/mlp_x.npy"
expect_fail 1 "input 'x': cannot open .*missing\.npy" "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/missing.npy"

write_npy "$TEST_TMP/x_i64.npy" '<i8' '(2, 16)' "$(f32_data 64)"
expect_fail 1 "input 'x': .*x_i64\.npy holds i64\[2,16\] but the model expects f32\[batch,16\]" \
  "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/x_i64.npy"

# An input's header is checked against the model before its data is read.
write_npy "$TEST_TMP/x_narrow.npy" '<f4' '(2, 15)' "$(f32_data 30)"
expect_fail 1 "input 'x': .*x_narrow\.npy holds f32\[2,15\] but the model expects f32\[batch,16\]: dim 1 is 15, wants 16" \
  "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/x_narrow.npy"

write_npy "$TEST_TMP/x_rank3.npy" '<f4' '(1, 2, 16)' "$(f32_data 32)"
expect_fail 1 "holds f32\[1,2,16\] \(rank 3\) but the model expects f32\[batch,16\] \(rank 2\)" \
  "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/x_rank3.npy"

write_npy "$TEST_TMP/x_batch0.npy" '<f4' '(0, 16)' ""
expect_fail 1 "dim 0 \(batch\) is 0, outside batch's range 1\.\.1024" \
  "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/x_batch0.npy"

printf 'this is not an npy file' >"$TEST_TMP/garbage.npy"
expect_fail 1 "input 'x': .*garbage\.npy: not a \.npy file" "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/garbage.npy"

write_npy "$TEST_TMP/x_short.npy" '<f4' '(2, 16)' "$(f32_data 20)"
expect_fail 1 "truncated data" "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/x_short.npy"

write_npy "$TEST_TMP/x_fortran.npy" '<f4' '(2, 16)' "$(f32_data 32)"
sed -i "s/'fortran_order': False/'fortran_order': True /" "$TEST_TMP/x_fortran.npy"
expect_fail 1 "Fortran-order" "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/x_fortran.npy"

touch "$TEST_TMP/not_a_dir"
expect_fail 1 "cannot create --output-dir" \
  "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --output-dir "$TEST_TMP/not_a_dir/sub"

# --- malformed command lines: exit 2 ---------------------------------------
expect_fail 2 "run: missing MODEL.grove" "$G" run --input "x=$INPUTS/mlp_x.npy"
expect_fail 2 "unexpected argument 'extra'" "$G" run "$MODELS/mlp.grove" extra --input "x=$INPUTS/mlp_x.npy"
expect_fail 2 "unknown flag '--inptu'" "$G" run "$MODELS/mlp.grove" --inptu "x=$INPUTS/mlp_x.npy"
expect_fail 2 "unknown flag '-i'" "$G" run "$MODELS/mlp.grove" -i "x=$INPUTS/mlp_x.npy"
expect_fail 2 "--input wants NAME=FILE.npy, not 'x'" "$G" run "$MODELS/mlp.grove" --input x
expect_fail 2 "--input wants NAME=FILE.npy" "$G" run "$MODELS/mlp.grove" --input "=$INPUTS/mlp_x.npy"
expect_fail 2 "--input needs a value" "$G" run "$MODELS/mlp.grove" --input
expect_fail 2 "--repeat wants a positive integer, not '0'" "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --repeat 0
expect_fail 2 "--repeat wants a positive integer, not 'many'" "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --repeat many
expect_fail 2 "--repeat given more than once" "$G" run "$MODELS/mlp.grove" --repeat 1 --repeat 2
expect_fail 2 "unknown device 'gpu'" "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device gpu

if expect_ok "$G" run --help; then expect_stdout '^Usage: grove run MODEL.grove'; fi

finish
