#include "lib/backends/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace grove::cpu {
namespace {

// How long a worker spins for the next job before it sleeps: long enough to
// catch the next split step of a run across the steps between that run on
// the caller alone (and the next run of a caller running back to back),
// short enough that an idle session is idle within a millisecond. A worker
// woken from its sleep costs the step it joins 50-100 us on this project's
// 2-core VM, and a slow core after that: at 50 us, a small CNN whose one
// split Conv came every 150 us ran slower on 2 threads than on 1 (0.131-0.160
// against 0.123-0.134 ms); at 300 us 0.112-0.125, at 1000 us 0.099-0.128.
constexpr std::chrono::microseconds kSpin{500};
// How long the caller of a Run spins for the workers still in its job
// before it sleeps: twice its own time per task, within these bounds. The
// floor: a worker's last task may have started up to a task after the
// caller's, and a caller asleep on the condition variable wakes 50-100 us
// after the worker's notify (on 2 threads a U-Net's small split steps,
// three 2 us tasks each, then waited ~60 us a join, and a session run now
// and then, not back to back, ran serial for it: see LateJoin below).
constexpr std::chrono::microseconds kJoinSpin{100};
constexpr std::chrono::microseconds kMinJoinSpin{30};

// LateJoin: a join later than this past twice the caller's time per task
// was a worker held off its core; the caller then works alone for a backoff.
constexpr std::chrono::microseconds kLateJoinSlack{50};
constexpr std::chrono::milliseconds kMinBackoff{5};
constexpr std::chrono::milliseconds kMaxBackoff{160};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// True on the pool's workers and on a caller inside Run: a nested Run (a
// task that splits its own work) runs inline.
thread_local bool t_in_pool = false;

}  // namespace

struct ThreadPool::Job {
  absl::FunctionRef<void(int64_t)> task;
  int64_t tasks;
  std::atomic<int64_t> next{0};
};

absl::StatusOr<std::unique_ptr<ThreadPool>> ThreadPool::Create(int threads) {
  if (threads < 1) return absl::InvalidArgumentError(absl::StrCat("a thread pool of ", threads, " threads"));
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  pool->workers_.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) {
    try {
      pool->workers_.emplace_back([p = pool.get()] { p->WorkerLoop(); });
      // Named for top and debuggers (at most 15 characters).
      pthread_setname_np(pool->workers_.back().native_handle(), "grove-intra-op");
    } catch (const std::system_error& e) {
      // The destructor stops and joins the workers already started.
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot start intra-op thread ", i, " of ", threads, ": ", e.what()));
    }
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int64_t ThreadPool::Drain(Job& job) {
  int64_t done = 0;
  for (int64_t i = job.next.fetch_add(1, std::memory_order_relaxed); i < job.tasks;
       i = job.next.fetch_add(1, std::memory_order_relaxed)) {
    job.task(i);
    ++done;
  }
  return done;
}

void ThreadPool::Run(int64_t tasks, absl::FunctionRef<void(int64_t)> task) {
  if (tasks <= 0) return;
  if (tasks == 1 || workers_.empty() || t_in_pool || running_.exchange(true, std::memory_order_acquire)) {
    for (int64_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  if (start < serial_until_) {  // backing off: see LateJoin
    for (int64_t i = 0; i < tasks; ++i) task(i);
    running_.store(false, std::memory_order_release);
    return;
  }
  Job job{task, tasks};
  bool notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    generation_.fetch_add(1, std::memory_order_release);
    notify = sleeping_ > 0;
  }
  if (notify) wake_.notify_all();
  t_in_pool = true;
  const int64_t done = Drain(job);
  t_in_pool = false;
  const Clock::time_point drained = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = nullptr;  // closed to late workers
  }
  // Those inside finish their task: a worker's last task usually ends within
  // a task's time of the caller's, sooner than a sleep on left_ would wake.
  const Clock::time_point spin_until =
      drained +
      std::clamp<Clock::duration>(2 * (drained - start) / std::max<int64_t>(done, 1), kMinJoinSpin, kJoinSpin);
  for (int polls = 1; workers_in_job_.load(std::memory_order_acquire) != 0; ++polls) {
    CpuRelax();
    if (polls % 64 == 0) {
      if (Clock::now() >= spin_until) break;
      std::this_thread::yield();  // the core to a worker waiting for it, if any
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    left_.wait(lock, [&] { return workers_in_job_ == 0; });
  }
  // When the last worker left (not when this thread woke up: its own wake
  // from the condition variable is no worker's lateness).
  const Clock::time_point left(Clock::duration(last_left_.load(std::memory_order_relaxed)));
  const Clock::time_point joined = std::max(drained, left);
  // A worker that took a task and then waited for a core (another process,
  // another runtime's spinning threads) kept the caller waiting far longer
  // than a task takes: then the next jobs run on the caller alone for a
  // while, which doubles while it keeps happening (5 ms up to 160 ms), so
  // that a session on a busy machine runs at one thread's speed instead of
  // below it. A join on time halves it.
  const Clock::duration per_task = done > 0 ? (drained - start) / done : Clock::duration::zero();
  if (joined - drained > kLateJoinSlack + 2 * per_task) {
    backoff_ = std::clamp<Clock::duration>(2 * backoff_, kMinBackoff, kMaxBackoff);
    serial_until_ = joined + backoff_;
    late_joins_.fetch_add(1, std::memory_order_relaxed);
  } else {
    backoff_ /= 2;
  }
  running_.store(false, std::memory_order_release);
}

void ThreadPool::WorkerLoop() {
  t_in_pool = true;
  // The generation the pool was made with, not the one seen on starting: a
  // job posted before this thread got going is still one to join.
  uint64_t seen = 0;
  for (;;) {
    // Spin a little for the next job, then sleep.
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    int polls = 0;
    while (generation_.load(std::memory_order_acquire) == seen) {
      CpuRelax();
      if (++polls % 64 == 0) {
        if (std::chrono::steady_clock::now() >= spin_until) break;
        // Gives the core away when another thread waits for it (the
        // session's caller, another process): a no-op on an idle core.
        std::this_thread::yield();
      }
    }
    Job* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (generation_.load(std::memory_order_relaxed) == seen && !stop_) {
        ++sleeping_;
        wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
        --sleeping_;
      }
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      job = job_;
      if (job == nullptr) continue;
      workers_in_job_.fetch_add(1, std::memory_order_relaxed);
    }
    Drain(*job);
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_left_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      last = workers_in_job_.fetch_sub(1, std::memory_order_release) == 1;
    }
    if (last) left_.notify_one();
  }
}

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace grove::cpu
