// A CPU session's intra-op threads (SessionOptions::intra_op_threads): a
// fork-join pool of N - 1 workers that the calling thread joins, owned by
// one session's CPU backend and used by nothing else, so sessions never run
// on each other's threads and N threads per session is all a session takes.
//
//   absl::StatusOr<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(2);
//   (*pool)->Run(4, [&](int64_t i) { Work(i); });  // returns when all 4 ran
//
// Why not a library: TBB's workers are one process-wide set that its arenas
// share, and OpenMP's team belongs to the calling thread, not the session;
// Eigen's ThreadPool is per instance but a work-stealing task queue, more
// than a fork-join over ranges needs (and neither TBB nor Eigen is a grove
// dependency). Workers wait on a condition variable after a spin of at most
// half a millisecond (a run's split steps come one after another, some
// serial steps apart), so an idle session costs no CPU; the caller spins briefly for the workers still in its job before it
// sleeps at a join (their last tasks end within a task's time of its own).
#ifndef GROVE_LIB_BACKENDS_CPU_THREAD_POOL_H_
#define GROVE_LIB_BACKENDS_CPU_THREAD_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "lib/ir/intra_op_threads.h"

namespace grove::cpu {

class ThreadPool final : public ir::IntraOpThreads {
 public:
  // A pool of `threads` (>= 1) threads, the caller's included: threads - 1
  // workers start here. Fails when the system refuses a thread.
  static absl::StatusOr<std::unique_ptr<ThreadPool>> Create(int threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const override { return static_cast<int>(workers_.size()) + 1; }
  // How many Runs waited on a worker held off its core (and made the next
  // jobs run on the caller alone for a while).
  int64_t late_joins() const { return late_joins_.load(std::memory_order_relaxed); }
  // One Run at a time (a session runs on one thread at a time); a Run from
  // inside a task, or while another Run is in progress, runs inline.
  void Run(int64_t tasks, absl::FunctionRef<void(int64_t)> task) override;

 private:
  struct Job;
  ThreadPool() = default;
  void WorkerLoop();
  // Runs the job's tasks not taken yet; returns how many it ran.
  static int64_t Drain(Job& job);

  std::mutex mu_;
  std::condition_variable wake_;  // workers: a new job or stop
  std::condition_variable left_;  // the caller: the last worker left the job
  // Bumped (under mu_) for each job; workers spin on it before sleeping.
  std::atomic<uint64_t> generation_{0};
  Job* job_ = nullptr;        // joinable job, under mu_
  // Changed under mu_; read without it by the caller's spin at a join.
  std::atomic<int> workers_in_job_{0};
  // When a worker last left a job (steady_clock ticks), stored under mu_
  // before it leaves: the join's time, for LateJoin.
  std::atomic<int64_t> last_left_{0};
  int sleeping_ = 0;          // under mu_
  bool stop_ = false;         // under mu_
  std::atomic<bool> running_{false};
  // The caller's backoff after a late join (Run): jobs before serial_until_
  // run on the caller alone. Touched only by the Run holding running_.
  std::chrono::steady_clock::time_point serial_until_{};
  std::chrono::steady_clock::duration backoff_{};
  std::atomic<int64_t> late_joins_{0};
  std::vector<std::thread> workers_;
};

// The CPUs this process may run on (its affinity mask), at least 1: what
// SessionOptions::intra_op_threads = 0 takes.
int AvailableCpus();

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_THREAD_POOL_H_
