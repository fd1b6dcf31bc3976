# Files that are not what they claim, and names meant for a terminal:
# special files (a FIFO, a directory, a device) given as a model or an input
# are refused by name without blocking; an input's header is checked against
# the model before its data is read; names from a model reach the terminal
# escaped and become safe file names; two outputs that would share a file are
# refused before anything is written.
source "$(dirname "$0")/common.bash"
make_models
make_inputs
G=$GROVE_BIN

# --- special files: never opened for a blocking read -----------------------
FIFO="$TEST_TMP/fifo"
mkfifo "$FIFO"
expect_fail 1 "'$FIFO' is not a regular file \(a FIFO\)" timeout 10 "$G" run "$FIFO" --input "x=$INPUTS/mlp_x.npy"
expect_fail 1 "'$FIFO' is not a regular file \(a FIFO\)" timeout 10 "$G" inspect "$FIFO"
expect_fail 1 "input 'x': '$FIFO' is not a regular file \(a FIFO\)" \
  timeout 10 "$G" run "$MODELS/mlp.grove" --input "x=$FIFO"
expect_fail 1 "is not a regular file \(a FIFO\)" \
  timeout 10 "$G" run "$MODELS/loop.grove" --input "trip_count=$INPUTS/loop_trip_count.npy" \
  --input "x=$FIFO" --input "limit=$INPUTS/loop_limit.npy"
expect_fail 1 "is not a regular file \(a directory\)" timeout 10 "$G" run "$TEST_TMP" --input "x=$INPUTS/mlp_x.npy"
expect_fail 1 "is not a regular file \(a directory\)" timeout 10 "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP"
expect_fail 1 "'/dev/zero' is not a regular file \(a character device\)" \
  timeout 10 "$G" run "$MODELS/mlp.grove" --input "x=/dev/zero"
expect_fail 1 "is not a regular file \(a character device\)" timeout 10 "$G" inspect /dev/zero
ln -s "$FIFO" "$TEST_TMP/link.grove"
expect_fail 1 "is not a regular file \(a FIFO\)" timeout 10 "$G" inspect "$TEST_TMP/link.grove"
# An output file that is a FIFO with no reader: an error, not a hang.
mkdir -p "$TEST_TMP/fifo_out"
mkfifo "$TEST_TMP/fifo_out/y.npy"
expect_fail 1 "y\.npy" timeout 10 "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" \
  --output-dir "$TEST_TMP/fifo_out"

# --- an input's header is checked before its data is read -------------------
# A header promising 4 TiB in a file of 16 data bytes: refused from the file
# size, nothing allocated.
write_npy "$TEST_TMP/huge_declared.npy" '<f4' '(1099511627776,)' "$(f32_data 4)"
expect_fail 1 "huge_declared\.npy: malformed \.npy file: truncated data: the header promises 4398046511104 bytes" \
  timeout 10 "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/huge_declared.npy"
# A 64 GiB (sparse) file whose header is honest but whose shape the model
# refuses: refused from the header within the timeout, its data never read.
write_npy "$TEST_TMP/huge.npy" '<f4' '(1073741824, 16)' ""
if truncate -s $(($(wc -c <"$TEST_TMP/huge.npy") + 68719476736)) "$TEST_TMP/huge.npy" 2>/dev/null; then
  expect_fail 1 "huge\.npy holds f32\[1073741824,16\] but the model expects f32\[batch,16\]: dim 0 \(batch\) is 1073741824, outside batch's range 1\.\.1024" \
    timeout 10 "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/huge.npy"
  write_npy "$TEST_TMP/huge_i64.npy" '<i8' '(1073741824, 8)' ""
  truncate -s $(($(wc -c <"$TEST_TMP/huge_i64.npy") + 68719476736)) "$TEST_TMP/huge_i64.npy"
  expect_fail 1 "huge_i64\.npy holds i64\[1073741824,8\] but the model expects f32\[batch,16\]" \
    timeout 10 "$G" run "$MODELS/mlp.grove" --input "x=$TEST_TMP/huge_i64.npy"
  rm -f "$TEST_TMP/huge.npy" "$TEST_TMP/huge_i64.npy"
else
  echo "note: no sparse files here; the 64 GiB header check is skipped"
fi

# --- names from a model: escaped on the terminal, safe as file names --------
# patch_name FILE OLD NEW: replaces every occurrence of the name OLD in a
# model with NEW (same length; printf escapes), in place.
patch_name() {
  local file=$1 old=$2 new=$3 offsets offset
  offsets=$(grep -obUaF -- "$old" "$file" | cut -d: -f1)
  if [ -z "$offsets" ]; then
    fail "'$old' is not in $file"
    return 1
  fi
  for offset in $offsets; do
    printf "$new" | dd of="$file" bs=1 seek="$offset" conv=notrunc status=none
  done
}

# has_byte FILE HEX: the file holds the raw byte.
has_byte() { LC_ALL=C grep -q "$(printf "\\x$2")" "$1"; }

# A symbol that clears the screen and turns text red.
cp "$MODELS/mlp.grove" "$TEST_TMP/ansi.grove"
if patch_name "$TEST_TMP/ansi.grove" "batch" '\x1b[31m'; then
  if expect_ok "$G" inspect "$TEST_TMP/ansi.grove"; then
    has_byte "$OUT" 1b && fail "inspect printed a raw ESC"
    expect_stdout '^  \\x1b\[31m  1\.\.1024$'
    expect_stdout '^  x  f32\[\\x1b\[31m,16\]$'
  fi
  write_npy "$TEST_TMP/x_zero_batch.npy" '<f4' '(0, 16)' ""
  expect_fail 1 "dim 0 \(\\\\x1b\[31m\) is 0, outside \\\\x1b\[31m's range 1\.\.1024" \
    "$G" run "$TEST_TMP/ansi.grove" --input "x=$TEST_TMP/x_zero_batch.npy"
  has_byte "$ERR" 1b && fail "an error printed a raw ESC"
  if expect_ok "$G" inspect "$TEST_TMP/ansi.grove" --json; then
    has_byte "$OUT" 1b && fail "inspect --json printed a raw ESC"
    expect_stdout '"\\u001b\[31m"'
  fi
fi

# Output names with control characters and path separators.
cp "$MODELS/loop.grove" "$TEST_TMP/names.grove"
LOOP_INPUTS=(--input "trip_count=$INPUTS/loop_trip_count.npy" --input "x=$INPUTS/loop_x.npy"
             --input "limit=$INPUTS/loop_limit.npy")
if patch_name "$TEST_TMP/names.grove" "final" '../\x07/' && patch_name "$TEST_TMP/names.grove" "sums" '\xc2\x9b2J'; then
  mkdir -p "$TEST_TMP/names_out/inner"
  if expect_ok "$G" run "$TEST_TMP/names.grove" "${LOOP_INPUTS[@]}" --output-dir "$TEST_TMP/names_out/inner"; then
    has_byte "$OUT" 07 && fail "run printed a raw BEL"
    LC_ALL=C grep -q "$(printf '\xc2\x9b')" "$OUT" && fail "run printed a raw C1 CSI"
    expect_stdout '^\.\./\\x07/: f32\[4\]'
    expect_stdout '^\\u\{009b\}2J: f32\['
    # Both files are inside the output folder, under tame names.
    [ -f "$TEST_TMP/names_out/inner/_..___.npy" ] || fail "no _..___.npy for '../\\x07/'"
    [ -f "$TEST_TMP/names_out/inner/__2J.npy" ] || fail "no __2J.npy for '\\u{9b}2J'"
    [ -z "$(find "$TEST_TMP/names_out" -maxdepth 1 -type f)" ] || fail "a file was written outside --output-dir"
  fi
fi

# Two outputs that map to one file name: refused before anything is written.
cp "$MODELS/loop.grove" "$TEST_TMP/clash.grove"
if patch_name "$TEST_TMP/clash.grove" "final" '_.sum' && patch_name "$TEST_TMP/clash.grove" "sums" '.sum'; then
  expect_fail 1 "outputs '_\.sum' and '\.sum' both map to the file name _\.sum\.npy; nothing was written" \
    "$G" run "$TEST_TMP/clash.grove" "${LOOP_INPUTS[@]}" --output-dir "$TEST_TMP/clash_out"
  [ -e "$TEST_TMP/clash_out" ] && fail "the output folder was made although nothing could be written"
fi

# --- integer outputs are summarized exactly ---------------------------------
# INT64_MAX once went through a double (2^63) and printed as INT64_MIN.
DATA=${ONNX_TEST_DATA:-/usr/share/libonnx-testdata/data}
if [ -f "$DATA/node/test_max_int64/model.onnx" ] && [ -f "$DATA/node/test_max_uint64/model.onnx" ]; then
  I64_MAX='\xff\xff\xff\xff\xff\xff\xff\x7f'
  I64_MIN='\x00\x00\x00\x00\x00\x00\x00\x80'
  I64_5='\x05\x00\x00\x00\x00\x00\x00\x00'
  U64_MAX='\xff\xff\xff\xff\xff\xff\xff\xff'
  write_npy "$TEST_TMP/i64_ends.npy" '<i8' '(3,)' "$I64_MAX$I64_MIN$I64_5"
  write_npy "$TEST_TMP/u64_ends.npy" '<u8' '(3,)' "$U64_MAX$I64_5$I64_5"
  if expect_ok "$G" import "$DATA/node/test_max_int64/model.onnx" -o "$TEST_TMP/max_i64.grove" &&
     expect_ok "$G" run "$TEST_TMP/max_i64.grove" --input "data_0=$TEST_TMP/i64_ends.npy" \
       --input "data_1=$TEST_TMP/i64_ends.npy"; then
    expect_stdout '^result: i64\[3\] min=-9223372036854775808 max=9223372036854775807 .*values=\[9223372036854775807, -9223372036854775808, 5\]$'
  fi
  if expect_ok "$G" import "$DATA/node/test_max_uint64/model.onnx" -o "$TEST_TMP/max_u64.grove" &&
     expect_ok "$G" run "$TEST_TMP/max_u64.grove" --input "data_0=$TEST_TMP/u64_ends.npy" \
       --input "data_1=$TEST_TMP/u64_ends.npy"; then
    expect_stdout ' min=5 max=18446744073709551615 .*values=\[18446744073709551615, 5, 5\]$'
  fi
fi

finish
