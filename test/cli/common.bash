# Shared by the shell tests in this folder (sourced, so not itself a test:
# ctest runs only *.sh). Needs GROVE_BIN, EXAMPLE_CPP, EXAMPLE_C, MAKE_MODELS,
# TEST_TMP and SOURCE_DIR from test/CMakeLists.txt.
set -u

for var in GROVE_BIN MAKE_MODELS TEST_TMP; do
  if [ -z "${!var:-}" ]; then
    echo "FAIL: $var is not set (run through ctest)" >&2
    exit 1
  fi
done

rm -rf "$TEST_TMP"
mkdir -p "$TEST_TMP"
OUT="$TEST_TMP/stdout"
ERR="$TEST_TMP/stderr"
FAILURES=0

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

# Ends the test: exit 1 if anything failed.
finish() {
  if [ "$FAILURES" -ne 0 ]; then
    echo "$FAILURES check(s) failed" >&2
    exit 1
  fi
  echo "PASS"
}

# Runs a command with stdout/stderr in $OUT/$ERR and its status in $RC.
capture() {
  "$@" >"$OUT" 2>"$ERR"
  RC=$?
}

show() {
  echo "  command: $*" >&2
  echo "  exit status: $RC" >&2
  sed 's/^/  stdout: /' "$OUT" | head -20 >&2
  sed 's/^/  stderr: /' "$ERR" | head -20 >&2
}

# expect_ok CMD...: exit 0.
expect_ok() {
  capture "$@"
  if [ "$RC" -ne 0 ]; then
    fail "expected success"
    show "$@"
    return 1
  fi
}

# expect_fail STATUS PATTERN CMD...: exit STATUS with "grove: error:" and
# PATTERN (an extended regex) in stderr. A status >= 128 is a crash.
expect_fail() {
  local want=$1 pattern=$2
  shift 2
  capture "$@"
  if [ "$RC" -ge 128 ]; then
    fail "crashed (signal $((RC - 128)))"
    show "$@"
    return 1
  fi
  if [ "$RC" -ne "$want" ] || ! grep -q "grove: error:" "$ERR" || ! grep -Eq -- "$pattern" "$ERR"; then
    fail "expected exit $want with an error matching '$pattern'"
    show "$@"
    return 1
  fi
  if grep -q "internal error" "$ERR"; then
    fail "an internal error escaped"
    show "$@"
    return 1
  fi
}

# expect_stdout PATTERN: the last command's stdout matches (extended regex).
expect_stdout() {
  if ! grep -Eq -- "$1" "$OUT"; then
    fail "stdout does not match '$1'"
    sed 's/^/  stdout: /' "$OUT" | head -30 >&2
    return 1
  fi
}

# Writes the demo models into $MODELS.
make_models() {
  MODELS="$TEST_TMP/models"
  mkdir -p "$MODELS"
  if ! "$MAKE_MODELS" "$MODELS" >"$TEST_TMP/make_models.log" 2>&1; then
    echo "FAIL: $MAKE_MODELS $MODELS failed:" >&2
    cat "$TEST_TMP/make_models.log" >&2
    exit 1
  fi
  local m
  for m in mlp transformer early_exit loop; do
    [ -f "$MODELS/$m.grove" ] || { echo "FAIL: $MAKE_MODELS wrote no $m.grove" >&2; exit 1; }
  done
}

# The bytes of a little-endian f32 as printf escapes, for a few exact values.
F32_VALUES=('\x00\x00\x00\x3f' '\x00\x00\x80\xbe' '\x00\x00\x80\x3f' '\x00\x00\xc0\xbf'
            '\x00\x00\x00\x3e' '\x00\x00\x00\x40' '\x00\x00\x40\xbf')

# f32_data N: N floats cycling through F32_VALUES, as printf escapes.
f32_data() {
  local n=$1 i data=""
  for ((i = 0; i < n; i++)); do data+="${F32_VALUES[i % ${#F32_VALUES[@]}]}"; done
  printf '%s' "$data"
}

# write_npy FILE DESCR SHAPE DATA: a version 1.0 .npy file with the header
# dict for DESCR ('<f4') and SHAPE (a Python tuple: '(2, 16)', '()'), then
# DATA (printf escapes), aligned as numpy aligns it.
write_npy() {
  local file=$1 descr=$2 shape=$3 data=$4
  local dict="{'descr': '$descr', 'fortran_order': False, 'shape': $shape, }"
  local unpadded=$((10 + ${#dict} + 1))
  local pad=$(((64 - unpadded % 64) % 64))
  local len=$((${#dict} + pad + 1))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8)))"
    printf '%s' "$dict"
    printf "%${pad}s" ''
    printf '\n'
    printf "$data"
  } >"$file"
}

# Sample inputs for the demo models, in $TEST_TMP/inputs.
make_inputs() {
  INPUTS="$TEST_TMP/inputs"
  mkdir -p "$INPUTS"
  write_npy "$INPUTS/mlp_x.npy" '<f4' '(2, 16)' "$(f32_data 32)"
  write_npy "$INPUTS/transformer_x.npy" '<f4' '(2, 5, 32)' "$(f32_data 320)"
  write_npy "$INPUTS/early_exit_x.npy" '<f4' '(3, 8)' "$(f32_data 24)"
  write_npy "$INPUTS/loop_trip_count.npy" '<i8' '()' '\x05\x00\x00\x00\x00\x00\x00\x00'
  write_npy "$INPUTS/loop_x.npy" '<f4' '(4,)' "$(f32_data 4)"
  write_npy "$INPUTS/loop_limit.npy" '<f4' '()' '\x00\x00\x7a\x44'  # 1000.0
}
