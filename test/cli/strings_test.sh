# Strings through the command line: `grove import` of an ONNX model with a
# string input, a string initializer and Cast to string, `grove inspect`
# showing string dtypes, and `grove run` on '<U' and '|S' .npy inputs,
# printing string outputs and writing them as '<U' .npy files.
source "$(dirname "$0")/common.bash"
G=$GROVE_BIN

# strings.onnx (opset 17), made with onnx.helper:
#   inputs  words: string[n], idx: int64[2], x: float[3]
#   vocab = ["zero", "Müller", "日本😀"] (a STRING initializer), column = [-1, 1]
#   picked = Gather(words, idx); named = Gather(vocab, idx)
#   shaped = Reshape(words, column); x_text = Cast(x, to=STRING)
STRINGS_ONNX=''
STRINGS_ONNX+='\x08\x08\x12\x0e\x67\x72\x6f\x76\x65\x20\x63\x6c\x69\x20\x74\x65\x73\x74\x3a\xdd\x02\x0a\x1c\x0a'
STRINGS_ONNX+='\x05\x77\x6f\x72\x64\x73\x0a\x03\x69\x64\x78\x12\x06\x70\x69\x63\x6b\x65\x64\x22\x06\x47\x61\x74'
STRINGS_ONNX+='\x68\x65\x72\x0a\x1b\x0a\x05\x76\x6f\x63\x61\x62\x0a\x03\x69\x64\x78\x12\x05\x6e\x61\x6d\x65\x64'
STRINGS_ONNX+='\x22\x06\x47\x61\x74\x68\x65\x72\x0a\x20\x0a\x05\x77\x6f\x72\x64\x73\x0a\x06\x63\x6f\x6c\x75\x6d'
STRINGS_ONNX+='\x6e\x12\x06\x73\x68\x61\x70\x65\x64\x22\x07\x52\x65\x73\x68\x61\x70\x65\x0a\x1c\x0a\x01\x78\x12'
STRINGS_ONNX+='\x06\x78\x5f\x74\x65\x78\x74\x22\x04\x43\x61\x73\x74\x2a\x09\x0a\x02\x74\x6f\x18\x08\xa0\x01\x02'
STRINGS_ONNX+='\x12\x07\x73\x74\x72\x69\x6e\x67\x73\x2a\x26\x08\x03\x10\x08\x32\x04\x7a\x65\x72\x6f\x32\x07\x4d'
STRINGS_ONNX+='\xc3\xbc\x6c\x6c\x65\x72\x32\x0a\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80\x42\x05\x76\x6f\x63\x61'
STRINGS_ONNX+='\x62\x2a\x19\x08\x02\x10\x07\x3a\x0b\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x01\x42\x06\x63\x6f'
STRINGS_ONNX+='\x6c\x75\x6d\x6e\x5a\x14\x0a\x05\x77\x6f\x72\x64\x73\x12\x0b\x0a\x09\x08\x08\x12\x05\x0a\x03\x12'
STRINGS_ONNX+='\x01\x6e\x5a\x11\x0a\x03\x69\x64\x78\x12\x0a\x0a\x08\x08\x07\x12\x04\x0a\x02\x08\x02\x5a\x0f\x0a'
STRINGS_ONNX+='\x01\x78\x12\x0a\x0a\x08\x08\x01\x12\x04\x0a\x02\x08\x03\x62\x14\x0a\x06\x70\x69\x63\x6b\x65\x64'
STRINGS_ONNX+='\x12\x0a\x0a\x08\x08\x08\x12\x04\x0a\x02\x08\x02\x62\x13\x0a\x05\x6e\x61\x6d\x65\x64\x12\x0a\x0a'
STRINGS_ONNX+='\x08\x08\x08\x12\x04\x0a\x02\x08\x02\x62\x19\x0a\x06\x73\x68\x61\x70\x65\x64\x12\x0f\x0a\x0d\x08'
STRINGS_ONNX+='\x08\x12\x09\x0a\x03\x12\x01\x6e\x0a\x02\x08\x01\x62\x14\x0a\x06\x78\x5f\x74\x65\x78\x74\x12\x0a'
STRINGS_ONNX+='\x0a\x08\x08\x08\x12\x04\x0a\x02\x08\x03\x42\x04\x0a\x00\x10\x11'
M="$TEST_TMP/strings.onnx"
printf "$STRINGS_ONNX" >"$M"
[ "$(wc -c <"$M")" -eq 376 ] || fail "strings.onnx has $(wc -c <"$M") bytes, want 376"

# ucs4 CP...: the UCS-4 little-endian bytes of code points (hex), as printf
# escapes: one '<U' element, padded with 0 code points by the caller.
ucs4() {
  local cp out=""
  for cp in "$@"; do
    local v=$((16#$cp))
    out+=$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((v & 255)) $(((v >> 8) & 255)) $(((v >> 16) & 255)) $((v >> 24)))
  done
  printf '%s' "$out"
}
MULLER=(4d fc 6c 6c 65 72)  # "Müller": 6 code points

# --- import and inspect --------------------------------------------------------
if expect_ok "$G" import "$M" -o "$TEST_TMP/strings.grove"; then
  expect_stdout '^nodes: 4 imported as grove ops, 0 constants folded'
  expect_stdout '^weights: 2, '
fi
if expect_ok "$G" inspect "$TEST_TMP/strings.grove"; then
  expect_stdout '^  words  string\[n\]$'
  expect_stdout '^  picked  string\[2\]$'
  expect_stdout '^  shaped  string\[n,1\]$'
  expect_stdout '^  x_text  string\[3\]$'
fi

# --- run on a '<U' input --------------------------------------------------------
# words = ["a", "Müller", ""] as '<U6'; idx = [1, 0]; x = [0.5, -0.25, 1.5].
write_npy "$TEST_TMP/words.npy" '<U6' '(3,)' \
  "$(ucs4 61 0 0 0 0 0)$(ucs4 "${MULLER[@]}")$(ucs4 0 0 0 0 0 0)"
write_npy "$TEST_TMP/idx.npy" '<i8' '(2,)' '\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
write_npy "$TEST_TMP/x.npy" '<f4' '(3,)' '\x00\x00\x00\x3f\x00\x00\x80\xbe\x00\x00\xc0\x3f'
OUTDIR="$TEST_TMP/out"
if expect_ok "$G" run "$TEST_TMP/strings.grove" --input "words=$TEST_TMP/words.npy" --input "idx=$TEST_TMP/idx.npy" \
    --input "x=$TEST_TMP/x.npy" --output-dir "$OUTDIR"; then
  expect_stdout '^picked: string\[2\] values=\["Müller", "a"\]$'
  expect_stdout '^named: string\[2\] values=\["Müller", "zero"\]$'
  expect_stdout '^shaped: string\[3,1\] values=\["a", "Müller", ""\]$'
  expect_stdout '^x_text: string\[3\] values=\["0\.5", "-0\.25", "1\.5"\]$'
  # The files are what numpy.save writes for the same arrays.
  write_npy "$TEST_TMP/want_picked.npy" '<U6' '(2,)' "$(ucs4 "${MULLER[@]}")$(ucs4 61 0 0 0 0 0)"
  write_npy "$TEST_TMP/want_shaped.npy" '<U6' '(3, 1)' \
    "$(ucs4 61 0 0 0 0 0)$(ucs4 "${MULLER[@]}")$(ucs4 0 0 0 0 0 0)"
  write_npy "$TEST_TMP/want_x_text.npy" '<U5' '(3,)' \
    "$(ucs4 30 2e 35 0 0)$(ucs4 2d 30 2e 32 35)$(ucs4 31 2e 35 0 0)"
  for out in picked shaped x_text; do
    cmp -s "$OUTDIR/$out.npy" "$TEST_TMP/want_$out.npy" || fail "$out.npy is not the '<U' file numpy writes"
  done
  # A written output reads back as an input.
  if expect_ok "$G" run "$TEST_TMP/strings.grove" --input "words=$OUTDIR/picked.npy" --input "idx=$TEST_TMP/idx.npy" \
      --input "x=$TEST_TMP/x.npy"; then
    expect_stdout '^picked: string\[2\] values=\["a", "Müller"\]$'
  fi
fi

# --- a '|S' input: bytes; long strings are cut, quotes and newlines escaped -------
LONG=$(printf 'x%.0s' {1..41})
write_npy "$TEST_TMP/bytes.npy" '|S41' '(3,)' \
  "${LONG}q\"\\x0a$(printf '\\x00%.0s' {1..38})$(printf '\\x00%.0s' {1..41})"
if expect_ok "$G" run "$TEST_TMP/strings.grove" --input "words=$TEST_TMP/bytes.npy" --input "idx=$TEST_TMP/idx.npy" \
    --input "x=$TEST_TMP/x.npy"; then
  expect_stdout "^shaped: string\\[3,1\\] values=\\[\"$(printf 'x%.0s' {1..40})\"\\.\\.\\., \"q\\\\\"\\\\n\", \"\"\\]$"
  expect_stdout '^picked: string\[2\] values=\["q\\"\\n", "x{40}"\.\.\.\]$'
fi

# --- errors ---------------------------------------------------------------------
expect_fail 1 "input 'words': .*x.npy holds f32\[3\] but the model expects string\[n\]" \
  "$G" run "$TEST_TMP/strings.grove" --input "words=$TEST_TMP/x.npy" --input "idx=$TEST_TMP/idx.npy" \
  --input "x=$TEST_TMP/x.npy"
write_npy "$TEST_TMP/object.npy" '|O' '(1,)' '\x80\x04\x95\x00\x00\x00\x00\x00'
expect_fail 1 "input 'words': .*object array, stored as a Python pickle.*dtype=str" \
  "$G" run "$TEST_TMP/strings.grove" --input "words=$TEST_TMP/object.npy" --input "idx=$TEST_TMP/idx.npy" \
  --input "x=$TEST_TMP/x.npy"
write_npy "$TEST_TMP/bad_code_point.npy" '<U1' '(2,)' "$(ucs4 61 110000)"
expect_fail 1 "element 1 of the '<U1' array holds 0x110000" \
  "$G" run "$TEST_TMP/strings.grove" --input "words=$TEST_TMP/bad_code_point.npy" --input "idx=$TEST_TMP/idx.npy" \
  --input "x=$TEST_TMP/x.npy"

finish
