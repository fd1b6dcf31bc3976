// What tests need of the C ABI's insides: a C handle around a session the
// C++ API made. A session on the emulated CUDA device (or any device object)
// has no C entry point, yet the C paths that differ on CUDA (device buffers
// in grove_session_run_into, the CUDA counters of grove_session_stats) must
// be tested without a GPU.
#ifndef GROVE_LIB_C_C_API_INTERNAL_H_
#define GROVE_LIB_C_C_API_INTERNAL_H_

#include <memory>

#include "grove/grove.h"
#include "grove/grove_c.h"

namespace grove::c_internal {

// A handle the caller frees with grove_session_release(); `options` are the
// ones `session` was made with. Null for a null session.
grove_session_t* WrapSession(std::unique_ptr<Session> session, const SessionOptions& options);

}  // namespace grove::c_internal

#endif  // GROVE_LIB_C_C_API_INTERNAL_H_
