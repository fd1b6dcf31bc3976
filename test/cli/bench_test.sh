# `grove bench`: latency per shape with the session's counters, sweeps over
# a symbol, a case directory's inputs, JSON, and every bad flag value. Small
# iteration counts: this runs under ASan in CI too.
source "$(dirname "$0")/common.bash"
make_models
make_inputs
G=$GROVE_BIN

# json_check CODE: runs python3 on the last stdout parsed as JSON (as `d`).
json_check() {
  if ! python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $1" "$OUT"; then
    fail "JSON check failed: $1"
    sed 's/^/  stdout: /' "$OUT" | head -5 >&2
  fi
}

# --- happy paths -------------------------------------------------------------
if expect_ok "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --iterations 3 --device cpu; then
  expect_stdout '^bench: .*mlp\.grove on cpu, 3 timed runs per shape after 1 warmup$'
  expect_stdout '^shape +min ms +median ms +p90 ms +plans +graphs +replays +outside +syncs'
  expect_stdout '^x=\[2,16\] +[0-9.]+ +[0-9.]+ +[0-9.]+ +1 +0 +0 +0 +0 +0 +0$'
fi

# A sweep over the transformer's seq (batch from --shape, the last dim fixed),
# with a progress line per shape on stderr.
if expect_ok "$G" bench "$MODELS/transformer.grove" --shape x=2x1x32 --sweep seq=2:6:2 --iterations 2 --warmup 0 \
    --json --device cpu; then
  json_check '
s = d["shapes"]; t = d["totals"]
assert d["device"] == "cpu" and d["iterations"] == 2 and d["warmup"] == 0 and d["case"] is None, d
assert [x["inputs"]["x"] for x in s] == [[2, 2, 32], [2, 4, 32], [2, 6, 32]], s
keys = ["graphs_captured", "graph_replays", "launches_outside_graphs", "syncs"]
for x in s:
    assert 0 <= x["min_ms"] <= x["median_ms"] <= x["p90_ms"], x
    assert x["plans_created"] == 1 and x["arena_bytes"] > 0 and all(x[k] == 0 for k in keys), x
    assert x["copies"]["bytes_host_to_device"] == 0, x
assert t["runs"] == 6 and t["plans_created"] == 3 and t["graph_bytes"] == 0, t
assert all(t[k] == 0 for k in keys), t'
  [ "$(grep -c '^bench: shape [0-9] of 3: x=\[2,[246],32\]$' "$ERR")" -eq 3 ] || { fail "want 3 progress lines"; show bench; }
fi

# Declared dims fill inputs --shape does not name: the loop's scalars.
if expect_ok "$G" bench "$MODELS/loop.grove" --sweep n=1:2 --iterations 1 --json; then
  json_check '
s = d["shapes"]
assert [x["inputs"] for x in s] == [{"trip_count": [], "x": [1], "limit": []}, {"trip_count": [], "x": [2], "limit": []}], s'
fi

# A case directory's inputs.
mkdir -p "$TEST_TMP/case"
cp "$INPUTS/mlp_x.npy" "$TEST_TMP/case/x.npy"
if expect_ok "$G" bench "$MODELS/mlp.grove" --case "$TEST_TMP/case" --iterations 2 --json; then
  json_check '
assert d["case"].endswith("/case") and len(d["shapes"]) == 1 and d["shapes"][0]["inputs"] == {"x": [2, 16]}, d'
fi

if expect_ok "$G" bench --help; then expect_stdout '^Usage: grove bench MODEL.grove'; fi
if expect_ok "$G" --help; then expect_stdout '^  bench +measure a model'; fi

# --- errors of the operation: exit 1 ---------------------------------------
expect_fail 1 "input 'x' dim 0 is the symbol 'batch', which has no value: give --shape x=\.\.\. or --sweep batch=LO:HI" \
  "$G" bench "$MODELS/mlp.grove" --iterations 1
expect_fail 1 "input 'x' dim 0 is the symbol 'batch'" "$G" bench "$MODELS/transformer.grove" --sweep seq=1:2 --iterations 1
expect_fail 1 "--sweep names 'len', which is no symbol of the model \(its symbols: 'batch'\)" \
  "$G" bench "$MODELS/mlp.grove" --sweep len=1:2
expect_fail 1 "--sweep batch reaches 2000, outside batch's range 1\.\.1024" \
  "$G" bench "$MODELS/mlp.grove" --sweep batch=1000:2000:1000
expect_fail 1 "--shape names 'z', which is not a model input" "$G" bench "$MODELS/mlp.grove" --shape z=2x16
expect_fail 1 "at x=\[2,15\]: run failed: " "$G" bench "$MODELS/mlp.grove" --shape x=2x15 --iterations 1
expect_fail 1 "case .*/no_such: not a directory" "$G" bench "$MODELS/mlp.grove" --case "$TEST_TMP/no_such"
expect_fail 1 "cannot load model .*no_such\.grove" "$G" bench "$TEST_TMP/no_such.grove" --shape x=2x16

# --- malformed command lines: exit 2 ---------------------------------------
expect_fail 2 "bench: missing MODEL.grove" "$G" bench
expect_fail 2 "bench: unexpected argument 'extra'" "$G" bench "$MODELS/mlp.grove" extra
expect_fail 2 "unknown flag '--repeat'" "$G" bench "$MODELS/mlp.grove" --repeat 2
for bad in 0 -1 many ""; do
  expect_fail 2 "--iterations wants a positive integer, not '$bad'" "$G" bench "$MODELS/mlp.grove" --iterations "$bad"
done
for bad in -1 some; do
  expect_fail 2 "--warmup wants a non-negative integer, not '$bad'" "$G" bench "$MODELS/mlp.grove" --warmup "$bad"
done
for bad in batch batch=1 batch=2:1 batch=1:4:0 batch=a:b =1:2 batch=-1:2 batch=1:2:3:4; do
  expect_fail 2 "--sweep wants SYMBOL=LO:HI\[:STEP\]" "$G" bench "$MODELS/mlp.grove" --sweep "$bad"
done
expect_fail 2 "--sweep batch=1:100000 has more than 10000 values" "$G" bench "$MODELS/mlp.grove" --sweep batch=1:100000
expect_fail 2 "--sweep given more than once" "$G" bench "$MODELS/mlp.grove" --sweep batch=1:2 --sweep batch=3:4
expect_fail 2 "--shape wants NAME=D0xD1" "$G" bench "$MODELS/mlp.grove" --shape x=2xq
expect_fail 2 "--case gives the inputs and their shapes; it does not go with --shape or --sweep" \
  "$G" bench "$MODELS/mlp.grove" --case "$TEST_TMP/case" --shape x=2x16
expect_fail 2 "--case wants a directory, not ''" "$G" bench "$MODELS/mlp.grove" --case ""
expect_fail 2 "unknown device 'gpu'" "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --device gpu
expect_fail 2 "unknown graph mode 'maybe'" "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --graphs maybe
expect_fail 2 "unknown GEMM math 'fp8'" "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --gemm-math fp8
expect_fail 2 "--json takes no value" "$G" bench "$MODELS/mlp.grove" --json=1

# CUDA: the reason where there is no GPU; on a GPU, graphs replay in the
# timed runs.
capture "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --iterations 2 --device cuda --json
if [ "$RC" -ne 0 ]; then
  expect_fail 1 "CUDA backend not available" "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --device cuda
else
  json_check '
x = d["shapes"][0]
assert d["device"] == "cuda" and x["graph_replays"] == 2 and x["launches_outside_graphs"] == 0, d'
fi

finish
