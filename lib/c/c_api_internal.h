// What tests need of the C ABI's insides: a C handle around a session the
// C++ API made, and the C++ options made of a caller's C options. A session on the emulated CUDA device (or any device object)
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

// The C++ options grove_session_create makes of `options` (NULL: the
// defaults): the caller's fields within its struct_size, the defaults for
// the rest. A status naming `function` and the field for bad options.
grove_status_t* ToSessionOptions(const char* function, const grove_session_options_t* options,
                                 SessionOptions* out);

}  // namespace grove::c_internal

#endif  // GROVE_LIB_C_C_API_INTERNAL_H_
