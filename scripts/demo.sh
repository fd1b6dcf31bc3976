#!/usr/bin/env bash
# The demo: installs what is missing, builds, writes the demo models, and runs
# them with the grove command line tool and the C and C++ examples, at
# several input shapes and through both branches of a control-flow model; then
# imports a real trained model from ONNX (Silero VAD, models/silero_vad/) and
# runs it at several shapes, through both sample-rate branches, and streaming.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROVE_BUILD_DIR:-$root/build}"
"$root/scripts/install_deps.sh"
echo "== building"
GROVE_BUILD_DIR="$build" "$root/scripts/build.sh" grove_cli grove_make_models example_cpp example_c example_sequence example_text vad_stream
grove="$build/grove"
models="$build/demo"
"$build/examples/grove_make_models" "$models"

step() { echo; echo "== $*"; }
step "inspect the transformer block, with its memory plan for batch 2, seq 16"
"$grove" inspect "$models/transformer.grove" --shape x=2x16x32
step "MLP, batch 3"
"$grove" run "$models/mlp.grove" --input x="$models/mlp_x.npy" --output-dir "$models/out"
step "transformer block at two shapes (batch 1 x seq 8, batch 2 x seq 16), 5 runs each"
"$grove" run "$models/transformer.grove" --input x="$models/transformer_x_1x8.npy" --repeat 5
"$grove" run "$models/transformer.grove" --input x="$models/transformer_x_2x16.npy" --repeat 5
step "early exit (If): positive input takes the deep branch (8 outputs per row)"
"$grove" run "$models/early_exit.grove" --input x="$models/early_exit_pos.npy"
step "early exit (If): negative input takes the shallow branch (3 outputs per row)"
"$grove" run "$models/early_exit.grove" --input x="$models/early_exit_neg.npy"
step "Loop: 6 trips, no early stop"
"$grove" run "$models/loop.grove" --input trip_count="$models/loop_trip_count.npy" \
  --input x="$models/loop_x.npy" --input limit="$models/loop_limit.npy"
step "Loop: stops early once the sum reaches 50"
"$grove" run "$models/loop.grove" --input trip_count="$models/loop_trip_count.npy" \
  --input x="$models/loop_x.npy" --input limit="$models/loop_limit_small.npy"
step "C++ example (batch 1 and 3 in one session)"
"$build/examples/example_cpp" "$models/mlp.grove"
step "C example through the C ABI"
"$build/examples/example_c" "$models/mlp.grove"
step "a list built step by step in a Loop (a sequence, PyTorch's list.append), read back with RunValues"
"$build/examples/example_sequence"
step "strings: lower-case and drop stopwords, count a vocabulary, numbers back to text"
"$build/examples/example_text"

# A real model: Silero VAD 6.2.3 (MIT), a trained voice activity detector from
# the silero-vad package. Its ONNX graph picks the 16 kHz or the 8 kHz path
# with an If on the `sr` input and runs Conv and LSTM layers.
vad="$root/models/silero_vad/testdata"
vad_run() {  # vad_run CASE [REPEAT]: onnxruntime's answer for a bundled case, then grove's
  grep "^$1:" "$vad/references.txt"
  "$grove" run "$models/silero_vad.grove" --input input="$vad/$1_input.npy" \
    --input state="$vad/$1_state.npy" --input sr="$vad/$1_sr.npy" --repeat "${2:-1}"
}
step "import Silero VAD from ONNX (input, state and sr; the unnamed dims get names)"
"$grove" import "$root/models/silero_vad/silero_vad.onnx" -o "$models/silero_vad.grove" \
  --dim input_d0=1:16 --dim input_d1=64:1024 --dim state_d1=1:16
step "Silero VAD at 16 kHz (sr=16000 branch), batch 1 x 576 samples of speech, 5 runs"
vad_run b1_16k_576 5
step "Silero VAD at 16 kHz, batch 2 x 576 (speech, noise)"
vad_run b2_16k_576
step "Silero VAD at 8 kHz (sr=8000 branch), batch 3 x 288 (speech, speech, noise)"
vad_run b3_8k_288
step "Silero VAD streaming a spoken phrase through one session: 16 kHz, 8 kHz, 16 kHz again"
"$build/examples/vad_stream" "$models/silero_vad.grove" "$vad"
echo
echo "demo done: models and outputs are in $models"
