# Kernel variants chosen in bucketed plans (shape buckets, CUDA graphs on):
# `grove inspect --device cuda`, `grove compile` and `grove tune` plan the
# exported models as a GPU session does (a bucket's bound first), so the
# tiled GEMM that only bucketed plans run is listed, compiled and timed, and
# compile warms the graph (indirect) forms of the modules.
source "$(dirname "$0")/common.bash"
G=$GROVE_BIN
M=$TEST_TMP/models
mkdir -p "$M"
rm -rf "$TEST_TMP/cache_cnn" "$TEST_TMP/cache_gpt" "$TEST_TMP/cache_enc"
for m in cnn gpt_block transformer_encoder; do
  expect_ok "$G" import "$SOURCE_DIR/test/models/$m/model.onnx" -o "$M/$m.grove" || finish
done

# --- inspect: the CNN's convolutions take the tiled GEMM at the bound -------
# 13x11 images are served by the 16x16 bucket: im2col products of n = 256 and
# (pooled) 64 image positions, not 143 and 30.
if expect_ok "$G" inspect "$M/cnn.grove" --device cuda --shape image=2x3x13x11; then
  expect_stdout "step 0 Conv '/features/features.0/Conv': kernel gemm_tiled__f32__[a-z0-9_]+ \(cost model, batch=2,k=27,m=8,n=256,"
  expect_stdout "Conv '/features/features.4/Conv': kernel gemm_tiled__f32__[a-z0-9_]+ \(cost model, batch=2,k=72,m=16,n=64,"
fi
if expect_ok "$G" inspect "$M/cnn.grove" --device cuda --json --shape image=2x3x13x11; then
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
steps = d["segments"]["paths"][0]["steps"]
tiled = [(s["op"], k) for s in steps for k in s["kernels"] if k["config"].startswith("gemm_tiled__f32__")]
assert [op for op, _ in tiled] == ["Conv", "Conv"], tiled
for _, k in tiled:
    assert k["source"] == "cost model" and k["cost_model"]["modeled"] and k["cost_model"]["pick_rank"] == 0, k
assert "n=256" in tiled[0][1]["problem"] and "n=64" in tiled[1][1]["problem"], tiled
' "$OUT" || fail "inspect --json: the tiled GEMM per Conv step"
fi

# --- compile: the tiled GEMM's choices and modules; a second run compiles nothing
if expect_ok "$G" compile "$M/cnn.grove" --arch sm_90 --shape image=2x3x13x11 --sweep height=9:16 \
    --cache-dir "$TEST_TMP/cache_cnn" --json; then
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert any(m.startswith("gemm_tiled__f32__") and m.endswith(" (graph)") for m in d["modules"]), d["modules"]
assert d["variant_modules_per_file"].get("gemm_tiled", 0) >= 1, d["variant_modules_per_file"]
for p in d["shapes"]:
    ks = [k for s in p["steps"] for k in s["kernels"] if k["config"].startswith("gemm_tiled__")]
    assert len(ks) == 2 and all(k["source"] in ("cost model", "table") for k in ks), p
    assert "n=256" in ks[0]["problem"], ks[0]  # every height 9..16 is the bound 16 x 16
assert d["compiled"] == len(d["modules"]), d
' "$OUT" || fail "compile --json: the tiled GEMM's choices and modules"
fi
if expect_ok "$G" compile "$M/cnn.grove" --arch sm_90 --shape image=2x3x13x11 --sweep height=9:16 \
    --cache-dir "$TEST_TMP/cache_cnn"; then
  expect_stdout '^compiled 0, found in cache [1-9][0-9]*,'
fi

# The GPT block over sequences 1..2048 (every 7th): at most 20 modules per
# kernel family, all in their graph form; a second run compiles nothing.
if expect_ok "$G" compile "$M/gpt_block.grove" --arch sm_90 --shape ids=1x8 --sweep seq=1:2048:7 \
    --cache-dir "$TEST_TMP/cache_gpt" --json; then
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["variant_modules_per_file"] and max(d["variant_modules_per_file"].values()) <= 20, d["variant_modules_per_file"]
assert all(m.endswith(" (graph)") for m in d["modules"]), d["modules"]
assert any(k["config"].startswith("attention__") or k["config"].startswith("ew__")
           for p in d["shapes"] for s in p["steps"] for k in s["kernels"]), "no choices"
' "$OUT" || fail "compile --sweep of the GPT block: modules per family"
fi
if expect_ok "$G" compile "$M/gpt_block.grove" --arch sm_90 --shape ids=1x8 --sweep seq=1:2048:7 \
    --cache-dir "$TEST_TMP/cache_gpt"; then
  expect_stdout '^compiled 0, found in cache [1-9][0-9]*,'
fi
# The encoder's attention is fused and its GEMMs keep cuBLASLt (B a weight,
# one matrix): its choices are listed, no tiled GEMM.
if expect_ok "$G" compile "$M/transformer_encoder.grove" --arch sm_90 --shape x=2x5x32 --sweep seq=3:9 \
    --cache-dir "$TEST_TMP/cache_enc" --json; then
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
configs = [k["config"] for p in d["shapes"] for s in p["steps"] for k in s["kernels"]]
assert any(c.startswith("gemm__f32") for c in configs) and not any(c.startswith("gemm_tiled") for c in configs), configs
assert d["compiled"] == len(d["modules"]) > 0, d
' "$OUT" || fail "compile --json of the encoder"
fi

# --- tune: the tiled GEMM's candidates are listed and timed -----------------
if expect_ok "$G" tune "$M/cnn.grove" --shape image=2x3x13x11 --dry-run --top-k 2; then
  expect_stdout '^gemm_tiled f32 batch=2,k=32,m=8,n=256,transa=0,transb=0 \(problem batch=2,k=27,m=8,n=256,transa=0,transb=0\): gemm_tiled__f32__[a-z0-9_]+ \([0-9.]+ us\) gemm_tiled__f32__'
  expect_stdout '^gemm_tiled f32 batch=2,k=128,m=16,n=64,'
fi
if expect_ok "$G" tune "$M/cnn.grove" --shape image=2x3x13x11 --device emulated-cuda -o "$TEST_TMP/cnn.bin" \
    --top-k 1 --warmup 0 --repeats 1; then
  grep -qE '^tune: \[[0-9]+\] gemm_tiled f32 batch=2,k=32,m=8,n=256,[a-z0-9=,]* \(problem [a-z0-9=,]*\): 2 variants, best gemm_tiled__f32__[a-z0-9_]+ [0-9.]+ us' "$ERR" ||
    { fail "tune: the tiled GEMM's bucket should be timed"; show tune; }
  # The table's pick serves the session's bucket.
  if expect_ok "$G" inspect "$M/cnn.grove" --device cuda --shape image=2x3x13x11 --kernel-table "$TEST_TMP/cnn.bin"; then
    expect_stdout "step 0 Conv '/features/features.0/Conv': kernel gemm_tiled__f32__[a-z0-9_]+ \(table, "
  fi
fi
finish
