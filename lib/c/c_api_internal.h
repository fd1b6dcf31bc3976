// The C ABI's insides shared by lib/c's files (c_api.cc, dlpack.cc) and its
// tests: the session handle, the status helpers and the entry guard; a C
// handle around a session the C++ API made, and the C++ options made of a
// caller's C options. A session on the emulated CUDA device (or any device
// object) has no C entry point, yet the C paths that differ on CUDA (device
// buffers in grove_session_run_into, the CUDA counters of
// grove_session_stats, DLPack's kDLCUDA tensors) must be tested without a GPU.
#ifndef GROVE_LIB_C_C_API_INTERNAL_H_
#define GROVE_LIB_C_C_API_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"
#include "grove/grove_c.h"

namespace grove::c_internal {

// A live session handle's tag (see c_api.cc: every handle's first member).
inline constexpr uint64_t kSessionTag = 0x67726f7665535353;  // "groveSSS"

}  // namespace grove::c_internal

struct grove_session_t {
  uint64_t tag = grove::c_internal::kSessionTag;
  std::unique_ptr<grove::Session> session;
  // SessionOptions::outputs_on_device: Run's results are device pointers.
  bool outputs_on_device = false;
  // SessionOptions::cuda_device: the ordinal a kDLCUDA tensor must name.
  int cuda_device = 0;
  // grove_session_stats_t.graph_fallback_reason, kept until the next stats call.
  mutable std::string graph_fallback_reason;
  mutable std::string bucket_fallback_reason;  // grove_session_stats_t.bucket_fallback_reason, likewise
  mutable std::string control_flow_fallback_reason;  // grove_session_stats_t.control_flow_fallback_reason, likewise
  // Set while a run is inside this handle: a second thread's run is refused
  // (the handle's own output arrays below are not shared between threads).
  std::atomic<bool> busy{false};
  // grove_session_run_values: the last outputs and the tensor arrays that
  // describe them to the caller.
  std::vector<grove::Value> values;
  std::vector<std::vector<grove_tensor_t>> value_tensors;
};

namespace grove::c_internal {

// "FUNCTION: MESSAGE" with `code`; a static out-of-memory status when even
// that cannot be allocated.
grove_status_t* MakeStatus(grove_status_code_t code, absl::string_view function, absl::string_view message) noexcept;
// NULL for OK; else the status's code (UNKNOWN outside the C enum) and message.
grove_status_t* FromAbsl(const absl::Status& status, absl::string_view function) noexcept;
grove_status_t* InvalidArgument(absl::string_view function, absl::string_view message) noexcept;
// INVALID_ARGUMENT: "ARGUMENT is NULL".
grove_status_t* NullArgument(absl::string_view function, absl::string_view argument) noexcept;
// NULL when `session` is a live handle; else INVALID_ARGUMENT saying why.
grove_status_t* CheckSession(absl::string_view function, const grove_session_t* session) noexcept;
// FAILED_PRECONDITION: another thread is inside the session.
grove_status_t* SessionBusy(absl::string_view function) noexcept;

// Runs `body`, turning any escaping exception into a status.
template <typename Body>
grove_status_t* Guard(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return MakeStatus(GROVE_STATUS_RESOURCE_EXHAUSTED, function, "out of memory");
  } catch (const std::exception& e) {
    return MakeStatus(GROVE_STATUS_INTERNAL, function, absl::NullSafeStringView(e.what()));
  } catch (...) {
    return MakeStatus(GROVE_STATUS_INTERNAL, function, "unexpected exception");
  }
}

// Marks a session handle busy for one run (see grove::Session's guard).
class SessionEntry {
 public:
  explicit SessionEntry(grove_session_t* session)
      : session_(session), entered_(!session->busy.exchange(true, std::memory_order_acquire)) {}
  ~SessionEntry() {
    if (entered_) session_->busy.store(false, std::memory_order_release);
  }
  SessionEntry(const SessionEntry&) = delete;
  SessionEntry& operator=(const SessionEntry&) = delete;
  bool entered() const { return entered_; }

 private:
  grove_session_t* session_;
  const bool entered_;
};

// A handle the caller frees with grove_session_release(); `options` are the
// ones `session` was made with. Null for a null session.
grove_session_t* WrapSession(std::unique_ptr<Session> session, const SessionOptions& options);

// The C++ options grove_session_create makes of `options` (NULL: the
// defaults): the caller's fields within its struct_size, the defaults for
// the rest. A status naming `function` and the field for bad options.
grove_status_t* ToSessionOptions(const char* function, const grove_session_options_t* options,
                                 SessionOptions* out);

// An input or output in a message: "KIND INDEX ('NAME')", or "KIND INDEX"
// for an index past `items` (TensorInfos, or names).
inline const std::string& NameOf(const TensorInfo& info) { return info.name; }
inline const std::string& NameOf(const std::string& name) { return name; }
template <typename T>
std::string Describe(const char* kind, size_t index, const std::vector<T>& items) {
  if (index < items.size()) return absl::StrCat(kind, " ", index, " ('", NameOf(items[index]), "')");
  return absl::StrCat(kind, " ", index);
}

}  // namespace grove::c_internal

#endif  // GROVE_LIB_C_C_API_INTERNAL_H_
