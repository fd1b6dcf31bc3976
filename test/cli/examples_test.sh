# The C++ and C examples run the demo MLP, agree with each other, and fail
# cleanly on bad arguments.
source "$(dirname "$0")/common.bash"
make_models

for var in EXAMPLE_CPP EXAMPLE_C EXAMPLE_SEQUENCE EXAMPLE_TEXT; do
  [ -n "${!var:-}" ] || { echo "FAIL: $var is not set (run through ctest)" >&2; exit 1; }
done

for example in "$EXAMPLE_CPP" "$EXAMPLE_C"; do
  name=$(basename "$example")
  if expect_ok "$example" "$MODELS/mlp.grove"; then
    expect_stdout '^batch 1:$'
    expect_stdout '^batch 3:$'
    expect_stdout '^  y\[2\] = ([0-9.]+ ){4}  \(sum 1\.00000\)$'
    expect_stdout '^OK$'
    grep '^  y\[' "$OUT" >"$TEST_TMP/$name.rows"
  fi
  capture "$example"
  [ "$RC" -eq 2 ] || fail "$name without arguments exited $RC, want 2"
  capture "$example" "$TEST_TMP/no_such.grove"
  [ "$RC" -eq 1 ] || fail "$name on a missing model exited $RC, want 1"
  grep -q "no_such.grove" "$ERR" || fail "$name does not name the missing model"
done

# Sequences: a list carried through a Loop, returned by RunValues.
if expect_ok "$EXAMPLE_SEQUENCE"; then
  expect_stdout '^output list: sequence of f32$'
  expect_stdout '^5 steps: stacked f32\[5, 2\], list seq\(f32\) of 5$'
  expect_stdout '^  row 4 = \[4, -2\]$'
  expect_stdout '^OK$'
fi

# Strings: StringNormalizer, TfIdfVectorizer over a string vocabulary, Cast to
# string; a copied output outlives the next run.
if expect_ok "$EXAMPLE_TEXT"; then
  expect_stdout '^5 words -> 2 tokens: grove graph$'
  expect_stdout '^7 words -> 6 tokens: kernel graph graph grove kernel kernel$'
  expect_stdout '^  kernel 3 \(as text "3"\)$'
  expect_stdout "^first sentence's tokens, kept: grove graph$"
  expect_stdout '^OK$'
fi

# Same model, same inputs, two APIs: the same numbers.
if [ -f "$TEST_TMP/$(basename "$EXAMPLE_CPP").rows" ] && [ -f "$TEST_TMP/$(basename "$EXAMPLE_C").rows" ]; then
  cmp -s "$TEST_TMP/$(basename "$EXAMPLE_CPP").rows" "$TEST_TMP/$(basename "$EXAMPLE_C").rows" ||
    fail "the C and C++ examples print different outputs"
fi

finish
