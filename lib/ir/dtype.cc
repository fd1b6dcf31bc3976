// DType helpers and the owning Tensor of the public API.
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "lib/ir/graph.h"
#include "lib/ir/value_type.h"

namespace grove {

absl::string_view Version() { return "0.2.0"; }

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: case DType::kI32: case DType::kU32: return 4;
    case DType::kF64: case DType::kI64: case DType::kU64: return 8;
    case DType::kF16: case DType::kBF16: case DType::kI16: case DType::kU16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: return 1;
    case DType::kString: return sizeof(StringRef);
    case DType::kUnknown: return 0;
  }
  return 0;
}

namespace {

// "seq(f32)", "optional(f32)", "optional(seq(f32))" for the boxed codes.
absl::string_view BoxedDTypeName(DType dtype) {
  static const std::vector<std::string>* const names = [] {
    auto* v = new std::vector<std::string>(4 * ir::kBoxedStride);
    for (int k = 1; k < 4; ++k) {
      for (int d = 0; d < ir::kBoxedStride; ++d) {
        const std::string e(DTypeName(static_cast<DType>(d)));
        const std::string n = k == 1 ? absl::StrCat("seq(", e, ")")
                              : k == 2 ? absl::StrCat("optional(", e, ")")
                                       : absl::StrCat("optional(seq(", e, "))");
        (*v)[k * ir::kBoxedStride + d] = n;
      }
    }
    return v;
  }();
  const int code = static_cast<int>(dtype);
  if (code < 0 || code >= static_cast<int>(names->size())) return "unknown";
  return (*names)[code];
}

}  // namespace

absl::string_view ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kOptionalTensor: return "optional tensor";
    case ValueKind::kOptionalSequence: return "optional sequence";
  }
  return "unknown";
}

absl::string_view DTypeName(DType dtype) {
  if (ir::IsBoxed(dtype)) return BoxedDTypeName(dtype);
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
    case DType::kI16: return "i16";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
    case DType::kString: return "string";
    case DType::kUnknown: return "unknown";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (int i = 1; i <= static_cast<int>(DType::kString); ++i) {
    if (DTypeName(static_cast<DType>(i)) == name) return static_cast<DType>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// 64-byte aligned storage for `bytes` and a zeroed tail (vector loads past
// the end stay inside); `zero` also fills the `bytes`.
absl::StatusOr<std::shared_ptr<void>> AlignedStorage(uint64_t bytes, bool zero) {
  const size_t alloc = (static_cast<size_t>(bytes) + 63) / 64 * 64 + 64;
  void* p = std::aligned_alloc(64, alloc);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("Tensor::Create: cannot allocate ", bytes, " bytes"));
  }
  const size_t from = zero ? 0 : static_cast<size_t>(bytes);
  std::memset(static_cast<uint8_t*>(p) + from, 0, alloc - from);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

}  // namespace

absl::StatusOr<Tensor> Tensor::Create(DType dtype, std::vector<int64_t> shape) {
  absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(dtype, shape, "Tensor::Create");
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::shared_ptr<void>> storage = AlignedStorage(*bytes, /*zero=*/true);
  if (!storage.ok()) return storage.status();
  Tensor t;
  t.storage_ = *std::move(storage);
  t.view_ = TensorView(dtype, std::move(shape), t.storage_.get());
  return t;
}

absl::StatusOr<Tensor> Tensor::CopyOf(const TensorView& view) {
  absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(view.dtype, view.shape, "Tensor::CopyOf");
  if (!bytes.ok()) return bytes.status();
  if (view.dtype == DType::kString) {
    // One block: the references, then the bytes they point at.
    const int64_t n = view.num_elements();
    const StringRef* in = view.as<const StringRef>();
    uint64_t text = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (in[i].size > 0 && in[i].data == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("Tensor::CopyOf: string element ", i, " has ", in[i].size,
                                                       " bytes but no data"));
      }
      if (in[i].size > (uint64_t{1} << 62) - text) {
        return absl::InvalidArgumentError("Tensor::CopyOf: the strings' total size overflows");
      }
      text += in[i].size;
    }
    absl::StatusOr<std::shared_ptr<void>> storage = AlignedStorage(*bytes + text, /*zero=*/false);
    if (!storage.ok()) return storage.status();
    Tensor t;
    t.storage_ = *std::move(storage);
    t.view_ = TensorView(view.dtype, view.shape, t.storage_.get());
    StringRef* out = t.as<StringRef>();
    char* at = static_cast<char*>(t.storage_.get()) + *bytes;
    for (int64_t i = 0; i < n; ++i) {
      if (in[i].size > 0) std::memcpy(at, in[i].data, in[i].size);
      out[i] = StringRef(absl::string_view(in[i].size > 0 ? at : nullptr, in[i].size));
      at += in[i].size;
    }
    return t;
  }
  // Every byte is written: no zero fill first.
  absl::StatusOr<std::shared_ptr<void>> storage = AlignedStorage(*bytes, /*zero=*/*bytes == 0);
  if (!storage.ok()) return storage.status();
  Tensor t;
  t.storage_ = *std::move(storage);
  t.view_ = TensorView(view.dtype, view.shape, t.storage_.get());
  if (*bytes > 0) std::memcpy(t.storage_.get(), view.data, *bytes);
  return t;
}

Value::Value(Tensor tensor) : dtype_(tensor.dtype()), tensor_(std::move(tensor)) {}

Value Value::Sequence(DType dtype, std::vector<Tensor> items) {
  Value v;
  v.kind_ = ValueKind::kSequence;
  v.dtype_ = dtype;
  v.items_ = std::move(items);
  return v;
}

Value Value::None(ValueKind kind, DType dtype) {
  Value v;
  v.kind_ = kind == ValueKind::kSequence || kind == ValueKind::kOptionalSequence ? ValueKind::kOptionalSequence
                                                                                   : ValueKind::kOptionalTensor;
  v.dtype_ = dtype;
  v.present_ = false;
  return v;
}

Value Value::Some(Value inner) {
  if (inner.kind_ == ValueKind::kTensor || inner.kind_ == ValueKind::kOptionalTensor) {
    inner.kind_ = ValueKind::kOptionalTensor;
  } else {
    inner.kind_ = ValueKind::kOptionalSequence;
  }
  return inner;
}

std::string Value::DebugString() const {
  const std::string type(DTypeName(ir::BoxedDType(kind_, dtype_)));
  if (!present_) return absl::StrCat(type, " (absent)");
  if (is_sequence()) return absl::StrCat(type, " of ", items_.size());
  return absl::StrCat(type, ir::ShapeToString(ir::FromConcrete(tensor_.shape())));
}

namespace ir {

bool SharedItemShape(const Value& value, std::vector<int64_t>* shape) {
  shape->clear();
  if (!value.has_value()) return false;
  if (!value.is_sequence()) {
    *shape = value.tensor().shape();
    return true;
  }
  if (value.items().empty()) return false;
  *shape = value.items()[0].shape();
  for (const Tensor& t : value.items()) {
    if (t.shape().size() != shape->size()) {
      shape->clear();
      return false;
    }
    for (size_t k = 0; k < shape->size(); ++k) {
      if ((*shape)[k] != t.shape()[k]) (*shape)[k] = -1;
    }
  }
  return true;
}

}  // namespace ir

absl::StatusOr<Device> ParseDevice(absl::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  if (name == "auto") return Device::kAuto;
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", name, "' (cpu, cuda or auto)"));
}

}  // namespace grove
