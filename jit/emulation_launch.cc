#include "jit/emulation_launch.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#if defined(__x86_64__)
#define GROVE_EMU_ASM_SWITCH 1
#else
#define GROVE_EMU_ASM_SWITCH 0
#include <ucontext.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GROVE_EMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define GROVE_EMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(GROVE_EMU_ASAN)
#define GROVE_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(GROVE_EMU_TSAN)
#define GROVE_EMU_TSAN 1
#endif
#ifndef GROVE_EMU_ASAN
#define GROVE_EMU_ASAN 0
#endif
#ifndef GROVE_EMU_TSAN
#define GROVE_EMU_TSAN 0
#endif
#if GROVE_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define GROVE_EMU_NO_ASAN __attribute__((no_sanitize_address))
#else
#define GROVE_EMU_NO_ASAN
#endif
#if GROVE_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#include "absl/strings/str_cat.h"
#include "jit/emulation.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace grove::emu {

// Defined by build/generated/jit/emulated_kernels.cc, which calls one
// function of each kernel file's generated translation unit
// (emulated_kernels_<file>.cc: every type list and variant); calling it
// keeps those objects, and so their registrars, in the link.
void LinkEmulatedKernels();

namespace {

struct RegisteredEntry {
  EntryFn fn = nullptr;
  std::string file;  // "selftest"
};

// Registrars run at static initialisation in every process that links the
// emulated kernels (the `grove` CLI included, for `grove version` too), so a
// registration only records its arguments: the GROVE_ENTRY registrars pass
// string literals and a function. The index by name is built on the first
// lookup (thousands of entries: ~5.7M instructions of map inserts at every
// start before).
struct PendingEntry {
  const char* name;
  const char* file;
  EntryFn fn;
};

struct EntryRegistry {
  std::mutex mu;
  std::vector<PendingEntry> pending;  // registered, not yet in `entries`
  std::map<std::string, RegisteredEntry, std::less<>> entries;
};

EntryRegistry& Registry() {
  static auto* registry = new EntryRegistry;
  return *registry;
}

// "/src/jit/kernels/selftest.cuh" -> "selftest".
std::string FileStem(absl::string_view path) {
  const size_t slash = path.find_last_of('/');
  if (slash != absl::string_view::npos) path.remove_prefix(slash + 1);
  const size_t dot = path.find('.');
  if (dot != absl::string_view::npos) path = path.substr(0, dot);
  return std::string(path);
}

// Every entry registered so far, by name (the first registration of a name
// wins); `registry.mu` is held by the caller.
const std::map<std::string, RegisteredEntry, std::less<>>& Entries(EntryRegistry& registry) {
  for (const PendingEntry& e : registry.pending) {
    registry.entries.emplace(e.name, RegisteredEntry{e.fn, FileStem(e.file)});
  }
  std::vector<PendingEntry>().swap(registry.pending);
  return registry.entries;
}

// --- the threads of a block as fibers ---------------------------------------
// A launch runs on the calling thread: each CUDA thread of a block is a
// fiber (its own stack) and __syncthreads or a warp shuffle switches to the
// next fiber, so a block of 256 threads costs context switches in user
// space, not 255 host threads created per launch and a futex barrier per
// block (the emulated device then cost seconds per test on 2 cores).

// Fiber stacks: 256 KiB each (an ASan build's frames are large), lazily
// committed, with a guard page below, kept per host thread across launches.
constexpr size_t kStackBytes = 256 << 10;

struct Stack {
  Stack() {
    base = static_cast<uint8_t*>(
        mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base == MAP_FAILED) {
      base = nullptr;
      return;
    }
    mprotect(base, 4096, PROT_NONE);  // an overflow faults instead of corrupting the next stack
  }
  ~Stack() {
    if (base != nullptr) munmap(base, kStackBytes);
  }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  uint8_t* base = nullptr;
};

struct Fiber {
  void* sp = nullptr;  // saved stack pointer (x86-64) while switched out
#if !GROVE_EMU_ASM_SWITCH
  ucontext_t ctx;
#endif
  std::unique_ptr<Stack> stack;
  bool done = false;
#if GROVE_EMU_TSAN
  void* tsan = nullptr;
#endif
};

// A barrier of `count` participants among fibers that run one at a time.
struct FiberBarrier {
  int count = 0;
  int arrived = 0;
  uint64_t generation = 0;
};

struct Scheduler {
  EntryFn fn = nullptr;
  const void* params = nullptr;
  std::vector<Fiber>* fibers = nullptr;
  int current = -1;
  int live = 0;
  FiberBarrier block;
  std::vector<FiberBarrier> warps;
  std::vector<uint64_t> slots;  // WarpExchange: one per thread
  void* main_sp = nullptr;
#if !GROVE_EMU_ASM_SWITCH
  ucontext_t main_ctx;
#endif
#if GROVE_EMU_TSAN
  void* main_tsan = nullptr;
#endif
  const void* main_stack_bottom = nullptr;
  size_t main_stack_size = 0;
};

thread_local Scheduler* tls_sched = nullptr;
thread_local int tls_thread = 0;

#if GROVE_EMU_ASM_SWITCH
// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores its pointer in *save and continues on `next`'s.
extern "C" void grove_emu_switch(void** save, void* next);
asm(R"(
  .text
  .globl grove_emu_switch
  .hidden grove_emu_switch
  .type grove_emu_switch,@function
grove_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size grove_emu_switch,.-grove_emu_switch
)");
#endif

// Sanitizers are told about every switch (their fiber API), so ASan's stack
// bookkeeping and TSan's happens-before follow the fibers.
void SwitchToFiber(Scheduler& s, int t) {
  Fiber& f = (*s.fibers)[t];
#if GROVE_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack->base, kStackBytes);
#endif
#if GROVE_EMU_TSAN
  __tsan_switch_to_fiber(f.tsan, 0);
#endif
  s.current = t;
#if GROVE_EMU_ASM_SWITCH
  grove_emu_switch(&s.main_sp, f.sp);
#else
  swapcontext(&s.main_ctx, &f.ctx);
#endif
#if GROVE_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  s.current = -1;
}

void SwitchToMain(Scheduler& s) {
  Fiber& f = (*s.fibers)[s.current];
#if GROVE_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(f.done ? nullptr : &fake, s.main_stack_bottom, s.main_stack_size);
#endif
#if GROVE_EMU_TSAN
  __tsan_switch_to_fiber(s.main_tsan, 0);
#endif
#if GROVE_EMU_ASM_SWITCH
  grove_emu_switch(&f.sp, s.main_sp);
#else
  swapcontext(&f.ctx, &s.main_ctx);
#endif
#if GROVE_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

// Where a fiber starts: runs the kernel for the block set up, then returns
// to the scheduler for good (the stack is set up afresh for the next block).
GROVE_EMU_NO_ASAN void FiberMain() {
  Scheduler& s = *tls_sched;
#if GROVE_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &s.main_stack_bottom, &s.main_stack_size);
#endif
  s.fn(s.params);
  Fiber& f = (*s.fibers)[s.current];
  f.done = true;
  --s.live;
  // A thread that ends counts as arrived at the barriers others wait at.
  if (s.block.arrived > 0 && s.block.arrived >= s.live) {
    s.block.arrived = 0;
    ++s.block.generation;
  }
  SwitchToMain(s);
  __builtin_trap();  // never resumed
}

#if !GROVE_EMU_ASM_SWITCH
void FiberEntry() { FiberMain(); }
#endif

// Sets fiber f up to start FiberMain at its next switch.
void StartFiber(Scheduler& s, Fiber& f) {
  if (f.stack == nullptr) f.stack = std::make_unique<Stack>();
  f.done = false;
#if GROVE_EMU_ASAN
  __asan_unpoison_memory_region(f.stack->base + 4096, kStackBytes - 4096);
#endif
#if GROVE_EMU_TSAN
  if (f.tsan == nullptr) f.tsan = __tsan_create_fiber(0);
#endif
#if GROVE_EMU_ASM_SWITCH
  // The frame grove_emu_switch pops: control words, six registers, then the
  // return address FiberMain, 16-byte aligned as a call would leave it.
  uintptr_t top = reinterpret_cast<uintptr_t>(f.stack->base + kStackBytes) & ~uintptr_t{15};
  uint64_t* frame = reinterpret_cast<uint64_t*>(top - 16);
  frame[0] = reinterpret_cast<uint64_t>(&FiberMain);
  for (int r = 1; r <= 6; ++r) frame[-r] = 0;
  uint32_t control[2];
  asm volatile("stmxcsr %0" : "=m"(control[0]));
  asm volatile("fnstcw %0" : "=m"(control[1]));
  std::memcpy(&frame[-7], control, 8);
  f.sp = &frame[-7];
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack->base + 4096;
  f.ctx.uc_stack.ss_size = kStackBytes - 4096;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, &FiberEntry, 0);
#endif
  (void)s;
}

// The calling fiber waits until every live thread of `b` has arrived.
void Arrive(Scheduler& s, FiberBarrier& b, int live) {
  const uint64_t gen = b.generation;
  if (++b.arrived >= live) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (b.generation == gen) SwitchToMain(s);
}

void SetThreadIndex(int t, const std::array<uint32_t, 3>& block) {
  tls_thread = t;
  threadIdx.x = t % block[0];
  threadIdx.y = (t / block[0]) % block[1];
  threadIdx.z = t / (block[0] * block[1]);
}

}  // namespace

bool RegisterEntry(const char* name, const char* file, EntryFn fn) {
  EntryRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.pending.push_back(PendingEntry{name, file, fn});
  return true;
}

EntryFn FindEntry(absl::string_view name) {
  LinkEmulatedKernels();
  EntryRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  const auto& entries = Entries(registry);
  auto it = entries.find(name);
  return it == entries.end() ? nullptr : it->second.fn;
}

std::string EntryFile(absl::string_view name) {
  LinkEmulatedKernels();
  EntryRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  const auto& entries = Entries(registry);
  auto it = entries.find(name);
  return it == entries.end() ? std::string() : it->second.file;
}

std::vector<std::string> EntryNames() {
  LinkEmulatedKernels();
  EntryRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::vector<std::string> names;
  for (const auto& [name, entry] : Entries(registry)) names.push_back(name);
  return names;
}

void SyncThreads() {
  Scheduler* s = tls_sched;
  if (s == nullptr || s->current < 0) return;  // a block of one thread
  Arrive(*s, s->block, s->live);
}

int LaneId() { return tls_thread % 32; }

uint64_t WarpExchange(uint64_t mine, int src) {
  Scheduler* s = tls_sched;
  if (s == nullptr || s->current < 0) return mine;  // a block of one thread: its own value
  const int warp = tls_thread / 32;
  const int first = warp * 32;
  FiberBarrier& b = s->warps[warp];
  s->slots[tls_thread] = mine;
  Arrive(*s, b, b.count);
  const uint64_t got = (src >= 0 && src < b.count) ? s->slots[first + src] : mine;
  Arrive(*s, b, b.count);
  return got;
}

absl::Status Launch(EntryFn fn, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block, const void* params) {
  if (fn == nullptr) return absl::InvalidArgumentError("emulated launch: no entry point");
  const uint64_t threads = static_cast<uint64_t>(block[0]) * block[1] * block[2];
  const uint64_t blocks = static_cast<uint64_t>(grid[0]) * grid[1] * grid[2];
  if (threads == 0 || threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("emulated launch: block of ", block[0], "x", block[1], "x", block[2], " threads"));
  }
  if (blocks == 0) return absl::InvalidArgumentError("emulated launch: empty grid");
  static std::mutex launch_mutex;
  std::lock_guard<std::mutex> lock(launch_mutex);

  const int n = static_cast<int>(threads);
  blockDim = dim3(block[0], block[1], block[2]);
  gridDim = dim3(grid[0], grid[1], grid[2]);
  auto each_block = [&](auto&& run) {
    for (uint32_t bz = 0; bz < grid[2]; ++bz) {
      for (uint32_t by = 0; by < grid[1]; ++by) {
        for (uint32_t bx = 0; bx < grid[0]; ++bx) {
          blockIdx.x = bx;
          blockIdx.y = by;
          blockIdx.z = bz;
          run();
        }
      }
    }
  };
  if (n == 1) {
    SetThreadIndex(0, block);
    each_block([&] { fn(params); });
    return absl::OkStatus();
  }

  thread_local std::vector<Fiber> fibers;
  if (static_cast<int>(fibers.size()) < n) fibers.resize(n);
  Scheduler sched;
  sched.fn = fn;
  sched.params = params;
  sched.fibers = &fibers;
  sched.slots.assign(n, 0);
  for (int w = 0; w * 32 < n; ++w) sched.warps.push_back(FiberBarrier{std::min(32, n - w * 32)});
#if GROVE_EMU_TSAN
  sched.main_tsan = __tsan_get_current_fiber();
#endif
  for (Fiber& f : fibers) {
    if (f.stack == nullptr) f.stack = std::make_unique<Stack>();
    if (f.stack->base == nullptr) return absl::ResourceExhaustedError("emulated launch: no memory for thread stacks");
  }
  Scheduler* const outer = tls_sched;
  tls_sched = &sched;
  // Blocks one after another; in a block, round after round, each thread
  // runs until its next barrier (or its end), so no thread passes a
  // barrier before all have reached it.
  each_block([&] {
    sched.live = n;
    sched.block = FiberBarrier{n};
    for (FiberBarrier& w : sched.warps) w.arrived = 0;
    for (int t = 0; t < n; ++t) StartFiber(sched, fibers[t]);
    while (sched.live > 0) {
      for (int t = 0; t < n; ++t) {
        if (fibers[t].done) continue;
        SetThreadIndex(t, block);
        SwitchToFiber(sched, t);
      }
    }
  });
  tls_sched = outer;
  return absl::OkStatus();
}

}  // namespace grove::emu
