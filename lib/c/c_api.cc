// The C ABI (include/grove/grove_c.h) over the public C++ API. Every entry
// point checks its pointers and runs inside Guard(), so neither a NULL nor a
// C++ exception reaches the caller as anything but a status.
//
// Handles carry a tag, checked on entry and cleared on release; a released
// handle's memory is kept a while (see Quarantine) so that passing it back
// reads a cleared tag, not freed memory, and is refused with a status.
#include "grove/grove_c.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"
#include "lib/c/c_api_internal.h"

// The C enums and the C++ ones are one ABI; a mismatch must not compile.
static_assert(GROVE_VERSION_MAJOR == grove::kVersionMajor && GROVE_VERSION_MINOR == grove::kVersionMinor &&
              GROVE_VERSION_PATCH == grove::kVersionPatch);
static_assert(GROVE_DTYPE_UNKNOWN == static_cast<int32_t>(grove::DType::kUnknown));
static_assert(GROVE_DTYPE_F32 == static_cast<int32_t>(grove::DType::kF32));
static_assert(GROVE_DTYPE_F64 == static_cast<int32_t>(grove::DType::kF64));
static_assert(GROVE_DTYPE_F16 == static_cast<int32_t>(grove::DType::kF16));
static_assert(GROVE_DTYPE_BF16 == static_cast<int32_t>(grove::DType::kBF16));
static_assert(GROVE_DTYPE_I64 == static_cast<int32_t>(grove::DType::kI64));
static_assert(GROVE_DTYPE_I32 == static_cast<int32_t>(grove::DType::kI32));
static_assert(GROVE_DTYPE_I8 == static_cast<int32_t>(grove::DType::kI8));
static_assert(GROVE_DTYPE_U8 == static_cast<int32_t>(grove::DType::kU8));
static_assert(GROVE_DTYPE_BOOL == static_cast<int32_t>(grove::DType::kBool));
static_assert(GROVE_DTYPE_I16 == static_cast<int32_t>(grove::DType::kI16));
static_assert(GROVE_DTYPE_U16 == static_cast<int32_t>(grove::DType::kU16));
static_assert(GROVE_DTYPE_U32 == static_cast<int32_t>(grove::DType::kU32));
static_assert(GROVE_DTYPE_U64 == static_cast<int32_t>(grove::DType::kU64));
static_assert(GROVE_DTYPE_STRING == static_cast<int32_t>(grove::DType::kString));
static_assert(sizeof(grove_string_t) == sizeof(grove::StringRef) &&
              offsetof(grove_string_t, data) == offsetof(grove::StringRef, data) &&
              offsetof(grove_string_t, size) == offsetof(grove::StringRef, size));
static_assert(GROVE_DEVICE_CPU == static_cast<int32_t>(grove::Device::kCpu));
static_assert(GROVE_DEVICE_CUDA == static_cast<int32_t>(grove::Device::kCuda));
static_assert(GROVE_DEVICE_AUTO == static_cast<int32_t>(grove::Device::kAuto));
static_assert(GROVE_GEMM_MATH_F32 == static_cast<int32_t>(grove::GemmMath::kF32));
static_assert(GROVE_GEMM_MATH_TF32 == static_cast<int32_t>(grove::GemmMath::kTF32));
static_assert(GROVE_GEMM_MATH_BF16 == static_cast<int32_t>(grove::GemmMath::kBF16));
static_assert(GROVE_GEMM_MATH_F16 == static_cast<int32_t>(grove::GemmMath::kF16));
static_assert(GROVE_GRAPH_MODE_AUTO == static_cast<int32_t>(grove::GraphMode::kAuto));
static_assert(GROVE_GRAPH_MODE_ON == static_cast<int32_t>(grove::GraphMode::kOn));
static_assert(GROVE_GRAPH_MODE_OFF == static_cast<int32_t>(grove::GraphMode::kOff));
static_assert(GROVE_LOG_DEBUG == static_cast<int32_t>(grove::LogLevel::kDebug));
static_assert(GROVE_LOG_INFO == static_cast<int32_t>(grove::LogLevel::kInfo));
static_assert(GROVE_LOG_WARNING == static_cast<int32_t>(grove::LogLevel::kWarning));
static_assert(GROVE_LOG_ERROR == static_cast<int32_t>(grove::LogLevel::kError));
static_assert(GROVE_SESSION_OPTIONS_SIZE_V5 == GROVE_SESSION_OPTIONS_SIZE_V4 + 3 * sizeof(void*) + 2 * sizeof(int32_t),
              "version 5 of the options adds trace_path, log_callback, log_user_data, trace_max_runs, log_level");
static_assert(GROVE_SESSION_OPTIONS_SIZE_V6 == GROVE_SESSION_OPTIONS_SIZE_V5 + sizeof(const char*),
              "version 6 of the options adds kernel_table");
static_assert(GROVE_STATUS_OK == static_cast<int>(absl::StatusCode::kOk));
static_assert(GROVE_STATUS_CANCELLED == static_cast<int>(absl::StatusCode::kCancelled));
static_assert(GROVE_STATUS_UNKNOWN == static_cast<int>(absl::StatusCode::kUnknown));
static_assert(GROVE_STATUS_INVALID_ARGUMENT == static_cast<int>(absl::StatusCode::kInvalidArgument));
static_assert(GROVE_STATUS_DEADLINE_EXCEEDED == static_cast<int>(absl::StatusCode::kDeadlineExceeded));
static_assert(GROVE_STATUS_NOT_FOUND == static_cast<int>(absl::StatusCode::kNotFound));
static_assert(GROVE_STATUS_ALREADY_EXISTS == static_cast<int>(absl::StatusCode::kAlreadyExists));
static_assert(GROVE_STATUS_PERMISSION_DENIED == static_cast<int>(absl::StatusCode::kPermissionDenied));
static_assert(GROVE_STATUS_RESOURCE_EXHAUSTED == static_cast<int>(absl::StatusCode::kResourceExhausted));
static_assert(GROVE_STATUS_FAILED_PRECONDITION == static_cast<int>(absl::StatusCode::kFailedPrecondition));
static_assert(GROVE_STATUS_ABORTED == static_cast<int>(absl::StatusCode::kAborted));
static_assert(GROVE_STATUS_OUT_OF_RANGE == static_cast<int>(absl::StatusCode::kOutOfRange));
static_assert(GROVE_STATUS_UNIMPLEMENTED == static_cast<int>(absl::StatusCode::kUnimplemented));
static_assert(GROVE_STATUS_INTERNAL == static_cast<int>(absl::StatusCode::kInternal));
static_assert(GROVE_STATUS_UNAVAILABLE == static_cast<int>(absl::StatusCode::kUnavailable));
static_assert(GROVE_STATUS_DATA_LOSS == static_cast<int>(absl::StatusCode::kDataLoss));
static_assert(GROVE_STATUS_UNAUTHENTICATED == static_cast<int>(absl::StatusCode::kUnauthenticated));

// The frozen structs (grove_c.h: no struct_size) never change size; on LP64
// these are their sizes since the first release.
static_assert(sizeof(void*) != 8 || sizeof(grove_tensor_t) == 88);
static_assert(sizeof(void*) != 8 || sizeof(grove_tensor_info_t) == 144);
static_assert(sizeof(void*) != 8 || sizeof(grove_symbol_info_t) == 24);
static_assert(sizeof(void*) != 8 || sizeof(grove_value_t) == 32);
static_assert(sizeof(void*) != 8 || sizeof(grove_string_t) == 16);
// The versioned structs: struct_size first, and the newest version is the
// whole struct (no trailing padding a version size would miss).
static_assert(offsetof(grove_session_options_t, struct_size) == 0);
static_assert(GROVE_SESSION_OPTIONS_SIZE_V1 < GROVE_SESSION_OPTIONS_SIZE_V2);
static_assert(GROVE_SESSION_OPTIONS_SIZE_V2 < GROVE_SESSION_OPTIONS_SIZE_V3);
static_assert(GROVE_SESSION_OPTIONS_SIZE_V3 < GROVE_SESSION_OPTIONS_SIZE_V4);
static_assert(GROVE_SESSION_OPTIONS_SIZE_V4 < GROVE_SESSION_OPTIONS_SIZE_V5);
static_assert(GROVE_SESSION_OPTIONS_SIZE_V5 < GROVE_SESSION_OPTIONS_SIZE_V6);
static_assert(GROVE_SESSION_OPTIONS_SIZE_V6 == sizeof(grove_session_options_t));
static_assert(offsetof(grove_session_stats_t, struct_size) == 0);
static_assert(GROVE_SESSION_STATS_SIZE_V1 < GROVE_SESSION_STATS_SIZE_V2);
static_assert(GROVE_SESSION_STATS_SIZE_V2 < GROVE_SESSION_STATS_SIZE_V3);
static_assert(GROVE_SESSION_STATS_SIZE_V3 < GROVE_SESSION_STATS_SIZE_V4);
static_assert(GROVE_SESSION_STATS_SIZE_V4 < GROVE_SESSION_STATS_SIZE_V5);
static_assert(GROVE_SESSION_STATS_SIZE_V5 < GROVE_SESSION_STATS_SIZE_V6);
static_assert(GROVE_SESSION_STATS_SIZE_V6 < GROVE_SESSION_STATS_SIZE_V7);
static_assert(GROVE_SESSION_STATS_SIZE_V7 == sizeof(grove_session_stats_t));
static_assert(offsetof(grove_kernel_compile_options_t, struct_size) == 0);
static_assert(GROVE_KERNEL_COMPILE_OPTIONS_SIZE_V1 == sizeof(grove_kernel_compile_options_t));
static_assert(offsetof(grove_kernel_report_summary_t, struct_size) == 0);
static_assert(GROVE_KERNEL_REPORT_SUMMARY_SIZE_V1 == sizeof(grove_kernel_report_summary_t));
static_assert(sizeof(void*) != 8 || sizeof(grove_shape_t) == 72);
static_assert(sizeof(grove_session_options_t) <= GROVE_MAX_STRUCT_SIZE &&
              sizeof(grove_session_stats_t) <= GROVE_MAX_STRUCT_SIZE);

using grove::c_internal::CheckSession;
using grove::c_internal::Describe;
using grove::c_internal::FromAbsl;
using grove::c_internal::Guard;
using grove::c_internal::InvalidArgument;
using grove::c_internal::kSessionTag;
using grove::c_internal::MakeStatus;
using grove::c_internal::NullArgument;
using grove::c_internal::SessionBusy;
using grove::c_internal::SessionEntry;

namespace {

// Each handle's first member: its kind while it lives, kReleasedTag after
// release. The values are arbitrary and unlikely in other memory.
constexpr uint64_t kStatusTag = 0x67726f7665535453;   // "groveSTS"
constexpr uint64_t kModelTag = 0x67726f76654d444c;    // "groveMDL"
constexpr uint64_t kTokenTag = 0x67726f766543544b;    // "groveCTK"
constexpr uint64_t kReportTag = 0x67726f76654b5250;   // "groveKRP"
constexpr uint64_t kReleasedTag = 0x67726f7665444541;  // "groveDEA"

// Released handles, their contents destroyed and their tag cleared, kept
// allocated for the next kSize releases before they are freed. A handle
// passed back within that window is refused by its tag without reading freed
// memory (sound under ASan); past it, the check is best effort: the memory
// may have been reused. The shells are small (tens of bytes each).
class Quarantine {
 public:
  static constexpr size_t kSize = 1024;
  static Quarantine& Get() {
    static Quarantine* q = new Quarantine;  // never destroyed: releases may come at exit
    return *q;
  }
  void Add(void* shell, void (*free_shell)(void*)) noexcept {
    Entry evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      evicted = ring_[next_];
      ring_[next_] = Entry{shell, free_shell};
      next_ = (next_ + 1) % kSize;
    }
    if (evicted.shell != nullptr) evicted.free_shell(evicted.shell);
  }

 private:
  struct Entry {
    void* shell = nullptr;
    void (*free_shell)(void*) = nullptr;
  };
  std::mutex mu_;
  std::array<Entry, kSize> ring_{};
  size_t next_ = 0;
};

template <typename Handle>
void FreeShell(void* shell) {
  delete static_cast<Handle*>(shell);
}

}  // namespace

struct grove_status_t {
  uint64_t tag = kStatusTag;
  grove_status_code_t code;
  std::string message;
};

struct grove_model_t {
  uint64_t tag = kModelTag;
  std::shared_ptr<const grove::Model> model;
};

struct grove_cancel_token_t {
  uint64_t tag = kTokenTag;
  std::shared_ptr<grove::CancellationToken> token;
};

struct grove_kernel_report_t {
  uint64_t tag = kReportTag;
  grove::KernelCompileReport report;
};

namespace {

// Handed out when a status cannot be allocated; release ignores it.
grove_status_t kOutOfMemoryStatus{kStatusTag, GROVE_STATUS_RESOURCE_EXHAUSTED, "grove: out of memory"};

}  // namespace

grove_status_t* grove::c_internal::MakeStatus(grove_status_code_t code, absl::string_view function,
                                              absl::string_view message) noexcept {
  try {
    return new grove_status_t{kStatusTag, code, absl::StrCat(function, ": ", message)};
  } catch (...) {
    return &kOutOfMemoryStatus;
  }
}

grove_status_t* grove::c_internal::FromAbsl(const absl::Status& status, absl::string_view function) noexcept {
  if (status.ok()) return nullptr;
  const int code = static_cast<int>(status.code());
  return MakeStatus(code > GROVE_STATUS_OK && code <= GROVE_STATUS_UNAUTHENTICATED
                        ? static_cast<grove_status_code_t>(code)
                        : GROVE_STATUS_UNKNOWN,
                    function, status.message());
}

grove_status_t* grove::c_internal::InvalidArgument(absl::string_view function, absl::string_view message) noexcept {
  return MakeStatus(GROVE_STATUS_INVALID_ARGUMENT, function, message);
}

grove_status_t* grove::c_internal::NullArgument(absl::string_view function, absl::string_view argument) noexcept {
  try {
    return InvalidArgument(function, absl::StrCat(argument, " is NULL"));
  } catch (...) {
    return &kOutOfMemoryStatus;
  }
}

namespace {

// NULL, or a handle whose tag is not `tag` (released, or another kind of
// handle), as an INVALID_ARGUMENT status; nullptr when `handle` is live.
template <typename Handle>
grove_status_t* CheckHandle(absl::string_view function, const Handle* handle, uint64_t tag, const char* argument,
                            const char* type) noexcept {
  if (handle == nullptr) return NullArgument(function, argument);
  if (handle->tag == tag) return nullptr;
  try {
    return InvalidArgument(function, absl::StrCat(argument, " is not a live ", type,
                                                  handle->tag == kReleasedTag ? " (it was released)" : ""));
  } catch (...) {
    return &kOutOfMemoryStatus;
  }
}

grove_status_t* CheckModel(absl::string_view function, const grove_model_t* model) noexcept {
  return CheckHandle(function, model, kModelTag, "model", "grove_model_t");
}
}  // namespace

grove_status_t* grove::c_internal::CheckSession(absl::string_view function, const grove_session_t* session) noexcept {
  return CheckHandle(function, session, kSessionTag, "session", "grove_session_t");
}

namespace {

grove_status_t* CheckToken(absl::string_view function, const grove_cancel_token_t* token) noexcept {
  return CheckHandle(function, token, kTokenTag, "token", "grove_cancel_token_t");
}

}  // namespace

grove_status_t* grove::c_internal::SessionBusy(absl::string_view function) noexcept {
  return MakeStatus(GROVE_STATUS_FAILED_PRECONDITION, function,
                    "session is already running on another thread; a session is used by one thread at a time");
}

namespace {

std::string ShapeString(absl::Span<const int64_t> dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

// Checks one caller-described tensor and makes a view of it. `what` names it
// in messages ("input 0 ('x')").
absl::StatusOr<grove::TensorView> ViewOf(const grove_tensor_t& t, const std::string& what) {
  if (grove_dtype_size(t.dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown dtype ", t.dtype));
  }
  if (t.rank < 0 || t.rank > GROVE_MAX_RANK) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": rank ", t.rank, " is outside 0..", GROVE_MAX_RANK));
  }
  std::vector<int64_t> shape(t.dims, t.dims + t.rank);
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dim ", i, " is negative (", shape[i], ")"));
    }
    empty = empty || shape[i] == 0;
  }
  uint64_t bytes = empty ? 0 : grove_dtype_size(t.dtype);
  for (int64_t d : shape) {
    if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", ShapeString(shape), " overflows"));
    }
    bytes *= static_cast<uint64_t>(d);
  }
  if (bytes > t.byte_size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", grove_dtype_name(t.dtype), ShapeString(shape),
                                                   " needs ", bytes, " bytes but byte_size is ", t.byte_size));
  }
  if (bytes > 0 && t.data == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": data is NULL"));
  return grove::TensorView(static_cast<grove::DType>(t.dtype), std::move(shape), t.data);
}

grove_status_t* TensorInfoAt(const char* function, const grove_model_t* model, size_t index,
                             grove_tensor_info_t* out_info, bool outputs) {
  if (grove_status_t* bad = CheckModel(function, model)) return bad;
  if (out_info == nullptr) return NullArgument(function, "out_info");
  const std::vector<grove::TensorInfo>& infos = outputs ? model->model->outputs() : model->model->inputs();
  const char* kind = outputs ? "output" : "input";
  if (index >= infos.size()) {
    return FromAbsl(absl::OutOfRangeError(absl::StrCat(kind, " index ", index, " is past the model's ",
                                                       infos.size(), " ", kind, "s")),
                    function);
  }
  const grove::TensorInfo& info = infos[index];
  if (info.shape.size() > GROVE_MAX_RANK) {
    return FromAbsl(absl::OutOfRangeError(absl::StrCat(Describe(kind, index, infos), " has rank ", info.shape.size(),
                                                       "; the C ABI describes at most ", GROVE_MAX_RANK)),
                    function);
  }
  grove_tensor_info_t result{};
  result.name = info.name.c_str();
  result.dtype = static_cast<grove_dtype_t>(info.dtype);
  result.rank = static_cast<int32_t>(info.shape.size());
  for (size_t i = 0; i < info.shape.size(); ++i) {
    const grove::DimInfo& dim = info.shape[i];
    result.dims[i] = dim.is_symbolic() ? -1 : dim.value;
    result.dim_symbols[i] = dim.is_symbolic() ? dim.symbol.c_str() : nullptr;
  }
  *out_info = result;
  return nullptr;
}

// The position of `name` among `items` (the inputs' TensorInfos or the outputs' names).
template <typename T>
grove_status_t* FindName(const char* function, const std::vector<T>& items, const char* name, size_t* out_index,
                         bool outputs) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (grove::c_internal::NameOf(items[i]) == name) {
      *out_index = i;
      return nullptr;
    }
  }
  std::vector<std::string> names;
  for (const T& item : items) names.push_back(absl::StrCat("'", grove::c_internal::NameOf(item), "'"));
  return FromAbsl(absl::NotFoundError(absl::StrCat("the model has no ", outputs ? "output" : "input", " named '",
                                                   name, "' (it has ", absl::StrJoin(names, ", "), ")")),
                  function);
}

grove_status_t* IndexOf(const char* function, const grove_model_t* model, const char* name, size_t* out_index,
                        bool outputs) {
  if (grove_status_t* bad = CheckModel(function, model)) return bad;
  if (name == nullptr) return NullArgument(function, "name");
  if (out_index == nullptr) return NullArgument(function, "out_index");
  if (outputs) return FindName(function, model->model->output_names(), name, out_index, outputs);
  return FindName(function, model->model->inputs(), name, out_index, outputs);
}

grove_status_t* Count(const char* function, size_t* out_count, size_t count) {
  if (out_count == nullptr) return NullArgument(function, "out_count");
  *out_count = count;
  return nullptr;
}

// A versioned struct (grove_c.h, "Versioned structs"): its name, what sets
// its struct_size, and the size of each layout version this library knows,
// oldest first (the last is its sizeof here).
struct StructVersions {
  const char* type;
  const char* initializer;
  absl::Span<const size_t> sizes;
};
constexpr size_t kOptionsSizes[] = {GROVE_SESSION_OPTIONS_SIZE_V1, GROVE_SESSION_OPTIONS_SIZE_V2,
                                    GROVE_SESSION_OPTIONS_SIZE_V3, GROVE_SESSION_OPTIONS_SIZE_V4,
                                    GROVE_SESSION_OPTIONS_SIZE_V5, GROVE_SESSION_OPTIONS_SIZE_V6};
constexpr size_t kStatsSizes[] = {GROVE_SESSION_STATS_SIZE_V1, GROVE_SESSION_STATS_SIZE_V2,
                                  GROVE_SESSION_STATS_SIZE_V3, GROVE_SESSION_STATS_SIZE_V4,
                                  GROVE_SESSION_STATS_SIZE_V5, GROVE_SESSION_STATS_SIZE_V6,
                                  GROVE_SESSION_STATS_SIZE_V7};
constexpr StructVersions kOptionsVersions{"grove_session_options_t", "grove_session_options_initialize()",
                                          kOptionsSizes};
constexpr StructVersions kStatsVersions{"grove_session_stats_t", "GROVE_SESSION_STATS_INIT", kStatsSizes};
constexpr size_t kCompileOptionsSizes[] = {GROVE_KERNEL_COMPILE_OPTIONS_SIZE_V1};
constexpr StructVersions kCompileOptionsVersions{"grove_kernel_compile_options_t",
                                                 "grove_kernel_compile_options_initialize()", kCompileOptionsSizes};
constexpr size_t kSummarySizes[] = {GROVE_KERNEL_REPORT_SUMMARY_SIZE_V1};
constexpr StructVersions kSummaryVersions{"grove_kernel_report_summary_t", "GROVE_KERNEL_REPORT_SUMMARY_INIT",
                                          kSummarySizes};

// A known version's size, or a newer caller's (larger) one up to the bound.
bool StructSizeAccepted(size_t struct_size, const StructVersions& versions) {
  if (struct_size > versions.sizes.back()) return struct_size <= GROVE_MAX_STRUCT_SIZE;
  return std::find(versions.sizes.begin(), versions.sizes.end(), struct_size) != versions.sizes.end();
}

grove_status_t* CheckStructSize(const char* function, const char* argument, size_t struct_size,
                                const StructVersions& versions) {
  if (StructSizeAccepted(struct_size, versions)) return nullptr;
  std::string why;
  if (struct_size == 0) {
    why = "is 0 (not set)";
  } else if (struct_size < versions.sizes.front()) {
    why = absl::StrCat("is ", struct_size, ", below the first version's ", versions.sizes.front(), " bytes");
  } else if (struct_size > GROVE_MAX_STRUCT_SIZE) {
    why = absl::StrCat("is ", struct_size, ", above GROVE_MAX_STRUCT_SIZE (", GROVE_MAX_STRUCT_SIZE, "): not set?");
  } else {
    why = absl::StrCat("is ", struct_size, ", between the sizes of two versions");
  }
  return InvalidArgument(function, absl::StrCat(argument, "->struct_size ", why, "; ", versions.type,
                                                " versions are ", absl::StrJoin(versions.sizes, ", "),
                                                " bytes (or larger, for a newer caller); set it with ",
                                                versions.initializer));
}

// Fails when a newer caller's struct (struct_size above `known`) has a
// nonzero byte past the fields this library knows: it set a field that this
// library would otherwise ignore.
grove_status_t* CheckUnknownFieldsZero(const char* function, const char* argument, const void* caller,
                                       size_t struct_size, size_t known, const char* type) {
  const auto* bytes = static_cast<const unsigned char*>(caller);
  for (size_t i = known; i < struct_size; ++i) {
    if (bytes[i] == 0) continue;
    return InvalidArgument(function, absl::StrCat(argument, "->struct_size is ", struct_size, " (a newer ", type,
                                                  ") and byte ", i, " is not 0, but this library (grove ",
                                                  grove::Version(), ") knows only the first ", known,
                                                  " bytes: a field it does not have was set"));
  }
  return nullptr;
}

}  // namespace

extern "C" {

const char* grove_version(void) {
  static const std::string version(grove::Version());
  return version.c_str();
}

// A released status reads as INVALID_ARGUMENT with a message that says so.
grove_status_code_t grove_status_code(const grove_status_t* status) {
  if (status == nullptr) return GROVE_STATUS_OK;
  return status->tag == kStatusTag ? status->code : GROVE_STATUS_INVALID_ARGUMENT;
}

const char* grove_status_message(const grove_status_t* status) {
  if (status == nullptr) return "";
  return status->tag == kStatusTag ? status->message.c_str() : "grove: this grove_status_t is not live (released?)";
}

const char* grove_status_code_name(grove_status_code_t code) {
  // A C caller may pass any int; loading it as the enum would be UB past the
  // enumerators' range, so the switch reads its bytes as the underlying type.
  std::underlying_type_t<grove_status_code_t> raw;
  static_assert(sizeof(raw) == sizeof(code));
  std::memcpy(&raw, &code, sizeof(raw));
  switch (raw) {
    case GROVE_STATUS_OK: return "OK";
    case GROVE_STATUS_CANCELLED: return "CANCELLED";
    case GROVE_STATUS_UNKNOWN: return "UNKNOWN";
    case GROVE_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case GROVE_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case GROVE_STATUS_NOT_FOUND: return "NOT_FOUND";
    case GROVE_STATUS_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case GROVE_STATUS_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case GROVE_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case GROVE_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case GROVE_STATUS_ABORTED: return "ABORTED";
    case GROVE_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case GROVE_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case GROVE_STATUS_INTERNAL: return "INTERNAL";
    case GROVE_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case GROVE_STATUS_DATA_LOSS: return "DATA_LOSS";
    case GROVE_STATUS_UNAUTHENTICATED: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

void grove_status_release(grove_status_t* status) {
  if (status == nullptr || status == &kOutOfMemoryStatus || status->tag != kStatusTag) return;
  status->tag = kReleasedTag;
  std::string().swap(status->message);
  Quarantine::Get().Add(status, &FreeShell<grove_status_t>);
}

size_t grove_dtype_size(grove_dtype_t dtype) {
  if (dtype < GROVE_DTYPE_F32 || dtype > GROVE_DTYPE_STRING) return 0;
  return grove::DTypeSize(static_cast<grove::DType>(dtype));
}

const char* grove_dtype_name(grove_dtype_t dtype) {
  if (dtype < GROVE_DTYPE_F32 || dtype > GROVE_DTYPE_STRING) return "unknown";
  // DTypeName returns views of string literals, so data() is NUL-terminated.
  return grove::DTypeName(static_cast<grove::DType>(dtype)).data();
}

grove_status_t* grove_model_load_file(const char* path, grove_model_t** out_model) {
  static constexpr char kFn[] = "grove_model_load_file";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (path == nullptr) return NullArgument(kFn, "path");
    if (out_model == nullptr) return NullArgument(kFn, "out_model");
    absl::StatusOr<std::shared_ptr<const grove::Model>> model = grove::Model::LoadFromFile(path);
    if (!model.ok()) return FromAbsl(model.status(), kFn);
    *out_model = new grove_model_t{kModelTag, *std::move(model)};
    return nullptr;
  });
}

grove_status_t* grove_model_load_buffer(const void* data, size_t size, grove_model_t** out_model) {
  static constexpr char kFn[] = "grove_model_load_buffer";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (data == nullptr) return NullArgument(kFn, "data");
    if (out_model == nullptr) return NullArgument(kFn, "out_model");
    absl::StatusOr<std::shared_ptr<const grove::Model>> model =
        grove::Model::LoadFromBuffer(absl::MakeConstSpan(static_cast<const uint8_t*>(data), size));
    if (!model.ok()) return FromAbsl(model.status(), kFn);
    *out_model = new grove_model_t{kModelTag, *std::move(model)};
    return nullptr;
  });
}

void grove_model_release(grove_model_t* model) {
  if (model == nullptr || model->tag != kModelTag) return;  // NULL, or released already
  model->tag = kReleasedTag;
  model->model.reset();
  Quarantine::Get().Add(model, &FreeShell<grove_model_t>);
}

grove_status_t* grove_model_input_count(const grove_model_t* model, size_t* out_count) {
  static constexpr char kFn[] = "grove_model_input_count";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckModel(kFn, model)) return bad;
    return Count(kFn, out_count, model->model->inputs().size());
  });
}

grove_status_t* grove_model_output_count(const grove_model_t* model, size_t* out_count) {
  static constexpr char kFn[] = "grove_model_output_count";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckModel(kFn, model)) return bad;
    return Count(kFn, out_count, model->model->output_names().size());
  });
}

grove_status_t* grove_model_symbol_count(const grove_model_t* model, size_t* out_count) {
  static constexpr char kFn[] = "grove_model_symbol_count";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckModel(kFn, model)) return bad;
    return Count(kFn, out_count, model->model->symbols().size());
  });
}

grove_status_t* grove_model_input_info(const grove_model_t* model, size_t index, grove_tensor_info_t* out_info) {
  static constexpr char kFn[] = "grove_model_input_info";
  return Guard(kFn, [&] { return TensorInfoAt(kFn, model, index, out_info, /*outputs=*/false); });
}

grove_status_t* grove_model_output_info(const grove_model_t* model, size_t index, grove_tensor_info_t* out_info) {
  static constexpr char kFn[] = "grove_model_output_info";
  return Guard(kFn, [&] { return TensorInfoAt(kFn, model, index, out_info, /*outputs=*/true); });
}

grove_status_t* grove_model_output_name(const grove_model_t* model, size_t index, const char** out_name) {
  static constexpr char kFn[] = "grove_model_output_name";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckModel(kFn, model)) return bad;
    if (out_name == nullptr) return NullArgument(kFn, "out_name");
    const std::vector<std::string>& names = model->model->output_names();
    if (index >= names.size()) {
      return FromAbsl(absl::OutOfRangeError(absl::StrCat("output index ", index, " is past the model's ",
                                                         names.size(), " outputs")),
                      kFn);
    }
    *out_name = names[index].c_str();
    return nullptr;
  });
}

static_assert(GROVE_VALUE_TENSOR == static_cast<int32_t>(grove::ValueKind::kTensor));
static_assert(GROVE_VALUE_SEQUENCE == static_cast<int32_t>(grove::ValueKind::kSequence));
static_assert(GROVE_VALUE_OPTIONAL_TENSOR == static_cast<int32_t>(grove::ValueKind::kOptionalTensor));
static_assert(GROVE_VALUE_OPTIONAL_SEQUENCE == static_cast<int32_t>(grove::ValueKind::kOptionalSequence));

namespace {

grove_status_t* KindAt(const char* function, const grove_model_t* model, size_t index, grove_value_kind_t* out_kind,
                       bool outputs) {
  if (grove_status_t* bad = CheckModel(function, model)) return bad;
  if (out_kind == nullptr) return NullArgument(function, "out_kind");
  const std::vector<grove::TensorInfo>& infos = outputs ? model->model->outputs() : model->model->inputs();
  const char* kind = outputs ? "output" : "input";
  if (index >= infos.size()) {
    return FromAbsl(absl::OutOfRangeError(absl::StrCat(kind, " index ", index, " is past the model's ",
                                                       infos.size(), " ", kind, "s")),
                    function);
  }
  *out_kind = static_cast<grove_value_kind_t>(infos[index].kind);
  return nullptr;
}

// A caller's value as an owning grove::Value (its tensors copied).
absl::StatusOr<grove::Value> ValueOf(const grove_value_t& v, const std::string& what) {
  if (v.kind < GROVE_VALUE_TENSOR || v.kind > GROVE_VALUE_OPTIONAL_SEQUENCE) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown value kind ", v.kind));
  }
  if (v.tensors == nullptr && v.n_tensors > 0) return absl::InvalidArgumentError(absl::StrCat(what, ": tensors is NULL"));
  const auto kind = static_cast<grove::ValueKind>(v.kind);
  const bool optional = kind == grove::ValueKind::kOptionalTensor || kind == grove::ValueKind::kOptionalSequence;
  const bool sequence = kind == grove::ValueKind::kSequence || kind == grove::ValueKind::kOptionalSequence;
  if (optional && v.has_value == 0) {
    if (v.n_tensors != 0) return absl::InvalidArgumentError(absl::StrCat(what, ": an absent optional with tensors"));
    return grove::Value::None(kind, static_cast<grove::DType>(v.dtype));
  }
  if (!sequence && v.n_tensors != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a tensor value needs n_tensors == 1, has ", v.n_tensors));
  }
  std::vector<grove::Tensor> tensors;
  for (size_t k = 0; k < v.n_tensors; ++k) {
    const std::string item = sequence ? absl::StrCat(what, " item ", k) : what;
    absl::StatusOr<grove::TensorView> view = ViewOf(v.tensors[k], item);
    if (!view.ok()) return view.status();
    absl::StatusOr<grove::Tensor> t = grove::Tensor::CopyOf(*view);
    if (!t.ok()) return t.status();
    tensors.push_back(*std::move(t));
  }
  grove::Value value = sequence ? grove::Value::Sequence(static_cast<grove::DType>(v.dtype), std::move(tensors))
                                : grove::Value(std::move(tensors[0]));
  return optional ? grove::Value::Some(std::move(value)) : value;
}

grove_tensor_t TensorOf(const grove::TensorView& view) {
  grove_tensor_t t{};
  t.dtype = static_cast<grove_dtype_t>(view.dtype);
  t.rank = static_cast<int32_t>(view.shape.size());
  for (size_t d = 0; d < view.shape.size() && d < GROVE_MAX_RANK; ++d) t.dims[d] = view.shape[d];
  t.data = view.data;
  t.byte_size = view.byte_size();
  return t;
}

}  // namespace

grove_status_t* grove_model_input_kind(const grove_model_t* model, size_t index, grove_value_kind_t* out_kind) {
  static constexpr char kFn[] = "grove_model_input_kind";
  return Guard(kFn, [&] { return KindAt(kFn, model, index, out_kind, /*outputs=*/false); });
}

grove_status_t* grove_model_output_kind(const grove_model_t* model, size_t index, grove_value_kind_t* out_kind) {
  static constexpr char kFn[] = "grove_model_output_kind";
  return Guard(kFn, [&] { return KindAt(kFn, model, index, out_kind, /*outputs=*/true); });
}

grove_status_t* grove_model_symbol_info(const grove_model_t* model, size_t index, grove_symbol_info_t* out_info) {
  static constexpr char kFn[] = "grove_model_symbol_info";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckModel(kFn, model)) return bad;
    if (out_info == nullptr) return NullArgument(kFn, "out_info");
    const std::vector<grove::SymbolInfo>& symbols = model->model->symbols();
    if (index >= symbols.size()) {
      return FromAbsl(absl::OutOfRangeError(absl::StrCat("symbol index ", index, " is past the model's ",
                                                         symbols.size(), " symbols")),
                      kFn);
    }
    *out_info = grove_symbol_info_t{symbols[index].name.c_str(), symbols[index].min, symbols[index].max};
    return nullptr;
  });
}

grove_status_t* grove_model_input_index(const grove_model_t* model, const char* name, size_t* out_index) {
  static constexpr char kFn[] = "grove_model_input_index";
  return Guard(kFn, [&] { return IndexOf(kFn, model, name, out_index, /*outputs=*/false); });
}

grove_status_t* grove_model_output_index(const grove_model_t* model, const char* name, size_t* out_index) {
  static constexpr char kFn[] = "grove_model_output_index";
  return Guard(kFn, [&] { return IndexOf(kFn, model, name, out_index, /*outputs=*/true); });
}

namespace {

// This library's options at grove::SessionOptions' defaults.
grove_session_options_t DefaultOptions() {
  const grove::SessionOptions defaults;
  grove_session_options_t o{};
  o.struct_size = sizeof(o);
  o.device = static_cast<grove_device_t>(defaults.device);
  o.max_cached_plans = defaults.max_cached_plans;
  o.cuda_device = defaults.cuda_device;
  o.cuda_stream = defaults.cuda_stream;
  o.strict_device = defaults.strict_device ? 1 : 0;
  o.outputs_on_device = defaults.outputs_on_device ? 1 : 0;
  o.gemm_math = static_cast<grove_gemm_math_t>(defaults.cuda_gemm_math);
  o.run_deadline_ms = defaults.run_deadline_ms;
  o.cancel_token = nullptr;
  o.max_body_runs = defaults.max_body_runs;
  o.cuda_graphs = static_cast<grove_graph_mode_t>(defaults.cuda_graphs);
  o.max_cached_graphs = defaults.max_cached_graphs;
  o.intra_op_threads = defaults.intra_op_threads;
  o.shape_buckets = nullptr;
  o.max_graph_bytes = defaults.max_graph_bytes;
  o.trace_path = nullptr;
  o.log_callback = nullptr;
  o.log_user_data = nullptr;
  o.trace_max_runs = defaults.trace_max_runs;
  o.log_level = static_cast<grove_log_level_t>(defaults.log_level);
  o.kernel_table = nullptr;
  return o;
}

}  // namespace

void grove_session_options_initialize_sized(grove_session_options_t* out_options, size_t struct_size) {
  if (out_options == nullptr || !StructSizeAccepted(struct_size, kOptionsVersions)) return;
  grove_session_options_t defaults = DefaultOptions();
  defaults.struct_size = struct_size;
  // Versions are whole fields, so a prefix of the struct is a version.
  std::memcpy(out_options, &defaults, std::min(struct_size, sizeof(defaults)));
  if (struct_size > sizeof(defaults)) {
    std::memset(reinterpret_cast<unsigned char*>(out_options) + sizeof(defaults), 0, struct_size - sizeof(defaults));
  }
}

}  // extern "C"

grove_status_t* grove::c_internal::ToSessionOptions(const char* function, const grove_session_options_t* options,
                                                    SessionOptions* out) {
  *out = SessionOptions();
  if (options == nullptr) return nullptr;
  if (grove_status_t* bad = CheckStructSize(function, "options", options->struct_size, kOptionsVersions)) return bad;
  if (grove_status_t* bad = CheckUnknownFieldsZero(function, "options", options, options->struct_size,
                                                   sizeof(grove_session_options_t), kOptionsVersions.type)) {
    return bad;
  }
  // The caller's fields within its struct_size (versions are whole fields),
  // the defaults for the rest.
  grove_session_options_t o = DefaultOptions();
  std::memcpy(&o, options, std::min(options->struct_size, sizeof(o)));
  if (o.device < GROVE_DEVICE_CPU || o.device > GROVE_DEVICE_AUTO) {
    return InvalidArgument(function, absl::StrCat("options->device is ", o.device,
                                                  " (GROVE_DEVICE_CPU, _CUDA or _AUTO expected)"));
  }
  if (o.max_cached_plans < 0) {
    return InvalidArgument(function, absl::StrCat("options->max_cached_plans is negative (", o.max_cached_plans, ")"));
  }
  if (o.cuda_device < 0) {
    return InvalidArgument(function, absl::StrCat("options->cuda_device is negative (", o.cuda_device, ")"));
  }
  if (o.gemm_math < GROVE_GEMM_MATH_F32 || o.gemm_math > GROVE_GEMM_MATH_F16) {
    return InvalidArgument(function, absl::StrCat("options->gemm_math is ", o.gemm_math,
                                                  " (GROVE_GEMM_MATH_F32, _TF32, _BF16 or _F16 expected)"));
  }
  if (o.run_deadline_ms < 0) {
    return InvalidArgument(function, absl::StrCat("options->run_deadline_ms is negative (", o.run_deadline_ms,
                                                  "); 0 means no deadline"));
  }
  if (o.max_body_runs < 0) {
    return InvalidArgument(function, absl::StrCat("options->max_body_runs is negative (", o.max_body_runs,
                                                  "); 0 means no limit"));
  }
  if (o.cuda_graphs < GROVE_GRAPH_MODE_AUTO || o.cuda_graphs > GROVE_GRAPH_MODE_OFF) {
    return InvalidArgument(function, absl::StrCat("options->cuda_graphs is ", o.cuda_graphs,
                                                  " (GROVE_GRAPH_MODE_AUTO, _ON or _OFF expected)"));
  }
  if (o.max_cached_graphs < 0) {
    return InvalidArgument(function, absl::StrCat("options->max_cached_graphs is negative (", o.max_cached_graphs,
                                                  "); 0 means no limit"));
  }
  if (o.intra_op_threads < 0 || o.intra_op_threads > grove::kMaxIntraOpThreads) {
    return InvalidArgument(function, absl::StrCat("options->intra_op_threads is ", o.intra_op_threads,
                                                  " (1 to ", grove::kMaxIntraOpThreads,
                                                  ", or 0 for one per core, expected)"));
  }
  if (o.max_graph_bytes < 0) {
    return InvalidArgument(function, absl::StrCat("options->max_graph_bytes is negative (", o.max_graph_bytes,
                                                  "); 0 means no limit"));
  }
  if (o.trace_max_runs < 1) {
    return InvalidArgument(function, absl::StrCat("options->trace_max_runs is ", o.trace_max_runs,
                                                  " (at least 1 expected)"));
  }
  if (o.log_level < GROVE_LOG_DEBUG || o.log_level > GROVE_LOG_ERROR) {
    return InvalidArgument(function, absl::StrCat("options->log_level is ", o.log_level,
                                                  " (GROVE_LOG_DEBUG, _INFO, _WARNING or _ERROR expected)"));
  }
  if (o.cancel_token != nullptr) {
    if (grove_status_t* bad = CheckToken(function, o.cancel_token)) return bad;
    out->cancellation = o.cancel_token->token;
  }
  out->device = static_cast<grove::Device>(o.device);
  out->max_cached_plans = o.max_cached_plans;
  out->cuda_device = o.cuda_device;
  out->cuda_stream = o.cuda_stream;
  out->strict_device = o.strict_device != 0;
  out->outputs_on_device = o.outputs_on_device != 0;
  out->cuda_gemm_math = static_cast<grove::GemmMath>(o.gemm_math);
  out->run_deadline_ms = o.run_deadline_ms;
  out->max_body_runs = o.max_body_runs;
  out->cuda_graphs = static_cast<grove::GraphMode>(o.cuda_graphs);
  out->max_cached_graphs = o.max_cached_graphs;
  out->intra_op_threads = static_cast<int>(o.intra_op_threads);
  out->max_graph_bytes = o.max_graph_bytes;
  if (o.trace_path != nullptr) out->trace_path = o.trace_path;
  if (o.kernel_table != nullptr) out->kernel_table = o.kernel_table;
  out->trace_max_runs = o.trace_max_runs;
  out->log_level = static_cast<grove::LogLevel>(o.log_level);
  if (o.log_callback != nullptr) {
    out->log_sink = [callback = o.log_callback, user_data = o.log_user_data](grove::LogLevel level,
                                                                             absl::string_view message) {
      const std::string text(message);  // NUL-terminated for C
      callback(user_data, static_cast<grove_log_level_t>(level), text.c_str());
    };
  }
  if (o.shape_buckets != nullptr) {
    // "SYMBOL=RULE;SYMBOL=RULE": the rules themselves are checked by
    // Session::Create, with the model's symbols.
    for (absl::string_view entry : absl::StrSplit(o.shape_buckets, ';', absl::SkipEmpty())) {
      const size_t eq = entry.find('=');
      if (eq == absl::string_view::npos || eq == 0) {
        return InvalidArgument(function, absl::StrCat("options->shape_buckets: '", entry,
                                                      "' is not SYMBOL=RULE (e.g. \"seq=pow2;batch=exact\")"));
      }
      out->shape_buckets.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
  }
  return nullptr;
}

extern "C" {

grove_status_t* grove_session_create(const grove_model_t* model, const grove_session_options_t* options,
                                     grove_session_t** out_session) {
  static constexpr char kFn[] = "grove_session_create";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckModel(kFn, model)) return bad;
    if (out_session == nullptr) return NullArgument(kFn, "out_session");
    grove::SessionOptions cc_options;
    if (grove_status_t* bad = grove::c_internal::ToSessionOptions(kFn, options, &cc_options)) return bad;
    absl::StatusOr<std::unique_ptr<grove::Session>> session = grove::Session::Create(model->model, cc_options);
    if (!session.ok()) return FromAbsl(session.status(), kFn);
    *out_session = grove::c_internal::WrapSession(*std::move(session), cc_options);
    return nullptr;
  });
}

}  // extern "C"

grove_session_t* grove::c_internal::WrapSession(std::unique_ptr<Session> session, const SessionOptions& options) {
  if (session == nullptr) return nullptr;
  auto handle = std::make_unique<grove_session_t>();
  handle->session = std::move(session);
  handle->outputs_on_device = options.outputs_on_device;
  handle->cuda_device = options.cuda_device;
  return handle.release();
}

extern "C" {

void grove_session_release(grove_session_t* session) {
  if (session == nullptr || session->tag != kSessionTag) return;  // NULL, or released already
  session->tag = kReleasedTag;
  session->session.reset();
  std::vector<grove::Value>().swap(session->values);
  std::vector<std::vector<grove_tensor_t>>().swap(session->value_tensors);
  Quarantine::Get().Add(session, &FreeShell<grove_session_t>);
}

grove_status_t* grove_session_device(const grove_session_t* session, grove_device_t* out_device) {
  static constexpr char kFn[] = "grove_session_device";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckSession(kFn, session)) return bad;
    if (out_device == nullptr) return NullArgument(kFn, "out_device");
    *out_device = static_cast<grove_device_t>(session->session->device());
    return nullptr;
  });
}

namespace {

// The arguments every run function checks first: non-null pointers and one
// input and output per model input and output.
grove_status_t* CheckRunArguments(const char* function, const grove_session_t* session, const void* inputs,
                                  size_t n_inputs, const void* outputs, size_t n_outputs) {
  if (grove_status_t* bad = CheckSession(function, session)) return bad;
  if (inputs == nullptr && n_inputs > 0) return NullArgument(function, "inputs");
  if (outputs == nullptr && n_outputs > 0) return NullArgument(function, "outputs");
  const grove::Model& model = session->session->model();
  if (n_inputs != model.inputs().size()) {
    return InvalidArgument(function, absl::StrCat("n_inputs is ", n_inputs, " but the model has ",
                                                  model.inputs().size(), " inputs"));
  }
  if (n_outputs != model.output_names().size()) {
    return InvalidArgument(function, absl::StrCat("n_outputs is ", n_outputs, " but the model has ",
                                                  model.output_names().size(), " outputs"));
  }
  return nullptr;
}

// Checks every input and views it, in model order.
grove_status_t* InputViews(const char* function, const grove_session_t* session, const grove_tensor_t* inputs,
                           size_t n_inputs, std::vector<grove::TensorView>* views) {
  const std::vector<grove::TensorInfo>& infos = session->session->model().inputs();
  views->reserve(n_inputs);
  for (size_t i = 0; i < n_inputs; ++i) {
    absl::StatusOr<grove::TensorView> view = ViewOf(inputs[i], Describe("input", i, infos));
    if (!view.ok()) return FromAbsl(view.status(), function);
    views->push_back(*std::move(view));
  }
  return nullptr;
}

}  // namespace

grove_status_t* grove_session_run(grove_session_t* session, const grove_tensor_t* inputs, size_t n_inputs,
                                  grove_tensor_t* outputs, size_t n_outputs) {
  static constexpr char kFn[] = "grove_session_run";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckRunArguments(kFn, session, inputs, n_inputs, outputs, n_outputs)) return bad;
    SessionEntry entry(session);
    if (!entry.entered()) return SessionBusy(kFn);
    const std::vector<std::string>& output_names = session->session->model().output_names();

    // Validate everything before running, so a bad call changes nothing.
    std::vector<grove::TensorView> input_views;
    if (grove_status_t* bad = InputViews(kFn, session, inputs, n_inputs, &input_views)) return bad;
    std::vector<grove::TensorView> provided(n_outputs);
    bool all_provided = true;
    for (size_t i = 0; i < n_outputs; ++i) {
      if (outputs[i].data == nullptr) {
        all_provided = false;
        continue;
      }
      absl::StatusOr<grove::TensorView> view = ViewOf(outputs[i], Describe("output", i, output_names));
      if (!view.ok()) return FromAbsl(view.status(), kFn);
      provided[i] = *std::move(view);
    }

    if (all_provided) {
      return FromAbsl(session->session->RunInto(input_views, provided), kFn);
    }
    // Session-owned results are copied into the caller's buffers below with
    // a host copy, which device pointers (outputs_on_device) cannot take.
    const bool some_provided = std::any_of(provided.begin(), provided.end(),
                                           [](const grove::TensorView& v) { return v.data != nullptr; });
    if (some_provided && session->outputs_on_device && session->session->device() == grove::Device::kCuda) {
      return MakeStatus(GROVE_STATUS_FAILED_PRECONDITION, kFn,
                        "with outputs_on_device, give every output a buffer (or use grove_session_run_into) or "
                        "none; a mix would copy device results with a host copy");
    }

    absl::StatusOr<std::vector<grove::TensorView>> results = session->session->Run(input_views);
    if (!results.ok()) return FromAbsl(results.status(), kFn);
    if (results->size() != n_outputs) {
      return FromAbsl(absl::InternalError(absl::StrCat("the session returned ", results->size(),
                                                       " outputs for a model with ", n_outputs)),
                      kFn);
    }
    for (size_t i = 0; i < n_outputs; ++i) {
      const grove::TensorView& r = (*results)[i];
      const std::string what = Describe("output", i, output_names);
      if (provided[i].data == nullptr) {
        if (r.shape.size() > GROVE_MAX_RANK) {
          return FromAbsl(absl::OutOfRangeError(absl::StrCat(what, " has rank ", r.shape.size(),
                                                             "; the C ABI describes at most ", GROVE_MAX_RANK)),
                          kFn);
        }
        continue;
      }
      if (provided[i].dtype != r.dtype || provided[i].shape != r.shape) {
        return InvalidArgument(kFn, absl::StrCat(what, ": the buffer is ", grove::DTypeName(provided[i].dtype),
                                                 ShapeString(provided[i].shape), " but the result is ",
                                                 grove::DTypeName(r.dtype), ShapeString(r.shape)));
      }
    }
    for (size_t i = 0; i < n_outputs; ++i) {
      const grove::TensorView& r = (*results)[i];
      if (provided[i].data != nullptr) {
        if (r.byte_size() > 0) std::memcpy(provided[i].data, r.data, r.byte_size());
        continue;
      }
      grove_tensor_t& out = outputs[i];
      out.dtype = static_cast<grove_dtype_t>(r.dtype);
      out.rank = static_cast<int32_t>(r.shape.size());
      for (size_t d = 0; d < GROVE_MAX_RANK; ++d) out.dims[d] = d < r.shape.size() ? r.shape[d] : 0;
      out.data = r.data;
      out.byte_size = r.byte_size();
    }
    return nullptr;
  });
}

grove_status_t* grove_session_run_into(grove_session_t* session, const grove_tensor_t* inputs, size_t n_inputs,
                                       const grove_tensor_t* outputs, size_t n_outputs) {
  static constexpr char kFn[] = "grove_session_run_into";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckRunArguments(kFn, session, inputs, n_inputs, outputs, n_outputs)) return bad;
    SessionEntry entry(session);
    if (!entry.entered()) return SessionBusy(kFn);
    const std::vector<std::string>& output_names = session->session->model().output_names();
    // Validate everything before running, so a bad call changes nothing.
    std::vector<grove::TensorView> input_views;
    if (grove_status_t* bad = InputViews(kFn, session, inputs, n_inputs, &input_views)) return bad;
    std::vector<grove::TensorView> output_views;
    output_views.reserve(n_outputs);
    for (size_t i = 0; i < n_outputs; ++i) {
      absl::StatusOr<grove::TensorView> view = ViewOf(outputs[i], Describe("output", i, output_names));
      if (!view.ok()) return FromAbsl(view.status(), kFn);
      output_views.push_back(*std::move(view));
    }
    return FromAbsl(session->session->RunInto(input_views, output_views), kFn);
  });
}

grove_status_t* grove_session_input_buffer(grove_session_t* session, const char* name, int32_t rank,
                                           const int64_t* dims, grove_tensor_t* out_tensor) {
  static constexpr char kFn[] = "grove_session_input_buffer";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckSession(kFn, session)) return bad;
    if (name == nullptr) return NullArgument(kFn, "name");
    if (dims == nullptr && rank > 0) return NullArgument(kFn, "dims");
    if (out_tensor == nullptr) return NullArgument(kFn, "out_tensor");
    if (rank < 0 || rank > GROVE_MAX_RANK) {
      return InvalidArgument(kFn, absl::StrCat("rank ", rank, " is outside 0..", GROVE_MAX_RANK));
    }
    SessionEntry entry(session);
    if (!entry.entered()) return SessionBusy(kFn);
    absl::StatusOr<grove::TensorView> view =
        session->session->InputBuffer(name, absl::MakeConstSpan(dims, static_cast<size_t>(rank)));
    if (!view.ok()) return FromAbsl(view.status(), kFn);
    *out_tensor = TensorOf(*view);
    return nullptr;
  });
}

grove_status_t* grove_session_run_values(grove_session_t* session, const grove_value_t* inputs, size_t n_inputs,
                                         grove_value_t* outputs, size_t n_outputs) {
  static constexpr char kFn[] = "grove_session_run_values";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckRunArguments(kFn, session, inputs, n_inputs, outputs, n_outputs)) return bad;
    SessionEntry entry(session);
    if (!entry.entered()) return SessionBusy(kFn);
    const grove::Model& model = session->session->model();
    const std::vector<grove::TensorInfo>& input_infos = model.inputs();
    const std::vector<std::string>& output_names = model.output_names();
    std::vector<grove::Value> values;
    for (size_t i = 0; i < n_inputs; ++i) {
      absl::StatusOr<grove::Value> v = ValueOf(inputs[i], Describe("input", i, input_infos));
      if (!v.ok()) return FromAbsl(v.status(), kFn);
      values.push_back(*std::move(v));
    }
    session->values.clear();
    session->value_tensors.clear();
    absl::StatusOr<std::vector<grove::Value>> results = session->session->RunValues(values);
    if (!results.ok()) return FromAbsl(results.status(), kFn);
    session->values = *std::move(results);
    session->value_tensors.resize(session->values.size());
    for (size_t i = 0; i < n_outputs; ++i) {
      const grove::Value& v = session->values[i];
      std::vector<grove_tensor_t>& tensors = session->value_tensors[i];
      if (v.has_value()) {
        if (v.is_sequence()) {
          for (const grove::Tensor& t : v.items()) tensors.push_back(TensorOf(t.view()));
        } else {
          tensors.push_back(TensorOf(v.tensor().view()));
        }
      }
      for (const grove_tensor_t& t : tensors) {
        if (t.rank > GROVE_MAX_RANK) {
          return FromAbsl(absl::OutOfRangeError(absl::StrCat(Describe("output", i, output_names), " has rank ", t.rank,
                                                             "; the C ABI describes at most ", GROVE_MAX_RANK)),
                          kFn);
        }
      }
    }
    for (size_t i = 0; i < n_outputs; ++i) {
      const grove::Value& v = session->values[i];
      outputs[i] = grove_value_t{static_cast<grove_value_kind_t>(v.kind()), static_cast<grove_dtype_t>(v.dtype()),
                                 v.has_value() ? 1 : 0, session->value_tensors[i].size(),
                                 session->value_tensors[i].empty() ? nullptr : session->value_tensors[i].data()};
    }
    return nullptr;
  });
}

grove_status_t* grove_session_write_trace(const grove_session_t* session, const char* path) {
  static constexpr char kFn[] = "grove_session_write_trace";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckSession(kFn, session)) return bad;
    if (absl::Status s = session->session->WriteTrace(path == nullptr ? "" : path); !s.ok()) return FromAbsl(s, kFn);
    return nullptr;
  });
}

grove_status_t* grove_session_stats(const grove_session_t* session, grove_session_stats_t* out_stats) {
  static constexpr char kFn[] = "grove_session_stats";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckSession(kFn, session)) return bad;
    if (out_stats == nullptr) return NullArgument(kFn, "out_stats");
    const size_t struct_size = out_stats->struct_size;
    if (grove_status_t* bad = CheckStructSize(kFn, "out_stats", struct_size, kStatsVersions)) return bad;
    const grove::SessionStats s = session->session->stats();
    grove_session_stats_t all{struct_size,
                                    s.runs,
                                    s.plans_created,
                                    s.plan_cache_hits,
                                    s.plans_evicted,
                                    s.kernels_run,
                                    s.device_allocations,
                                    s.device_synchronizations,
                                    s.device_to_host_reads,
                                    s.segments_run,
                                    s.host_waits_inside_segments,
                                    s.cpu_fallback_steps,
                                    s.bytes_host_to_device,
                                    s.bytes_device_to_host,
                                    s.graphs_captured,
                                    s.graph_replays,
                                    s.segments_run_eagerly,
                                    s.graph_capture_failures,
                                    s.graphs_evicted,
                                    s.graphs_held,
                                    s.graph_nodes,
                                    s.graph_bytes,
                                    s.graph_launches,
                                    s.launches_outside_graphs,
                                    nullptr,
                                    s.graph_refreshes,
                                    s.buckets_made,
                                    s.bucketed_runs,
                                    s.bucket_input_bytes,
                                    s.bucket_padding_bytes,
                                    nullptr,
                                    s.arena_bytes,
                                    s.arena_own_plans,
                                    s.control_flow_in_graphs,
                                    s.control_flow_host_driven,
                                    nullptr};
    if (struct_size >= GROVE_SESSION_STATS_SIZE_V3) {
      session->graph_fallback_reason = s.graph_fallback_reason;
      all.graph_fallback_reason = session->graph_fallback_reason.c_str();
    }
    if (struct_size >= GROVE_SESSION_STATS_SIZE_V5) {
      session->bucket_fallback_reason = s.bucket_fallback_reason;
      all.bucket_fallback_reason = session->bucket_fallback_reason.c_str();
    }
    if (struct_size >= GROVE_SESSION_STATS_SIZE_V7) {
      session->control_flow_fallback_reason = s.control_flow_fallback_reason;
      all.control_flow_fallback_reason = session->control_flow_fallback_reason.c_str();
    }
    // Versions are whole fields: the caller's prefix is its version's fields.
    std::memcpy(out_stats, &all, std::min(struct_size, sizeof(all)));
    return nullptr;
  });
}

grove_status_t* grove_cancel_token_create(grove_cancel_token_t** out_token) {
  static constexpr char kFn[] = "grove_cancel_token_create";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (out_token == nullptr) return NullArgument(kFn, "out_token");
    auto handle = std::make_unique<grove_cancel_token_t>();
    handle->token = std::make_shared<grove::CancellationToken>();
    *out_token = handle.release();
    return nullptr;
  });
}

grove_status_t* grove_cancel_token_cancel(grove_cancel_token_t* token) {
  static constexpr char kFn[] = "grove_cancel_token_cancel";
  if (grove_status_t* bad = CheckToken(kFn, token)) return bad;
  token->token->Cancel();
  return nullptr;
}

grove_status_t* grove_cancel_token_reset(grove_cancel_token_t* token) {
  static constexpr char kFn[] = "grove_cancel_token_reset";
  if (grove_status_t* bad = CheckToken(kFn, token)) return bad;
  token->token->Reset();
  return nullptr;
}

grove_status_t* grove_cancel_token_is_cancelled(const grove_cancel_token_t* token, int32_t* out_cancelled) {
  static constexpr char kFn[] = "grove_cancel_token_is_cancelled";
  if (grove_status_t* bad = CheckToken(kFn, token)) return bad;
  if (out_cancelled == nullptr) return NullArgument(kFn, "out_cancelled");
  *out_cancelled = token->token->IsCancelled() ? 1 : 0;
  return nullptr;
}

void grove_cancel_token_release(grove_cancel_token_t* token) {
  if (token == nullptr || token->tag != kTokenTag) return;  // NULL, or released already
  token->tag = kReleasedTag;
  token->token.reset();  // sessions given it keep their own reference
  Quarantine::Get().Add(token, &FreeShell<grove_cancel_token_t>);
}

void grove_kernel_compile_options_initialize_sized(grove_kernel_compile_options_t* out_options,
                                                   size_t struct_size) {
  if (out_options == nullptr || !StructSizeAccepted(struct_size, kCompileOptionsVersions)) return;
  grove_kernel_compile_options_t defaults{};
  defaults.struct_size = struct_size;
  std::memcpy(out_options, &defaults, std::min(struct_size, sizeof(defaults)));
  if (struct_size > sizeof(defaults)) {
    std::memset(reinterpret_cast<unsigned char*>(out_options) + sizeof(defaults), 0, struct_size - sizeof(defaults));
  }
}

grove_status_t* grove_compile_kernels(const grove_model_t* model, const grove_kernel_compile_options_t* options,
                                      grove_kernel_report_t** out_report) {
  static constexpr char kFn[] = "grove_compile_kernels";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckModel(kFn, model)) return bad;
    grove::KernelCompileOptions cc_options;
    if (options != nullptr) {
      if (grove_status_t* bad = CheckStructSize(kFn, "options", options->struct_size, kCompileOptionsVersions)) {
        return bad;
      }
      if (grove_status_t* bad = CheckUnknownFieldsZero(kFn, "options", options, options->struct_size,
                                                       sizeof(grove_kernel_compile_options_t),
                                                       kCompileOptionsVersions.type)) {
        return bad;
      }
      grove_kernel_compile_options_t known{};
      std::memcpy(&known, options, std::min(options->struct_size, sizeof(known)));
      if (known.reserved != 0) return InvalidArgument(kFn, "options->reserved is not 0");
      if (known.input_shapes == nullptr && known.n_input_shapes > 0) {
        return NullArgument(kFn, "options->input_shapes");
      }
      if (known.arch != nullptr) cc_options.arch = known.arch;
      if (known.cache_dir != nullptr) cc_options.cache_dir = known.cache_dir;
      cc_options.all_kernels = known.all_kernels != 0;
      const std::vector<grove::TensorInfo>& inputs = model->model->inputs();
      // Checked before any shape is read: a wrong count may be garbage.
      if (!cc_options.all_kernels && known.n_input_shapes != inputs.size()) {
        return InvalidArgument(kFn, absl::StrCat("options->n_input_shapes is ", known.n_input_shapes,
                                                 " but the model has ", inputs.size(),
                                                 " inputs (one shape per input, or all_kernels)"));
      }
      for (size_t i = 0; !cc_options.all_kernels && i < known.n_input_shapes; ++i) {
        const grove_shape_t& shape = known.input_shapes[i];
        if (shape.rank < 0 || shape.rank > GROVE_MAX_RANK) {
          return InvalidArgument(kFn, absl::StrCat("options->input_shapes[", i, "] (", Describe("input", i, inputs),
                                                   "): rank ", shape.rank, " is outside 0..", GROVE_MAX_RANK));
        }
        cc_options.input_shapes.emplace_back(shape.dims, shape.dims + shape.rank);
      }
    }
    absl::StatusOr<grove::KernelCompileReport> report = grove::CompileKernels(*model->model, cc_options);
    if (!report.ok()) return FromAbsl(report.status(), kFn);
    if (out_report != nullptr) {
      auto handle = std::make_unique<grove_kernel_report_t>();
      handle->report = *std::move(report);
      *out_report = handle.release();
    }
    return nullptr;
  });
}

void grove_kernel_report_release(grove_kernel_report_t* report) {
  if (report == nullptr || report->tag != kReportTag) return;  // NULL, or released already
  report->tag = kReleasedTag;
  report->report = grove::KernelCompileReport();
  Quarantine::Get().Add(report, &FreeShell<grove_kernel_report_t>);
}

grove_status_t* grove_kernel_report_summary(const grove_kernel_report_t* report,
                                            grove_kernel_report_summary_t* out_summary) {
  static constexpr char kFn[] = "grove_kernel_report_summary";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckHandle(kFn, report, kReportTag, "report", "grove_kernel_report_t")) return bad;
    if (out_summary == nullptr) return NullArgument(kFn, "out_summary");
    const size_t struct_size = out_summary->struct_size;
    if (grove_status_t* bad = CheckStructSize(kFn, "out_summary", struct_size, kSummaryVersions)) return bad;
    const grove::KernelCompileReport& r = report->report;
    const grove_kernel_report_summary_t all{struct_size,
                                            r.cache_dir.c_str(),
                                            r.note.c_str(),
                                            r.arch,
                                            static_cast<int32_t>(r.modules.size()),
                                            r.compiled,
                                            r.cached,
                                            r.corrupt,
                                            r.stale,
                                            r.compile_ms};
    std::memcpy(out_summary, &all, std::min(struct_size, sizeof(all)));
    return nullptr;
  });
}

grove_status_t* grove_kernel_report_module(const grove_kernel_report_t* report, size_t index, const char** out_name) {
  static constexpr char kFn[] = "grove_kernel_report_module";
  return Guard(kFn, [&]() -> grove_status_t* {
    if (grove_status_t* bad = CheckHandle(kFn, report, kReportTag, "report", "grove_kernel_report_t")) return bad;
    if (out_name == nullptr) return NullArgument(kFn, "out_name");
    const std::vector<std::string>& modules = report->report.modules;
    if (index >= modules.size()) {
      return FromAbsl(absl::OutOfRangeError(absl::StrCat("module index ", index, " is past the report's ",
                                                         modules.size(), " modules")),
                      kFn);
    }
    *out_name = modules[index].c_str();
    return nullptr;
  });
}

}  // extern "C"
