// ONNX tensors as grove tensors: the dtype mapping and the decoding of an
// onnx::TensorProto (raw_data, the typed fields, or external data beside the
// model), shared by the importer and the conformance runner.
//
//   absl::StatusOr<grove::Tensor> t = grove::onnx_import::DecodeTensor(proto, "/models/bert");
//
// A TensorProto is untrusted: dims and byte counts are checked before anything
// is allocated, and external data may only name a file inside the model's
// directory.
#ifndef GROVE_TOOLS_ONNX_ONNX_TENSOR_H_
#define GROVE_TOOLS_ONNX_ONNX_TENSOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"
#include "onnx/onnx_pb.h"

namespace grove::onnx_import {

// The grove dtype of an ONNX TensorProto.DataType (STRING is kString);
// Unimplemented for types grove lacks (complex, float8, 4-bit, ...).
absl::StatusOr<DType> DTypeFromOnnx(int32_t onnx_type);

// "FLOAT", "STRING", ...; "type 42" for values ONNX does not define.
std::string OnnxTypeName(int32_t onnx_type);

// Decodes `proto` into an owning tensor. `model_dir` is the directory that
// external data is resolved against; empty refuses external data. A STRING
// tensor is read from string_data (its bytes as they are) into a kString
// tensor that owns them; as external data it is refused.
absl::StatusOr<Tensor> DecodeTensor(const ::onnx::TensorProto& proto, absl::string_view model_dir);

}  // namespace grove::onnx_import

#endif  // GROVE_TOOLS_ONNX_ONNX_TENSOR_H_
