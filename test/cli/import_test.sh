# `grove import`: ONNX backend test models (libonnx-testdata) imported and
# run with `grove run`, and the ways an import must fail.
source "$(dirname "$0")/common.bash"
G=$GROVE_BIN
DATA=${ONNX_TEST_DATA:-/usr/share/libonnx-testdata/data}
if [ ! -d "$DATA/node" ]; then
  echo "SKIP: no ONNX test data at $DATA (install libonnx-testdata)"
  exit 0
fi
M="$TEST_TMP/models"
mkdir -p "$M"

# --- an elementwise model, imported then run ---------------------------------
if expect_ok "$G" import "$DATA/node/test_add/model.onnx" -o "$M/add.grove"; then
  expect_stdout '^imported .*test_add/model.onnx \(opset [0-9]+, producer '
  expect_stdout '^nodes: 1 imported as grove ops, 0 constants folded, 0 Constant nodes \(of 1 ONNX nodes\); 0 subgraphs$'
  expect_stdout '^symbols: none \(all dims constant\)$'
  expect_stdout '^wrote .*add.grove: [0-9]+ bytes$'
fi
write_npy "$TEST_TMP/x.npy" '<f4' '(3, 4, 5)' "$(f32_data 60)"
if expect_ok "$G" run "$M/add.grove" --input "x=$TEST_TMP/x.npy" --input "y=$TEST_TMP/x.npy"; then
  # Twice the f32_data values: 2 * (0.5, -0.25, 1, -1.5, ...).
  expect_stdout '^sum: f32\[3,4,5\] min=-3 max=4 .* values=\[1, -0\.5, 2, -3, 0\.25, 4, \.\.\.\]$'
fi
if expect_ok "$G" inspect "$M/add.grove"; then
  expect_stdout 'Add'
fi

# --- a sequence in and out: one .npy per item ---------------------------------
if expect_ok "$G" import "$DATA/node/test_sequence_insert_at_back/model.onnx" -o "$M/seq.grove"; then
  I64_1='\x01\x00\x00\x00\x00\x00\x00\x00'
  I64_7='\x07\x00\x00\x00\x00\x00\x00\x00'
  write_npy "$TEST_TMP/a.npy" '<i8' '(2,)' "$I64_1$I64_1"
  write_npy "$TEST_TMP/b.npy" '<i8' '(3,)' "$I64_7$I64_7$I64_7"
  if expect_ok "$G" run "$M/seq.grove" --input "sequence=$TEST_TMP/a.npy,$TEST_TMP/b.npy" \
      --input "tensor=$TEST_TMP/b.npy" --output-dir "$TEST_TMP/seq_out"; then
    expect_stdout '^output_sequence: seq\(i64\) of 3$'
    expect_stdout '^output_sequence_0: i64\[2\] min=1 max=1 '
    expect_stdout '^output_sequence_2: i64\[3\] min=7 max=7 '
    [ -f "$TEST_TMP/seq_out/output_sequence_2.npy" ] || fail "no output_sequence_2.npy"
  fi
  if expect_ok "$G" inspect "$M/seq.grove"; then
    expect_stdout '^  sequence  seq\(i64\[\]\)$'
    expect_stdout '^memory plan: made when run \(an input is a sequence or optional\)$'
  fi
  expect_fail 1 "memory plans take tensor inputs; input 'sequence' is seq" \
    "$G" inspect "$M/seq.grove" --shape tensor=3
fi

# --- a string input: declared as grove's string dtype --------------------------
if expect_ok "$G" import "$DATA/node/test_cast_STRING_to_FLOAT/model.onnx" -o "$M/cast_string.grove"; then
  if expect_ok "$G" inspect "$M/cast_string.grove"; then
    expect_stdout '^  input  string\[3,4\]$'
    expect_stdout '^  output  f32\[3,4\]$'
  fi
fi

# --- If with constant branches: both paths -----------------------------------
if expect_ok "$G" import "$DATA/node/test_if/model.onnx" --output="$M/if.grove"; then
  expect_stdout '2 subgraphs$'
fi
write_npy "$TEST_TMP/true.npy" '|b1' '()' '\x01'
write_npy "$TEST_TMP/false.npy" '|b1' '()' '\x00'
if expect_ok "$G" run "$M/if.grove" --input "cond=$TEST_TMP/true.npy"; then
  expect_stdout '^res: f32\[5\] .*values=\[1, 2, 3, 4, 5\]$'
fi
if expect_ok "$G" run "$M/if.grove" --input "cond=$TEST_TMP/false.npy"; then
  expect_stdout '^res: f32\[5\] .*values=\[5, 4, 3, 2, 1\]$'
fi

# --- an old opset: converted to opset 13 by ONNX's version converter ---------
if expect_ok "$G" import "$DATA/simple/test_single_relu_model/model.onnx" -o "$M/x.grove"; then
  expect_stdout "^note: the model's opset 9 is below 11, the oldest grove imports; it was converted to opset 13"
fi
rm -f "$M/x.grove"

# --- failures ---------------------------------------------------------------
# Ops grove may gain later: the first that is still missing must be named
# with its node.
for pair in Unique:test_unique_sorted_without_axis Det:test_det_2d RoiAlign:test_roialign_aligned_true \
    NonMaxSuppression:test_nonmaxsuppression_single_box; do
  op=${pair%%:*} case_dir=${pair#*:}
  if ! "$G" import "$DATA/node/$case_dir/model.onnx" -o "$M/x.grove" >/dev/null 2>&1; then
    expect_fail 1 "cannot import .*: node .* \(op $op\): not supported by grove$" \
      "$G" import "$DATA/node/$case_dir/model.onnx" -o "$M/x.grove"
    break
  fi
  rm -f "$M/x.grove"
done
expect_fail 1 "no dynamic dim named batch" \
  "$G" import "$DATA/node/test_add/model.onnx" -o "$M/x.grove" --dim batch=1:8
expect_fail 1 "cannot import .*missing.onnx" "$G" import "$TEST_TMP/missing.onnx" -o "$M/x.grove"
# A FIFO as the model: refused as not a regular file, without waiting for a writer.
rm -f "$TEST_TMP/fifo.onnx" && mkfifo "$TEST_TMP/fifo.onnx"
expect_fail 1 "not a regular file" timeout 20 "$G" import "$TEST_TMP/fifo.onnx" -o "$M/x.grove"
rm -f "$TEST_TMP/fifo.onnx"
printf 'this is not a protobuf' >"$TEST_TMP/garbage.onnx"
expect_fail 1 "not a valid ONNX model" "$G" import "$TEST_TMP/garbage.onnx" -o "$M/x.grove"
expect_fail 1 "cannot write" "$G" import "$DATA/node/test_add/model.onnx" -o "$TEST_TMP/no/such/dir/x.grove"
[ -e "$M/x.grove" ] && fail "a failed import left $M/x.grove behind"

# --- the importer is a module, loaded by `grove import` alone -----------------
# No other command loads libonnx or libprotobuf (grove version starts without them).
if ldd "$G" | grep -Eq 'libonnx|libprotobuf'; then fail "the grove binary links libonnx or libprotobuf"; fi
if expect_ok env LD_DEBUG=libs "$G" version; then
  grep -Eq 'libonnx|libprotobuf|libgrove_onnx_import' "$ERR" && fail "grove version loaded the ONNX importer"
fi
# A copy of the binary without the module beside it: a clear error naming it.
mkdir -p "$TEST_TMP/alone"
cp "$G" "$TEST_TMP/alone/grove"
expect_fail 1 "the ONNX importer \(libgrove_onnx_import.so, installed with grove\) cannot be loaded: .*alone/libgrove_onnx_import.so: not found" \
  "$TEST_TMP/alone/grove" import "$DATA/node/test_add/model.onnx" -o "$M/x.grove"
[ -e "$M/x.grove" ] && fail "a failed import left $M/x.grove behind"
if expect_ok "$TEST_TMP/alone/grove" version; then expect_stdout '^grove '; fi

# --- usage errors ------------------------------------------------------------
expect_fail 2 "missing -o OUT.grove" "$G" import "$DATA/node/test_add/model.onnx"
expect_fail 2 "missing MODEL.onnx" "$G" import -o "$M/x.grove"
expect_fail 2 "--dim wants NAME=MIN:MAX" "$G" import "$DATA/node/test_add/model.onnx" -o "$M/x.grove" --dim batch=8
expect_fail 2 "--dim wants NAME=MIN:MAX" "$G" import "$DATA/node/test_add/model.onnx" -o "$M/x.grove" --dim b=9:2
expect_fail 2 "--input-rank wants NAME=R" "$G" import "$DATA/node/test_add/model.onnx" -o "$M/x.grove" --input-rank x=-1
if expect_ok "$G" import --help; then expect_stdout '^Usage: grove import MODEL.onnx -o OUT.grove'; fi
if expect_ok "$G" --help; then expect_stdout '^  import '; fi

finish
