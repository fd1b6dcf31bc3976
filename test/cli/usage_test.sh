# `grove` itself: help, version, and command lines that make no sense.
source "$(dirname "$0")/common.bash"
G=$GROVE_BIN

if expect_ok "$G" --help; then
  expect_stdout '^Usage: grove <command>'
  expect_stdout '^  run '
  expect_stdout '^  inspect '
fi
expect_ok "$G" help
expect_ok "$G" -h
if expect_ok "$G" version; then expect_stdout '^grove [0-9]+\.[0-9]+\.[0-9]+ \(model format [0-9]+\)$'; fi
expect_ok "$G" --version
if expect_ok "$G" inspect --help; then expect_stdout '^Usage: grove inspect MODEL.grove'; fi

capture "$G"
[ "$RC" -eq 2 ] || fail "no arguments exited $RC, want 2"
grep -q '^Usage: grove' "$ERR" || fail "no arguments printed no usage on stderr"

expect_fail 2 "unknown command 'frobnicate'" "$G" frobnicate
expect_fail 2 "unknown flag '--frobnicate'" "$G" --frobnicate
expect_fail 2 "'version' takes only --verbose" "$G" version extra
# --verbose: what the CPU offers (cpuid) and the CPU backend's paths on it.
if expect_ok "$G" version --verbose; then
  expect_stdout '^grove [0-9]+\.[0-9]+\.[0-9]+ \(model format [0-9]+\)$'
  expect_stdout '^cpu: +.*[0-9]+ logical cores$'
  expect_stdout '^cpu features: +'
  expect_stdout '^onednn: +[0-9]+\.[0-9]+\.[0-9]+, JIT ISA [a-z0-9_.]+'
  expect_stdout '^blas: +.*, core '
  expect_stdout '^grove avx2 kernels: +(on|off) '
  expect_stdout '^grove lstm kernel: +(on|off)'
  # Where /proc/cpuinfo lists avx2 and fma, the AVX2 kernels are on.
  if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
    expect_stdout '^cpu features: .*\bavx2\b.*\bfma\b'
    expect_stdout '^grove avx2 kernels: +on '
    expect_stdout '^grove lstm kernel: +on, avx(2|512) '
  fi
fi
expect_ok "$G" version -v

# OpenBLAS is loaded on the first reference GEMM (lib/backends/cpu/blas_gemm.h),
# never linked: plain `grove version` does not load it (its threads and buffers
# cost every start), and without it the reference GEMMs run plain loops.
if readelf -d "$G" | grep -E 'NEEDED.*\[libopenblas' >/dev/null; then fail "grove links OpenBLAS: $(readelf -d "$G" | grep NEEDED)"; fi
if command -v ldd >/dev/null && ldd "$G" | grep -E 'libopenblas' >/dev/null; then fail "grove needs OpenBLAS at load: $(ldd "$G")"; fi
if LD_DEBUG=files "$G" version 2>&1 >/dev/null | grep -q 'file=.*libopenblas'; then fail "grove version loaded OpenBLAS"; fi
make_models
make_inputs
# The MLP's MatMuls on the reference kernels (GROVE_CPU_ONEDNN=0): through
# OpenBLAS, then with GROVE_OPENBLAS_LIBRARY naming no file (plain loops):
# the same summary (printed to 6 significant digits), and -v says why.
if GROVE_CPU_ONEDNN=0 expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device cpu; then
  grep '^y:' "$OUT" >"$TEST_TMP/blas_y.txt"
  if GROVE_CPU_ONEDNN=0 GROVE_OPENBLAS_LIBRARY="$TEST_TMP/no-such-libopenblas.so" \
     expect_ok "$G" run "$MODELS/mlp.grove" --input "x=$INPUTS/mlp_x.npy" --device cpu; then
    grep '^y:' "$OUT" | diff "$TEST_TMP/blas_y.txt" - >/dev/null || fail "plain-loop GEMM output differs: $(grep '^y:' "$OUT") vs $(cat "$TEST_TMP/blas_y.txt")"
  fi
fi
if GROVE_OPENBLAS_LIBRARY="$TEST_TMP/no-such-libopenblas.so" expect_ok "$G" version -v; then
  expect_stdout '^blas: +OpenBLAS not loaded \(GROVE_OPENBLAS_LIBRARY=.*no-such-libopenblas\.so: .*\): the reference kernels. GEMMs run plain loops'
fi

finish
