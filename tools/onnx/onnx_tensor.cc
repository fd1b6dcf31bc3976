// Decoding of onnx::TensorProto. The element count is checked against the
// bytes actually present before anything is allocated, so a proto that claims
// huge dims cannot make us allocate more than it carries.
#include "tools/onnx/onnx_tensor.h"

#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/format/regular_file.h"

namespace grove::onnx_import {
namespace {

using ::onnx::TensorProto;

constexpr int kMaxRank = 16;

std::string TensorWhere(const TensorProto& p) {
  return p.name().empty() ? std::string("tensor") : absl::StrCat("tensor '", p.name(), "'");
}

// Reads the bytes of an external-data tensor. The location must stay inside
// `model_dir` even after symlinks are resolved, so a model cannot make the
// importer read arbitrary files.
absl::StatusOr<std::string> ReadExternalData(const TensorProto& p, absl::string_view model_dir, uint64_t want) {
  namespace fs = std::filesystem;
  const std::string where = TensorWhere(p);
  std::string location;
  uint64_t offset = 0;
  bool has_length = false;
  uint64_t length = 0;
  for (const ::onnx::StringStringEntryProto& e : p.external_data()) {
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset") {
      if (!absl::SimpleAtoi(e.value(), &offset)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": external data offset '", e.value(), "' is not a non-negative integer"));
      }
    } else if (e.key() == "length") {
      if (!absl::SimpleAtoi(e.value(), &length)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": external data length '", e.value(), "' is not a non-negative integer"));
      }
      has_length = true;
    }
    // "checksum" and unknown keys do not change the bytes read.
  }
  if (location.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": external data has no location"));
  if (model_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": external data '", location, "' needs the model's directory (import from a file)"));
  }
  const fs::path loc(location);
  if (loc.is_absolute() || location[0] == '/') {
    return absl::PermissionDeniedError(
        absl::StrCat(where, ": external data location '", location,
                     "' is absolute; it must be relative to the model's directory"));
  }
  for (const fs::path& part : loc) {
    if (part == "..") {
      return absl::PermissionDeniedError(
          absl::StrCat(where, ": external data location '", location,
                       "' has a '..' component; it must stay in the model's directory"));
    }
  }
  std::error_code ec;
  const fs::path base = fs::canonical(fs::path(std::string(model_dir)), ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat(where, ": model directory '", model_dir, "': ", ec.message()));
  }
  const fs::path target = fs::canonical(base / loc, ec);
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat(where, ": external data file '", location, "' in '", base.string(), "': ", ec.message()));
  }
  const std::string base_prefix = base.string() == "/" ? "/" : base.string() + "/";
  if (target.string().compare(0, base_prefix.size(), base_prefix) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(where, ": external data '", location, "' resolves to '",
                                                    target.string(), "', outside the model's directory"));
  }
  // A FIFO or device is refused without waiting for a writer.
  absl::StatusOr<format::RegularFile> file = format::RegularFile::Open(target.string(), "external data");
  if (!file.ok()) return absl::Status(file.status().code(), absl::StrCat(where, ": ", file.status().message()));
  const uint64_t file_size = file->size();
  if (offset > file_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": external data offset ", offset, " is past the end of '", location, "' (", file_size, " bytes)"));
  }
  // Without a length the tensor takes the bytes it needs from the offset on.
  if (has_length && length != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": external data length is ", length, " bytes but the tensor needs ", want));
  }
  length = want;
  if (length > file_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": needs ", want, " bytes of external data at offset ",
                                                   offset, " but '", location, "' has only ", file_size - offset,
                                                   " bytes from there"));
  }
  std::string bytes(length, '\0');
  if (absl::Status s = file->ReadAt(offset, bytes.data(), length); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(where, ": reading external data '", location, "': ", s.message()));
  }
  return bytes;
}

// A STRING tensor: its strings live in string_data (ONNX allows neither
// raw_data nor external data for them), copied into one owning block.
absl::StatusOr<Tensor> DecodeStrings(const TensorProto& p, const std::string& where, const std::vector<int64_t>& shape,
                                     uint64_t count) {
  if (p.has_data_location() && p.data_location() == TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(
        where, ": a STRING tensor stored as external data is not supported (ONNX keeps strings in string_data)"));
  }
  if (p.has_raw_data()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a STRING tensor must hold its strings in string_data, not raw_data"));
  }
  if (static_cast<uint64_t>(p.string_data_size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": STRING[", absl::StrJoin(shape, ","), "] has ", count,
                                                   " elements but string_data holds ", p.string_data_size()));
  }
  if (count == 0) return Tensor::Create(DType::kString, shape);
  std::vector<StringRef> refs;
  refs.reserve(count);
  for (const std::string& s : p.string_data()) refs.emplace_back(s);
  absl::StatusOr<Tensor> out = Tensor::CopyOf(TensorView(DType::kString, shape, refs.data()));
  if (!out.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", out.status().message()));
  return out;
}

// Copies a typed repeated field into `out`, one element at a time.
template <typename To, typename Field>
void CopyTyped(const Field& field, Tensor& out) {
  To* dst = out.as<To>();
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<To>(field.Get(i));
}

}  // namespace

absl::StatusOr<DType> DTypeFromOnnx(int32_t onnx_type) {
  switch (onnx_type) {
    case TensorProto::FLOAT:
      return DType::kF32;
    case TensorProto::DOUBLE:
      return DType::kF64;
    case TensorProto::FLOAT16:
      return DType::kF16;
    case TensorProto::BFLOAT16:
      return DType::kBF16;
    case TensorProto::INT64:
      return DType::kI64;
    case TensorProto::INT32:
      return DType::kI32;
    case TensorProto::INT8:
      return DType::kI8;
    case TensorProto::UINT8:
      return DType::kU8;
    case TensorProto::BOOL:
      return DType::kBool;
    case TensorProto::INT16:
      return DType::kI16;
    case TensorProto::UINT16:
      return DType::kU16;
    case TensorProto::UINT32:
      return DType::kU32;
    case TensorProto::UINT64:
      return DType::kU64;
    case TensorProto::STRING:
      return DType::kString;
    default:
      break;
  }
  return absl::UnimplementedError(absl::StrCat("dtype ", OnnxTypeName(onnx_type),
                                               " is not supported by grove (it has f32 f64 f16 bf16 i64 i32 i16 "
                                               "i8 u64 u32 u16 u8 bool string)"));
}

std::string OnnxTypeName(int32_t onnx_type) {
  if (TensorProto::DataType_IsValid(onnx_type)) {
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(onnx_type));
  }
  return absl::StrCat("type ", onnx_type);
}

absl::StatusOr<Tensor> DecodeTensor(const TensorProto& p, absl::string_view model_dir) {
  const std::string where = TensorWhere(p);
  absl::StatusOr<DType> dtype = DTypeFromOnnx(p.data_type());
  if (!dtype.ok()) return absl::UnimplementedError(absl::StrCat(where, ": ", dtype.status().message()));
  if (p.has_segment()) {
    return absl::UnimplementedError(absl::StrCat(where, ": segmented tensors are not supported"));
  }
  if (p.dims_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", p.dims_size(), " is above ", kMaxRank));
  }
  std::vector<int64_t> shape(p.dims().begin(), p.dims().end());
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dims [", absl::StrJoin(shape, ","), "] have a negative dim"));
    }
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count) || count > (uint64_t{1} << 40)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": dims [", absl::StrJoin(shape, ","), "] overflow"));
    }
  }
  if (*dtype == DType::kString) return DecodeStrings(p, where, shape, count);
  const uint64_t bytes = count * DTypeSize(*dtype);

  const bool external = p.has_data_location() && p.data_location() == TensorProto::EXTERNAL;
  std::string external_bytes;
  const std::string* raw = nullptr;
  if (external) {
    absl::StatusOr<std::string> data = ReadExternalData(p, model_dir, bytes);
    if (!data.ok()) return data.status();
    external_bytes = std::move(*data);
    raw = &external_bytes;
  } else if (p.has_raw_data()) {
    raw = &p.raw_data();
  }

  // The typed field ONNX stores this dtype in, and its length.
  int typed_size = 0;
  switch (p.data_type()) {
    case TensorProto::FLOAT:
      typed_size = p.float_data_size();
      break;
    case TensorProto::DOUBLE:
      typed_size = p.double_data_size();
      break;
    case TensorProto::INT64:
      typed_size = p.int64_data_size();
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      typed_size = p.uint64_data_size();
      break;
    default:
      typed_size = p.int32_data_size();
      break;  // i32 i16 i8 u16 u8 bool f16 bf16
  }
  if (raw != nullptr) {
    if (raw->size() != bytes) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", OnnxTypeName(p.data_type()), "[",
                                                     absl::StrJoin(shape, ","), "] needs ", bytes,
                                                     " bytes but raw_data has ", raw->size()));
    }
  } else if (static_cast<uint64_t>(typed_size) != count) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", OnnxTypeName(p.data_type()), "[",
                                                   absl::StrJoin(shape, ","), "] has ", count,
                                                   " elements but its data field holds ", typed_size));
  }

  absl::StatusOr<Tensor> out = Tensor::Create(*dtype, shape);
  if (!out.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", out.status().message()));
  if (count == 0) return out;
  if (raw != nullptr) {
    std::memcpy(out->data(), raw->data(), bytes);
    if (*dtype == DType::kBool) {
      // grove's bools are 0 or 1; ONNX writers may leave any nonzero byte.
      uint8_t* b = out->as<uint8_t>();
      for (uint64_t i = 0; i < count; ++i) b[i] = b[i] != 0;
    }
    return out;
  }
  switch (*dtype) {
    case DType::kF32:
      CopyTyped<float>(p.float_data(), *out);
      break;
    case DType::kF64:
      CopyTyped<double>(p.double_data(), *out);
      break;
    case DType::kI64:
      CopyTyped<int64_t>(p.int64_data(), *out);
      break;
    case DType::kI32:
      CopyTyped<int32_t>(p.int32_data(), *out);
      break;
    case DType::kI8:
      CopyTyped<int8_t>(p.int32_data(), *out);
      break;
    case DType::kU8:
      CopyTyped<uint8_t>(p.int32_data(), *out);
      break;
    // int16 and uint16 live in int32_data; uint32 and uint64 in uint64_data.
    case DType::kI16:
      CopyTyped<int16_t>(p.int32_data(), *out);
      break;
    case DType::kU16:
      CopyTyped<uint16_t>(p.int32_data(), *out);
      break;
    case DType::kU32:
      CopyTyped<uint32_t>(p.uint64_data(), *out);
      break;
    case DType::kU64:
      CopyTyped<uint64_t>(p.uint64_data(), *out);
      break;
    // f16 and bf16 are stored as their 16 bits, one per int32.
    case DType::kF16:
    case DType::kBF16:
      CopyTyped<uint16_t>(p.int32_data(), *out);
      break;
    case DType::kBool: {
      uint8_t* b = out->as<uint8_t>();
      for (int i = 0; i < p.int32_data_size(); ++i) b[i] = p.int32_data(i) != 0;
      break;
    }
    case DType::kString:  // decoded above
    case DType::kUnknown:
      break;
  }
  return out;
}

}  // namespace grove::onnx_import
