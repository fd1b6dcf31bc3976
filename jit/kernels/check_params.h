// Deferred device checks (host and device code): a kernel that meets a value
// the host could not check before the launch (an index computed on the
// device, an integer divisor of 0) writes nothing out of bounds and records
// the failure in its session's CheckRecord instead of stopping. The host
// reads the record at its next wait for the device (the run's final
// synchronize, with the outputs) and fails the run with the step's message
// (lib/backends/cuda/exec_context.h: ExecContext::CheckSite), so the step
// needs no wait of its own and its segment stays one CUDA graph.
#ifndef GROVE_JIT_KERNELS_CHECK_PARAMS_H_
#define GROVE_JIT_KERNELS_CHECK_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// The first failure since the host last read the record (device memory,
// zeroed by the host): `site` 0 means none. The first kernel to fail (in
// stream order) claims it; within that kernel, any one failing thread.
struct CheckRecord {
  u64 site;   // the failing step's site (CheckSite::site)
  i64 value;  // the bad value (an index; for a divisor, its flat position)
  i64 bound;  // the size the value had to fit (a dim), 0 where none
  i64 a, b;   // where: op-specific (an index's position, a tuple's coordinate)
};

// What a kernel's parameters carry: its step's site and the session's
// record; record null when the host checked every value already.
struct CheckSite {
  CheckRecord* record;
  u64 site;
};

// Parameters of check.cuh's kernels, which check values and write nothing
// else: for a step whose own kernel has no element to check them on (a
// Gather or ScatterND with nothing to move) or whose kernel is not the place
// (integer Div's divisor, checked beside the elementwise launch).

// `count` index tuples of dims.rank coordinates each (i32 or i64),
// coordinate d within [-dims.d[d], dims.d[d]); a = the tuple, b = the
// coordinate.
struct IndexCheckParams {
  const void* indices;
  i64 count;
  Dims dims;
  int indices_i64;
  CheckSite check;
};

// `n` integer elements (GROVE_T0 of their width) that must not be 0; value =
// a zero's flat position (any one), bound = n.
struct NonZeroCheckParams {
  const void* values;
  i64 n;
  CheckSite check;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_CHECK_PARAMS_H_
