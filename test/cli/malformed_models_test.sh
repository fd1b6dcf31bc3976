# A model file is untrusted input: truncated, bit-flipped and garbage models
# must make `grove run` and `grove inspect` fail with a message (exit 1), or
# run if the damage happens to be harmless (exit 0), and never crash or hang.
source "$(dirname "$0")/common.bash"
make_models
make_inputs
G=$GROVE_BIN
CHECKED=0
REJECTED=0

# check_model FILE WHAT STRICT: runs both commands on FILE, with input x from
# $RUN_INPUT and of shape $SHAPE; STRICT=1 demands exit 1, STRICT=0 also
# accepts 0.
check_model() {
  local file=$1 what=$2 strict=$3 cmd
  for cmd in run inspect; do
    if [ "$cmd" = run ]; then
      capture timeout 60 "$G" run "$file" --input "x=$RUN_INPUT"
    else
      capture timeout 60 "$G" inspect "$file" --shape "x=$SHAPE"
    fi
    CHECKED=$((CHECKED + 1))
    if [ "$RC" -eq 124 ]; then
      fail "$what: grove $cmd hung"
    elif [ "$RC" -ge 128 ]; then
      fail "$what: grove $cmd crashed (signal $((RC - 128)))"
      show "$cmd" "$file"
    elif [ "$RC" -eq 1 ]; then
      REJECTED=$((REJECTED + 1))
      if ! grep -q "^grove: error: " "$ERR" || grep -q "internal error" "$ERR"; then
        fail "$what: grove $cmd exited 1 without a proper error message"
        show "$cmd" "$file"
      fi
    elif [ "$RC" -ne 0 ] || [ "$strict" -eq 1 ]; then
      fail "$what: grove $cmd exited $RC, want 1"
      show "$cmd" "$file"
    fi
  done
}

# flip_byte FILE OFFSET: inverts every bit of one byte in place.
flip_byte() {
  local b
  b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "\\x$(printf %02x $((b ^ 0xff)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# pseudo_random_bytes N SEED: N deterministic bytes.
pseudo_random_bytes() {
  LC_ALL=C awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); for (i = 0; i < n; i++) printf "%c", int(rand() * 256) }'
}

BAD="$TEST_TMP/bad.grove"
for model in mlp early_exit; do
  src="$MODELS/$model.grove"
  RUN_INPUT="$INPUTS/${model}_x.npy"
  if [ "$model" = mlp ]; then SHAPE=2x16; else SHAPE=3x8; fi
  size=$(wc -c <"$src")

  # Truncations: the header, the middle of the FlatBuffer, the weights.
  for len in 0 1 4 7 8 12 16 24 32 48 64 100 200 $((size / 4)) $((size / 2)) $((size * 3 / 4)) \
             $((size - 64)) $((size - 8)) $((size - 1)); do
    head -c "$len" "$src" >"$BAD"
    check_model "$BAD" "$model truncated to $len bytes" 1
  done

  # Single-byte flips: every other byte of the first 96 (the header, the
  # root table and its vtable), then 40 spread to the end. Under ASan
  # (scripts/sanitize.sh sets GROVE_TEST_SANITIZED) half as many: each run
  # costs several times more there, and the model_loader fuzzer covers the
  # loader in that build far more thoroughly than these flips.
  stride=2
  spread=40
  if [ -n "${GROVE_TEST_SANITIZED:-}" ]; then stride=4; spread=20; fi
  offsets=$(seq 0 "$stride" 95; seq 96 $(((size - 96) / spread + 1)) $((size - 1)))
  for off in $offsets; do
    cp "$src" "$BAD"
    flip_byte "$BAD" "$off"
    check_model "$BAD" "$model with byte $off flipped" 0
  done

  # The real file identifier and size prefix, then noise.
  for seed in 1 2 3 4 5; do
    { head -c 8 "$src"; pseudo_random_bytes "$size" "$seed"; } >"$BAD"
    check_model "$BAD" "$model header + noise (seed $seed)" 1
  done
done

printf 'definitely not a grove model\n' >"$BAD"
check_model "$BAD" "text file" 1
pseudo_random_bytes 4096 42 >"$BAD"
check_model "$BAD" "random bytes" 1
: >"$BAD"
check_model "$BAD" "empty file" 1
check_model "$TEST_TMP" "a directory" 1

# Flips that all happen to be harmless would mean the checks never ran.
[ "$REJECTED" -gt $((CHECKED / 4)) ] || fail "only $REJECTED of $CHECKED damaged models were rejected"
echo "$CHECKED runs on damaged models, $REJECTED rejected"
finish
