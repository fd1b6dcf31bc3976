#!/usr/bin/env bash
# The demo: installs what is missing, builds, writes the demo models, and runs
# them with the grove command line tool and the C and C++ examples, at
# several input shapes and through both branches of a control-flow model.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROVE_BUILD_DIR:-$root/build}"
"$root/scripts/install_deps.sh"
echo "== building"
GROVE_BUILD_DIR="$build" "$root/scripts/build.sh" grove_cli grove_make_models example_cpp example_c
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
echo
echo "demo done: models and outputs are in $models"
