#!/usr/bin/env bash
# ctest examples.rust: builds examples/rust/mlp.rs with rustc (and with cargo,
# when installed) against this build's libgrove.so, runs it on the demo MLP,
# and checks that it prints the same rows as the C example (examples/mlp_c.c)
# and reports the two refused calls. Exits 77 (ctest: skipped) when rustc is not installed (rustup, or
# Debian's `apt-get install rustc`: not in scripts/install_deps.sh, ~270 MB).
set -euo pipefail
: "${SOURCE_DIR:?}" "${GROVE_BUILD_DIR:?}" "${EXAMPLE_C:?}" "${MAKE_MODELS:?}" "${TEST_TMP:?}"
command -v rustc >/dev/null || { echo "SKIPPED: rustc is not installed (apt-get install rustc, or rustup)"; exit 77; }
[ -f "$GROVE_BUILD_DIR/libgrove.so" ] || { echo "SKIPPED: no $GROVE_BUILD_DIR/libgrove.so (GROVE_BUILD_SHARED=ON)"; exit 77; }
lib_dir=$(cd "$GROVE_BUILD_DIR" && pwd)
rm -rf "$TEST_TMP" && mkdir -p "$TEST_TMP"
rustc --version
rustc --edition 2018 -O -L "$lib_dir" -l dylib=grove -C "link-arg=-Wl,-rpath,$lib_dir" \
  "$SOURCE_DIR/examples/rust/mlp.rs" -o "$TEST_TMP/mlp_rust"
"$MAKE_MODELS" "$TEST_TMP" >/dev/null

"$TEST_TMP/mlp_rust" "$TEST_TMP/mlp.grove" >"$TEST_TMP/rust.out"
"$EXAMPLE_C" "$TEST_TMP/mlp.grove" >"$TEST_TMP/c.out"
cat "$TEST_TMP/rust.out"
fail() { echo "FAIL: $*"; exit 1; }
# The same numbers as the C example, row by row, and the same stats line.
diff <(grep -E '^(batch|  y\[|runs)' "$TEST_TMP/c.out") <(grep -E '^(batch|  y\[|runs)' "$TEST_TMP/rust.out") ||
  fail "the Rust example's rows differ from the C example's"
[ "$(grep -c '^  y\[' "$TEST_TMP/rust.out")" = 4 ] || fail "expected 4 rows"
grep -q "refused as expected: grove_session_run: input 'x'.*(INVALID_ARGUMENT)" "$TEST_TMP/rust.out" ||
  fail "no INVALID_ARGUMENT for a [2, 15] input"
grep -q "refused as expected: grove_model_load_file: .*(NOT_FOUND)" "$TEST_TMP/rust.out" ||
  fail "no NOT_FOUND for a missing model"
tail -n1 "$TEST_TMP/rust.out" | grep -qx OK || fail "the example did not end with OK"

# Errors reach the exit status: a file that is not a model.
# The Cargo package builds the same program (offline: it has no dependencies).
if command -v cargo >/dev/null; then
  GROVE_BUILD_DIR="$lib_dir" CARGO_TARGET_DIR="$TEST_TMP/cargo" \
    cargo build --offline -q --manifest-path "$SOURCE_DIR/examples/rust/Cargo.toml"
  "$TEST_TMP/cargo/debug/mlp_rust" "$TEST_TMP/mlp.grove" >"$TEST_TMP/cargo.out"
  diff "$TEST_TMP/rust.out" "$TEST_TMP/cargo.out" || fail "the Cargo build prints otherwise"
else
  echo "cargo is not installed: only the rustc build checked"
fi

echo "not a model" >"$TEST_TMP/bad.grove"
if "$TEST_TMP/mlp_rust" "$TEST_TMP/bad.grove" >"$TEST_TMP/bad.out" 2>&1; then fail "a bad model file exited 0"; fi
cat "$TEST_TMP/bad.out"
grep -q "bad.grove: grove_model_" "$TEST_TMP/bad.out" || fail "no grove message for a bad model file"
echo PASS
