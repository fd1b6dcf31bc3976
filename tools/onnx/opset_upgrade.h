// Models below ai.onnx opset 11 (grove imports 11..22 directly) are first
// converted with ONNX's version converter (onnx::version_conversion), in a
// child process: libonnx trusts its input, and a malformed model can crash it
// or make it run for hours.
#ifndef GROVE_TOOLS_ONNX_OPSET_UPGRADE_H_
#define GROVE_TOOLS_ONNX_OPSET_UPGRADE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace grove::onnx_import {

// The model's ai.onnx opset version ("" or "ai.onnx" domain), or -1 when it
// imports none. Any int64 the file holds, as it holds it.
int64_t DefaultDomainOpset(const ::onnx::ModelProto& model);

// Converts `model` from ai.onnx opset `from` to `to` with ONNX's version
// converter. First, in this process, every name a node or graph output reads
// must be defined (an InvalidArgument error names the node). Then a forked
// child runs ONNX's checker on the nodes, shape inference and the converter,
// and sends the converted model back; a child that dies by a signal, or is
// still running after `timeout_seconds`, is an InvalidArgument error, and a
// checker failure is one too. The converter's own failures (it throws) become
// an Unimplemented error that names the op it could not convert where it says
// so, and else lists the model's ops whose definition changed between the two
// opsets.
absl::StatusOr<::onnx::ModelProto> UpgradeOpset(const ::onnx::ModelProto& model, int from, int to,
                                                double timeout_seconds = 30);

}  // namespace grove::onnx_import

#endif  // GROVE_TOOLS_ONNX_OPSET_UPGRADE_H_
