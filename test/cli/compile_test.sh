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
  # The dry run captures graphs as a GPU session does: their launches use each
  # module's indirect form, "(graph)".
  expect_stdout '^kernel modules for sm_90: 2 \(elementwise__f32__ipt[0-9]+_threads[0-9]+_vec[0-9]+ \(graph\), softmax__f32__lanes[0-9]+_threads[0-9]+ \(graph\)\)$'
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

# --json: counts, modules and per shape the steps' kernel choices, each with
# the variants its family's cost model ranked (cheapest first, terms per
# variant) and the pick's own terms and rank.
RANKING_CHECK='
import json, sys
d = json.load(open(sys.argv[1])); top_k = int(sys.argv[2]); points = int(sys.argv[3])
assert d["arch"] == 90 and isinstance(d["modules"], list) and d["modules"], d
assert len(d["shapes"]) == points, len(d["shapes"])
families = set()
for p in d["shapes"]:
    assert p["steps"], p
    for step in p["steps"]:
        for k in step["kernels"]:
            cm = k["cost_model"]
            assert "error" not in cm, cm
            family = k["config"].split("__")[0]
            if family == "gemm":
                assert cm == {"modeled": False}, cm
                continue
            families.add(family)
            assert cm["modeled"] and cm["valid_variants"] >= len(cm["ranked"]) >= 1, cm
            if top_k: assert len(cm["ranked"]) == min(top_k, cm["valid_variants"]), cm
            else: assert len(cm["ranked"]) == cm["valid_variants"], cm
            est = [r["estimate_us"] for r in cm["ranked"]]
            assert est == sorted(est), est
            for r in cm["ranked"] + [cm["pick"]]:
                assert r["config"].startswith(family + "__"), r
                assert 0 < r["occupancy"] <= 1 and 0 <= r["waste"] < 1 and r["bytes"] > 0 and r["flops"] > 0, r
            # The pick is the one chosen, its terms those of its estimate;
            # the cost model chose its first.
            assert cm["pick"]["config"] == k["config"] and abs(cm["pick"]["estimate_us"] - k["estimate_us"]) <= 1e-4 * k["estimate_us"], k
            if k["source"] == "cost model": assert cm["pick_rank"] == 0 and cm["ranked"][0]["config"] == k["config"], k
            if 0 <= cm["pick_rank"] < len(cm["ranked"]): assert cm["ranked"][cm["pick_rank"]]["config"] == k["config"], k
assert {"ew", "softmax"} <= families, families
'
ranking_check() {
  command -v python3 >/dev/null || return 0
  python3 -c "$RANKING_CHECK" "$OUT" "$@" 2>"$TEST_TMP/json_err" || { fail "compile --json ranking check ($*)"; head -20 "$TEST_TMP/json_err" >&2; }
}
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 --cache-dir "$CACHE" --json; then
  ranking_check 5 1
fi
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=300x16 --cache-dir "$CACHE" --json --top-k 0; then
  ranking_check 0 1
fi
if expect_ok "$G" compile "$MODELS/mlp.grove" --arch sm_90 --sweep batch=1:300:100 --cache-dir "$SWEEP_CACHE" --json --top-k 2; then
  ranking_check 2 3
  command -v python3 >/dev/null && { python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sweep"] == {"symbol": "batch", "values": [1, 101, 201]}, d["sweep"]
assert [p["value"] for p in d["shapes"]] == [1, 101, 201] and d["shapes"][1]["input_shapes"] == [[101, 16]], d["shapes"]
assert sum(d["variant_modules_per_file"].values()) <= len(d["modules"]) and d["compiled"] + d["cached"] == len(d["modules"]), d
' "$OUT" || fail "compile --sweep --json fields"; }
fi
expect_fail 2 "compile: --top-k goes with --json" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 --top-k 3
expect_fail 2 "--top-k wants 0 \(all\) to 1000, not 'x'" "$G" compile "$MODELS/mlp.grove" --arch sm_90 --shape x=8x16 --json --top-k x

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
