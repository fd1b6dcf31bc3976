# `grove inspect`: signatures, content and memory plans, as text and as JSON.
source "$(dirname "$0")/common.bash"
make_models
G=$GROVE_BIN

# Parses stdout as JSON and evaluates a Python expression on it (`d`); skips
# the deeper checks where no python3 is installed.
json_check() {
  command -v python3 >/dev/null || return 0
  if ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
      "$OUT" "$1" 2>"$TEST_TMP/json_err"; then
    fail "JSON check failed: $1"
    sed 's/^/  /' "$TEST_TMP/json_err" "$OUT" | head -20 >&2
  fi
}

# --- text --------------------------------------------------------------------
if expect_ok "$G" inspect "$MODELS/mlp.grove"; then
  expect_stdout '^inputs:$'
  expect_stdout '^  x  f32\[batch,16\]$'
  expect_stdout '^  y  f32\[batch,4\]$'
  expect_stdout '^  batch  1\.\.1024$'
  expect_stdout '^subgraphs: 1$'
  expect_stdout '^operators: 6 \(Add 2, MatMul 2, Relu 1, Softmax 1\)$'
  expect_stdout '^weights: [0-9.]+ KiB \([0-9]+ bytes\)$'
  expect_stdout 'give --shape'
fi

if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=3x16; then
  expect_stdout '^memory plan for x=\[3,16\]:$'
  expect_stdout '^  arena: [0-9]+'
  expect_stdout '^  lower bound: [0-9]+'
  expect_stdout '^  ratio: [0-9]+\.[0-9]{3}$'
  expect_stdout '^  live at the peak \(step [0-9]+\):$'
  expect_stdout '^    y  \[3,4\]$'
fi

if expect_ok "$G" inspect "$MODELS/transformer.grove" --shape=x=2x37x32; then
  expect_stdout '^  x  f32\[batch,seq,32\]$'
  expect_stdout '^    y  \[2,37,32\]$'
fi

# Control flow: two subgraphs; the If's output width depends on the data.
if expect_ok "$G" inspect "$MODELS/early_exit.grove" --shape x=4x8; then
  expect_stdout '^subgraphs: 3$'
  expect_stdout 'If 1'
  expect_stdout '^    y  \[4,-1\]  \(-1: depends on the data\)$'
fi

# Scalars are `NAME=` (rank 0).
if expect_ok "$G" inspect "$MODELS/loop.grove" --shape trip_count= --shape x=64 --shape limit=; then
  expect_stdout '^  trip_count  i64\[\]$'
  expect_stdout '^memory plan for trip_count=\[\] x=\[64\] limit=\[\]:$'
fi

# --- JSON --------------------------------------------------------------------
if expect_ok "$G" inspect "$MODELS/mlp.grove" --json --shape x=3x16; then
  [ "$(wc -l <"$OUT")" -eq 1 ] || fail "--json printed more than one line"
  expect_stdout '^\{.*"arena_bytes":[0-9]+.*\}$'
  expect_stdout '"lower_bound_bytes":[0-9]+'
  json_check 'd["arena_bytes"] >= d["lower_bound_bytes"] > 0'
  json_check 'd["inputs"] == [{"name": "x", "kind": "tensor", "dtype": "f32", "shape": ["batch", 16]}]'
  json_check 'd["symbols"] == [{"name": "batch", "min": 1, "max": 1024}]'
  json_check 'd["op_counts"] == {"Add": 2, "MatMul": 2, "Relu": 1, "Softmax": 1}'
  json_check 'd["output_shapes"] == {"y": [3, 4]} and d["input_shapes"] == {"x": [3, 16]}'
  json_check 'd["num_subgraphs"] == 1 and d["weight_bytes"] > 0 and len(d["peak_tensors"]) > 0'
fi

if expect_ok "$G" inspect --json "$MODELS/mlp.grove"; then
  json_check 'd["arena_bytes"] is None and d["lower_bound_bytes"] is None'
fi

if expect_ok "$G" inspect "$MODELS/loop.grove" --json --shape trip_count= --shape x=5 --shape limit=; then
  json_check 'd["input_shapes"] == {"trip_count": [], "x": [5], "limit": []}'
fi

# --- execution: segments per control-flow path (--device; no GPU needed) ------
# No data-dependent step: one segment, nothing needs the host.
if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device cuda; then
  expect_stdout '^execution on cuda sm_90 \(planned without a GPU\):$'
  expect_stdout '^  path main: [0-9]+ steps, 1 segment, 0 steps need the host$'
  expect_stdout '^    segment 0: steps 0\.\.[0-9]+: .*MatMul.*\(cuda\)'
fi
# An If: the host picks the branch, so the main graph's segment ends there;
# each branch is a path of its own.
if expect_ok "$G" inspect "$MODELS/early_exit.grove" --shape x=4x8 --device cuda --arch sm_80; then
  expect_stdout '^execution on cuda sm_80 \(planned without a GPU\):$'
  expect_stdout '^    step [0-9]+ If .*needs the host: control flow: the host picks the path$'
  expect_stdout "^  path main / If '.*' / then_branch: "
  expect_stdout "^  path main / If '.*' / else_branch: "
fi
if expect_ok "$G" inspect "$MODELS/loop.grove" --json --device cuda --shape trip_count= --shape x=5 --shape limit=; then
  json_check 'd["segments"]["paths"][0]["path"] == "main"'
  json_check 'any(h["op"] == "Loop" and "control flow" in h["reason"] for h in d["segments"]["paths"][0]["host_steps"])'
  json_check 'any(p["path"].endswith("/ body") for p in d["segments"]["paths"])'
  json_check 'all(s["end_step"] > s["first_step"] for p in d["segments"]["paths"] for s in p["segments"])'
fi
# Shape buckets: the MLP's one segment serves every shape of its bucket (a
# dry run refreshes its graph for a second shape), so it is not pinned.
if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device cuda --json; then
  json_check 'all(s["pinned"] == "" for s in d["segments"]["paths"][0]["segments"])'
fi
# Each CUDA kernel choice carries the cost model's ranking for its step:
# the top --top-k (default 5) variants cheapest first with their terms, the
# pick's own terms and its rank (0 when the cost model chose it).
KERNELS='[k for s in d["segments"]["paths"][0]["steps"] for k in s["kernels"]]'
if expect_ok "$G" inspect "$MODELS/transformer.grove" --shape x=2x7x32 --device cuda --arch sm_80 --json; then
  json_check "{k['config'].split('__')[0] for k in $KERNELS if k['cost_model']['modeled']} >= {'ew', 'reduce'}"
  json_check "all(len(k['cost_model']['ranked']) == min(5, k['cost_model']['valid_variants']) for k in $KERNELS if k['cost_model']['modeled'])"
  json_check "all([r['estimate_us'] for r in k['cost_model']['ranked']] == sorted(r['estimate_us'] for r in k['cost_model']['ranked']) for k in $KERNELS if k['cost_model']['modeled'])"
  json_check "all(k['cost_model']['pick_rank'] == 0 and k['cost_model']['ranked'][0]['config'] == k['config'] == k['cost_model']['pick']['config'] for k in $KERNELS if k['source'] == 'cost model')"
  json_check "all(set(r) == {'config', 'occupancy', 'waste', 'bytes', 'flops', 'estimate_us'} for k in $KERNELS if k['cost_model']['modeled'] for r in k['cost_model']['ranked'])"
  json_check "all(k['cost_model'] == {'modeled': False} for k in $KERNELS if k['config'].startswith('gemm__'))"
fi
if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=300x16 --device cuda --json --top-k 0; then
  json_check "all(len(k['cost_model']['ranked']) == k['cost_model']['valid_variants'] > 5 for k in $KERNELS if k['cost_model']['modeled'])"
fi
expect_fail 2 "--top-k goes with --device cuda --json" "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --top-k 2
expect_fail 2 "--top-k wants 0 \(all\) to 1000" "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device cuda --json --top-k 1001
if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device cpu --json; then
  json_check 'd["segments"]["device"] == "cpu" and len(d["segments"]["paths"][0]["segments"]) == 1'
  json_check 'all(s["backend"] == "cpu" for s in d["segments"]["paths"][0]["steps"])'
fi
# On the CPU each MatMul with its bias Add (and the Relu after the first) is
# one oneDNN step; GROVE_CPU_ONEDNN=0 keeps the reference kernels, step for step.
if expect_ok "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device cpu; then
  expect_stdout "^  path main: 3 steps, 1 segment, 0 steps need the host$"
  expect_stdout "MatMul\+Add\+Relu 'fused\(fc1\.matmul\+fc1\.bias\+Relu\)' \(cpu\), MatMul\+Add 'fused\(fc2\.matmul\+fc2\.bias\)' \(cpu\), Softmax"
fi
if expect_ok env GROVE_CPU_ONEDNN=0 "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device cpu; then
  expect_stdout "^  path main: 6 steps, 1 segment, 0 steps need the host$"
  expect_stdout "MatMul 'fc1\.matmul' \(cpu\), Add 'fc1\.bias' \(cpu\), Relu \(cpu\)"
fi
# The demo transformer's attention (MatMul, Mul by a scale, Softmax, MatMul)
# is one FusedAttention step on both backends; GROVE_FUSE_ATTENTION=0 keeps
# the four steps.
if expect_ok "$G" inspect "$MODELS/transformer.grove" --shape x=2x7x32 --device cpu; then
  expect_stdout "^    fused attention: attention\(.*Softmax.*\)$"
  expect_stdout "FusedAttention 'attention\(.*\)' \(cpu\)"
fi
if expect_ok "$G" inspect "$MODELS/transformer.grove" --shape x=2x7x32 --device cuda --json; then
  json_check 'd["segments"]["paths"][0]["num_fused_attention"] == 1'
  json_check 'not any(s["op"] == "Softmax" for s in d["segments"]["paths"][0]["steps"])'
  json_check 'any(s["op"] == "FusedAttention" and s["backend"] == "cuda" for s in d["segments"]["paths"][0]["steps"])'
fi
if expect_ok env GROVE_FUSE_ATTENTION=0 "$G" inspect "$MODELS/transformer.grove" --shape x=2x7x32 --device cpu --json; then
  json_check 'd["segments"]["paths"][0]["num_fused_attention"] == 0'
  json_check 'any(s["op"] == "Softmax" for s in d["segments"]["paths"][0]["steps"])'
fi
expect_fail 2 "--device must be cpu or cuda" "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device tpu
expect_fail 2 "--arch goes with --device cuda" "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --arch sm_80
expect_fail 1 "give --shape" "$G" inspect "$MODELS/mlp.grove" --device cuda
expect_fail 1 "arch" "$G" inspect "$MODELS/mlp.grove" --shape x=3x16 --device cuda --arch sm_9000x

# --- errors ------------------------------------------------------------------
expect_fail 1 "cannot load model" "$G" inspect "$TEST_TMP/no_such.grove"
expect_fail 1 "--shape names 'z', which is not a model input \(its inputs: 'x'\)" \
  "$G" inspect "$MODELS/mlp.grove" --shape z=3x16
expect_fail 1 "missing --shape for 'x' f32\[n\]" "$G" inspect "$MODELS/loop.grove" --shape limit=
expect_fail 1 "cannot plan these shapes: .*batch" "$G" inspect "$MODELS/mlp.grove" --shape x=2000x16
expect_fail 1 "cannot plan these shapes: " "$G" inspect "$MODELS/mlp.grove" --shape x=3x15
expect_fail 1 "cannot plan these shapes: " "$G" inspect "$MODELS/mlp.grove" --shape x=
expect_fail 2 "--shape wants NAME=D0xD1" "$G" inspect "$MODELS/mlp.grove" --shape x=3by16
expect_fail 2 "--shape wants NAME=D0xD1" "$G" inspect "$MODELS/mlp.grove" --shape x=-3x16
expect_fail 2 "--shape wants NAME=D0xD1" "$G" inspect "$MODELS/mlp.grove" --shape x=3x
expect_fail 2 "--shape wants NAME=D0xD1" "$G" inspect "$MODELS/mlp.grove" --shape 3x16
expect_fail 2 "--shape x given twice" "$G" inspect "$MODELS/mlp.grove" --shape x=1x16 --shape x=2x16
expect_fail 2 "--json takes no value" "$G" inspect "$MODELS/mlp.grove" --json=yes
expect_fail 2 "unknown flag '--memory'" "$G" inspect "$MODELS/mlp.grove" --memory
expect_fail 2 "inspect: missing MODEL.grove" "$G" inspect
expect_fail 2 "unexpected argument" "$G" inspect "$MODELS/mlp.grove" "$MODELS/loop.grove"

finish
