// The seam between CPU kernels and a session's intra-op threads
// (SessionOptions::intra_op_threads). Kernels reach it through
// KernelContext::Host::intra_op_threads() and split their work with
// cpu::ParallelFor (lib/backends/cpu/parallel_for.h); the CPU backend
// implements it with a pool of its own (lib/backends/cpu/thread_pool.h).
#ifndef GROVE_LIB_IR_INTRA_OP_THREADS_H_
#define GROVE_LIB_IR_INTRA_OP_THREADS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace grove::ir {

class IntraOpThreads {
 public:
  virtual ~IntraOpThreads() = default;
  // The threads work runs on, the calling thread included (>= 1).
  virtual int num_threads() const = 0;
  // Calls task(i) once for each i in [0, tasks), spread over the threads
  // (the caller's included), and returns when every call has returned. A
  // Run from inside a task runs its tasks on the calling thread, in order.
  virtual void Run(int64_t tasks, absl::FunctionRef<void(int64_t)> task) = 0;
};

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_INTRA_OP_THREADS_H_
