#!/usr/bin/env bash
# Makes a servable Triton model repository in OUT from model_repository/:
# each model's config.pbtxt, grove_model.py as <model>/1/model.py, and the
# ONNX model imported with `grove import` as <model>/1/model.grove.
#
#   examples/triton/prepare_repository.sh build/grove /tmp/grove_repo
set -euo pipefail
grove=${1:?usage: prepare_repository.sh GROVE_BIN OUT}
out=${2:?usage: prepare_repository.sh GROVE_BIN OUT}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
declare -A onnx=(
  [silero_vad]="$root/models/silero_vad/silero_vad.onnx"
  [transformer_encoder]="$root/test/models/transformer_encoder/model.onnx"
)
for model in "${!onnx[@]}"; do
  mkdir -p "$out/$model/1"
  cp "$here/model_repository/$model/config.pbtxt" "$out/$model/config.pbtxt"
  cp "$here/grove_model.py" "$out/$model/1/model.py"
  "$grove" import "${onnx[$model]}" -o "$out/$model/1/model.grove" >/dev/null
done
echo "prepared $out: ${!onnx[*]}"
