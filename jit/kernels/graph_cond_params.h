// Parameters of jit/kernels/graph_cond.cuh: conditional graph nodes (CUDA
// 12.4+). A conditional node runs its body graph(s) by the value of a
// handle that a kernel in the same graph sets from device memory
// (cudaGraphSetConditional), so the branch of an If or the next trip of a
// Loop is decided on the device with no read back to the host.
#ifndef GROVE_JIT_KERNELS_GRAPH_COND_PARAMS_H_
#define GROVE_JIT_KERNELS_GRAPH_COND_PARAMS_H_

#include "jit/kernels/check_params.h"
#include "jit/kernels/types.h"

namespace grove_k {

// handle = (*flag != 0); negated = (*flag == 0) when negated is not 0 (an
// If's else body as a second IF node, on drivers before 12.8).
struct SetConditionalParams {
  u64 handle;
  u64 negated;
  const u8* flag;
};

// A Loop's trip counter in a graph (one thread):
//   init: *iter = 0, *flag = (trips > 0 && cond)
//   next: *iter += 1, *flag = (*iter < trips && body cond && *iter < cap)
// trips is *trips_ptr when not null, else trips_value; cond likewise; cap
// bounds the trips of one launch (SessionOptions::max_body_runs): a loop
// stopped by it (it would have gone on) reports to `check` (value: the
// trips run, bound: the cap), so the run fails at its next wait.
struct LoopStepParams {
  i64* iter;
  u8* flag;
  const i64* trips_ptr;
  i64 trips_value;
  const u8* cond_ptr;
  i64 cond_value;
  i64 cap;
  CheckSite check;
  int init;
};

// A Loop's scan output inside its graph: the body's slice (`bytes` at src)
// written at the trip the counter says, dst + *iter * bytes, when *iter <
// limit (the trips the buffer holds; the counter's cap stops the loop
// before a trip past it).
// A device-to-device copy inside a CUDA graph (cuda::ParamDevice): as a
// kernel whose pointers and size are parameters, a graph refresh can move
// it (a copy at another offset, of fewer bytes in a bucket) where a graph's
// memcpy node is baked.
struct CopyBytesParams {
  u8* dst;
  const u8* src;
  i64 bytes;
};

struct ScanWriteParams {
  u8* dst;
  const u8* src;
  i64 bytes;
  const i64* iter;
  i64 limit;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GRAPH_COND_PARAMS_H_
