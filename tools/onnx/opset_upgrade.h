// Models below ai.onnx opset 11 (grove imports 11..22 directly) are first
// converted with ONNX's version converter (onnx::version_conversion).
#ifndef GROVE_TOOLS_ONNX_OPSET_UPGRADE_H_
#define GROVE_TOOLS_ONNX_OPSET_UPGRADE_H_

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace grove::onnx_import {

// The model's ai.onnx opset version ("" or "ai.onnx" domain), or -1 when it
// imports none.
int DefaultDomainOpset(const ::onnx::ModelProto& model);

// Converts `model` from ai.onnx opset `from` to `to` with ONNX's version
// converter. The converter's failures (it throws) become an Unimplemented
// error that names the op it could not convert where it says so, and else
// lists the model's ops whose definition changed between the two opsets.
absl::StatusOr<::onnx::ModelProto> UpgradeOpset(const ::onnx::ModelProto& model, int from, int to);

}  // namespace grove::onnx_import

#endif  // GROVE_TOOLS_ONNX_OPSET_UPGRADE_H_
