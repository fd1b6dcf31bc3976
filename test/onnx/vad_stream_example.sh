#!/usr/bin/env bash
# The demo's Silero VAD section as a test: `grove import` the trained model,
# then examples/vad_stream streams the bundled phrase at 16 kHz, 8 kHz and
# 16 kHz again through one session. vad_stream exits non-zero when a speech
# probability is more than 1e-4 away from onnxruntime's; here we also check
# that the plans were made on the first chunk of each kind only.
set -euo pipefail
: "${GROVE_BIN:?}" "${VAD_STREAM:?}" "${SOURCE_DIR:?}" "${TEST_TMP:?}"
rm -rf "$TEST_TMP" && mkdir -p "$TEST_TMP"
"$GROVE_BIN" import "$SOURCE_DIR/models/silero_vad/silero_vad.onnx" -o "$TEST_TMP/silero_vad.grove" \
  --dim input_d0=1:16 --dim input_d1=64:1024 --dim state_d1=1:16
"$VAD_STREAM" "$TEST_TMP/silero_vad.grove" "$SOURCE_DIR/models/silero_vad/testdata" | tee "$TEST_TMP/out.txt"
# Three streams of 63 chunks; the third repeats the first, so it plans nothing.
grep -q '^session: 189 runs' "$TEST_TMP/out.txt"
[ "$(grep -c '63 chunks: plans made' "$TEST_TMP/out.txt")" = 3 ]
grep -q '63 chunks: plans made 0,' "$TEST_TMP/out.txt"
grep -q 'speech starts' "$TEST_TMP/out.txt"
echo "vad_stream: ok"
