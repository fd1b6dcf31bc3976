// DLPack in the C ABI (grove_c.h, "DLPack"): a DLManagedTensor viewed as a
// grove_tensor_t for an input (zero copy, nothing owned), a run that takes
// its inputs as DLPack tensors (consuming them: each deleter called once,
// whatever the run returns) and hands back each output as a DLManagedTensor
// that owns a copy of it (its deleter frees grove's buffer).
//
//   DLManagedTensor* in = torch_or_numpy_tensor;   // the caller's
//   DLManagedTensor* out = NULL;
//   grove_status_t* s = grove_session_run_dlpack(session, &in, 1, &out, 1);
//   // `in` was released by grove; on success `out` is the caller's:
//   if (s == NULL) out->deleter(out);
//
// Only DLPack 0.6's unversioned DLManagedTensor (Debian's libdlpack-dev) is
// taken; bool is DLPack 0.8's kDLBool code, which 0.6's header lacks.
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include <cstring>

#include "grove/grove_c.h"
#include "lib/c/c_api_internal.h"

namespace {

using grove::c_internal::CheckSession;
using grove::c_internal::Describe;
using grove::c_internal::FromAbsl;
using grove::c_internal::Guard;
using grove::c_internal::InvalidArgument;
using grove::c_internal::MakeStatus;
using grove::c_internal::NullArgument;
using grove::c_internal::SessionBusy;
using grove::c_internal::SessionEntry;

static_assert(DLPACK_VERSION >= 60, "grove needs DLPack 0.6 or later (libdlpack-dev)");

// DLPack 0.8's kDLBool (8-bit booleans); DLPack 0.6 has no code for bool.
constexpr uint8_t kDLBoolCode = 6;

std::string DeviceName(int32_t type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
  }
  return absl::StrCat("device type ", type);
}

std::string DataTypeName(DLDataType t) {
  return absl::StrCat("(code ", t.code, ", bits ", t.bits, ", lanes ", t.lanes, ")");
}

// The grove dtype of a DLPack element type; an error for vectors (lanes),
// complex numbers, opaque handles and widths grove lacks.
absl::StatusOr<grove::DType> DTypeOf(DLDataType t, const std::string& what) {
  if (t.lanes != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": dtype ", DataTypeName(t), " has ", t.lanes,
                                                   " lanes; grove takes scalar elements (lanes 1) only"));
  }
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 16) return grove::DType::kF16;
      if (t.bits == 32) return grove::DType::kF32;
      if (t.bits == 64) return grove::DType::kF64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return grove::DType::kBF16;
      break;
    case kDLInt:
      if (t.bits == 8) return grove::DType::kI8;
      if (t.bits == 16) return grove::DType::kI16;
      if (t.bits == 32) return grove::DType::kI32;
      if (t.bits == 64) return grove::DType::kI64;
      break;
    case kDLUInt:
      if (t.bits == 8) return grove::DType::kU8;
      if (t.bits == 16) return grove::DType::kU16;
      if (t.bits == 32) return grove::DType::kU32;
      if (t.bits == 64) return grove::DType::kU64;
      break;
    case kDLBoolCode:
      if (t.bits == 8) return grove::DType::kBool;
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": dtype ", DataTypeName(t),
      " has no grove dtype (grove takes kDLFloat 16/32/64, kDLBfloat 16, kDLInt and kDLUInt 8/16/32/64, "
      "kDLBool 8)"));
}

// The DLPack element type of a grove dtype (not kString: DLPack has no text).
DLDataType DataTypeOf(grove::DType dtype) {
  const auto bits = static_cast<uint8_t>(grove::DTypeSize(dtype) * 8);
  switch (dtype) {
    case grove::DType::kF16:
    case grove::DType::kF32:
    case grove::DType::kF64: return DLDataType{kDLFloat, bits, 1};
    case grove::DType::kBF16: return DLDataType{kDLBfloat, bits, 1};
    case grove::DType::kI8:
    case grove::DType::kI16:
    case grove::DType::kI32:
    case grove::DType::kI64: return DLDataType{kDLInt, bits, 1};
    case grove::DType::kBool: return DLDataType{kDLBoolCode, 8, 1};
    default: return DLDataType{kDLUInt, bits, 1};
  }
}

// Checks a DLPack tensor given for an input of a session on `device`
// (`cuda_device`: its CUDA ordinal) and views it in place. `what` names it
// in messages ("input 0 ('x')").
absl::StatusOr<grove_tensor_t> ViewOfDlpack(const DLTensor& t, grove::Device device, int cuda_device,
                                            const std::string& what) {
  // The raw value: a caller's device_type may be none of DLDeviceType's
  // enumerators (loading it as the enum would be undefined behaviour).
  static_assert(sizeof(t.device.device_type) == sizeof(int32_t));
  int32_t type;
  std::memcpy(&type, &t.device.device_type, sizeof(type));
  if (type == kDLCUDA) {
    if (device != grove::Device::kCuda) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": is on kDLCUDA device ", t.device.device_id,
          " but the session runs on the CPU; give host memory (kDLCPU) or use a CUDA session"));
    }
    if (t.device.device_id != cuda_device) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": is on kDLCUDA device ", t.device.device_id,
                                                     " but the session runs on CUDA device ", cuda_device));
    }
  } else if (type != kDLCPU && type != kDLCUDAHost) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": is on ", DeviceName(type),
                                                   "; grove takes kDLCPU and kDLCUDAHost (host memory), and "
                                                   "kDLCUDA on a CUDA session"));
  }
  if (t.ndim < 0 || t.ndim > GROVE_MAX_RANK) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ndim ", t.ndim, " is outside 0..", GROVE_MAX_RANK));
  }
  if (t.ndim > 0 && t.shape == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": shape is NULL"));
  absl::StatusOr<grove::DType> dtype = DTypeOf(t.dtype, what);
  if (!dtype.ok()) return dtype.status();
  const uint64_t element_size = grove::DTypeSize(*dtype);

  grove_tensor_t out{};
  out.dtype = static_cast<grove_dtype_t>(*dtype);
  out.rank = t.ndim;
  uint64_t elements = 1;
  for (int i = 0; i < t.ndim; ++i) {
    const int64_t d = t.shape[i];
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": dim ", i, " is negative (", d, ")"));
    out.dims[i] = d;
  }
  const std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  for (int64_t d : shape) {
    if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / element_size / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape [", absl::StrJoin(shape, ","), "] overflows"));
    }
    elements *= static_cast<uint64_t>(d);
  }
  // Compact row-major: each dim of extent above 1 has the stride of the dims
  // after it (a dim of extent 1 is never stepped, so its stride is free).
  if (t.strides != nullptr && elements > 0) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t.strides[i] != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": strides [", absl::StrJoin(absl::MakeConstSpan(t.strides, t.ndim), ","), "] (elements) of shape [",
            absl::StrJoin(shape, ","), "] are not compact row-major (dim ", i, " has stride ", t.strides[i],
            ", expected ", expected, "); grove reads inputs in place, so give a contiguous copy"));
      }
      expected *= shape[i];
    }
  }
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  if (elements > 0 && t.data == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": data is NULL"));
  if (t.byte_offset > std::numeric_limits<uintptr_t>::max() - base) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": data + byte_offset (", t.byte_offset, ") overflows"));
  }
  const uintptr_t address = base + static_cast<uintptr_t>(t.byte_offset);
  if (address % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": data + byte_offset (", t.byte_offset, ") is not aligned to its ", grove::DTypeName(*dtype),
        " elements (", element_size, " bytes)"));
  }
  out.data = elements > 0 ? reinterpret_cast<void*>(address) : nullptr;
  out.byte_size = static_cast<size_t>(elements * element_size);
  return out;
}

// An output handed to the caller: the DLManagedTensor, and the copy and the
// shape and strides arrays it points to. manager_ctx is this object.
struct DlpackOutput {
  DLManagedTensor managed{};
  grove::Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

void DeleteDlpackOutput(DLManagedTensor* self) {
  if (self != nullptr) delete static_cast<DlpackOutput*>(self->manager_ctx);
}

absl::StatusOr<std::unique_ptr<DlpackOutput>> ToDlpack(const grove::TensorView& view) {
  auto out = std::make_unique<DlpackOutput>();
  absl::StatusOr<grove::Tensor> copy = grove::Tensor::CopyOf(view);
  if (!copy.ok()) return copy.status();
  out->tensor = *std::move(copy);
  out->shape = out->tensor.shape();
  out->strides.assign(out->shape.size(), 1);
  for (size_t i = out->shape.size(); i > 1; --i) out->strides[i - 2] = out->strides[i - 1] * out->shape[i - 1];
  DLTensor& t = out->managed.dl_tensor;
  t.data = out->tensor.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int>(out->shape.size());
  t.dtype = DataTypeOf(out->tensor.dtype());
  t.shape = out->shape.empty() ? nullptr : out->shape.data();
  t.strides = out->strides.empty() ? nullptr : out->strides.data();
  t.byte_offset = 0;
  out->managed.manager_ctx = out.get();
  out->managed.deleter = &DeleteDlpackOutput;
  return out;
}

// Calls the deleter of every distinct non-NULL tensor of inputs[0..n) when
// it goes out of scope: grove_session_run_dlpack consumes its inputs on
// every path. Allocates nothing, so it cannot fail.
class ReleaseInputs {
 public:
  ReleaseInputs(DLManagedTensor* const* inputs, size_t n) : inputs_(inputs), n_(inputs == nullptr ? 0 : n) {}
  ~ReleaseInputs() {
    for (size_t i = 0; i < n_; ++i) {
      DLManagedTensor* t = inputs_[i];
      if (t == nullptr || t->deleter == nullptr) continue;
      bool seen = false;
      for (size_t j = 0; j < i && !seen; ++j) seen = inputs_[j] == t;
      if (!seen) t->deleter(t);
    }
  }
  ReleaseInputs(const ReleaseInputs&) = delete;
  ReleaseInputs& operator=(const ReleaseInputs&) = delete;

 private:
  DLManagedTensor* const* inputs_;
  size_t n_;
};

}  // namespace

extern "C" {

grove_status_t* grove_dlpack_view(const grove_session_t* session, const DLManagedTensor* tensor,
                                  grove_tensor_t* out_tensor) {
  static constexpr char kFn[] = "grove_dlpack_view";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckSession(kFn, session)) return bad;
    if (tensor == nullptr) return NullArgument(kFn, "tensor");
    if (out_tensor == nullptr) return NullArgument(kFn, "out_tensor");
    absl::StatusOr<grove_tensor_t> view =
        ViewOfDlpack(tensor->dl_tensor, session->session->device(), session->cuda_device, "tensor");
    if (!view.ok()) return FromAbsl(view.status(), kFn);
    *out_tensor = *view;
    return nullptr;
  });
}

grove_status_t* grove_session_run_dlpack(grove_session_t* session, DLManagedTensor* const* inputs, size_t n_inputs,
                                         DLManagedTensor** out_outputs, size_t n_outputs) {
  static constexpr char kFn[] = "grove_session_run_dlpack";
  ReleaseInputs release(inputs, n_inputs);
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckSession(kFn, session)) return bad;
    if (inputs == nullptr && n_inputs > 0) return NullArgument(kFn, "inputs");
    if (out_outputs == nullptr && n_outputs > 0) return NullArgument(kFn, "out_outputs");
    const grove::Model& model = session->session->model();
    const std::vector<grove::TensorInfo>& input_infos = model.inputs();
    const std::vector<std::string>& output_names = model.output_names();
    if (n_inputs != input_infos.size()) {
      return InvalidArgument(kFn, absl::StrCat("n_inputs is ", n_inputs, " but the model has ", input_infos.size(),
                                               " inputs"));
    }
    if (n_outputs != output_names.size()) {
      return InvalidArgument(kFn, absl::StrCat("n_outputs is ", n_outputs, " but the model has ",
                                               output_names.size(), " outputs"));
    }
    const grove::Device device = session->session->device();
    if (device == grove::Device::kCuda && session->outputs_on_device) {
      return MakeStatus(GROVE_STATUS_FAILED_PRECONDITION, kFn,
                        "DLPack outputs are host memory (kDLCPU), and this session keeps its outputs on the "
                        "device (outputs_on_device); use grove_session_run_into with device buffers");
    }
    // The outputs' dtypes as described (once per model, on the first DLPack
    // run): a string output is refused before running.
    const std::vector<grove::TensorInfo>& output_infos = model.outputs();
    for (size_t i = 0; i < n_outputs; ++i) {
      if (output_infos[i].dtype == grove::DType::kString) {
        return InvalidArgument(kFn, absl::StrCat(Describe("output", i, output_names),
                                                 " is a string tensor, which DLPack cannot carry; use "
                                                 "grove_session_run"));
      }
    }
    // Validate every input before running, so a bad call changes nothing.
    std::vector<grove::TensorView> views;
    views.reserve(n_inputs);
    for (size_t i = 0; i < n_inputs; ++i) {
      const std::string what = Describe("input", i, input_infos);
      if (inputs[i] == nullptr) return InvalidArgument(kFn, absl::StrCat(what, " is NULL"));
      absl::StatusOr<grove_tensor_t> t = ViewOfDlpack(inputs[i]->dl_tensor, device, session->cuda_device, what);
      if (!t.ok()) return FromAbsl(t.status(), kFn);
      views.emplace_back(static_cast<grove::DType>(t->dtype), std::vector<int64_t>(t->dims, t->dims + t->rank),
                         t->data);
    }
    SessionEntry entry(session);
    if (!entry.entered()) return SessionBusy(kFn);
    absl::StatusOr<std::vector<grove::TensorView>> results = session->session->Run(views);
    if (!results.ok()) return FromAbsl(results.status(), kFn);
    if (results->size() != n_outputs) {
      return FromAbsl(absl::InternalError(absl::StrCat("the session returned ", results->size(),
                                                       " outputs for a model with ", n_outputs)),
                      kFn);
    }
    std::vector<std::unique_ptr<DlpackOutput>> outputs;
    outputs.reserve(n_outputs);
    for (size_t i = 0; i < n_outputs; ++i) {
      if ((*results)[i].dtype == grove::DType::kString) {
        return InvalidArgument(kFn, absl::StrCat(Describe("output", i, output_names),
                                                 " is a string tensor, which DLPack cannot carry"));
      }
      absl::StatusOr<std::unique_ptr<DlpackOutput>> out = ToDlpack((*results)[i]);
      if (!out.ok()) return FromAbsl(out.status(), kFn);
      outputs.push_back(*std::move(out));
    }
    for (size_t i = 0; i < n_outputs; ++i) out_outputs[i] = &outputs[i].release()->managed;
    return nullptr;
  });
}

}  // extern "C"
