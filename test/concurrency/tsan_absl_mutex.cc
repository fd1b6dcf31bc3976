// ThreadSanitizer builds only (test/CMakeLists.txt adds this file when
// GROVE_SANITIZE has "thread"): makes absl::Mutex visible to TSan.
//
// Debian's libabsl is not built with TSan, so TSan never sees absl::Mutex
// lock or unlock and reports every access guarded by one (the kernel cache's
// map) as a data race. These definitions interpose the library's: each calls
// the real function (dlsym RTLD_NEXT) and tells TSan what it did, so the
// happens-before edges of the mutex are known. absl::Notification locks an
// absl::Mutex inside the library, through these same (interposed) symbols.
// A writer's unlock orders before any later lock; a reader's unlock orders
// before a later writer's lock (and, more than needed, a later reader's).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"

namespace {

template <typename Fn>
Fn Real(const char* symbol) {
  void* p = dlsym(RTLD_NEXT, symbol);
  if (p == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found\n", symbol);
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

using MutexFn = void (*)(Mutex*);
using MutexTryFn = bool (*)(Mutex*);
using MutexWhenFn = void (*)(Mutex*, const Condition&);

// The mangled names carry abseil's inline namespace, "debian3" on Debian 12
// (a missing symbol aborts the test with its name).

void Mutex::Lock() {
  static const MutexFn real = Real<MutexFn>("_ZN4absl7debian35Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}
void Mutex::Unlock() {
  static const MutexFn real = Real<MutexFn>("_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}
bool Mutex::TryLock() {
  static const MutexTryFn real = Real<MutexTryFn>("_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}
void Mutex::ReaderLock() {
  static const MutexFn real = Real<MutexFn>("_ZN4absl7debian35Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}
void Mutex::ReaderUnlock() {
  static const MutexFn real = Real<MutexFn>("_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}
bool Mutex::ReaderTryLock() {
  static const MutexTryFn real = Real<MutexTryFn>("_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}
void Mutex::LockWhen(const Condition& cond) {
  static const MutexWhenFn real = Real<MutexWhenFn>("_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  static const MutexWhenFn real = Real<MutexWhenFn>("_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}
void Mutex::Await(const Condition& cond) {  // unlocks and relocks inside
  static const MutexWhenFn real = Real<MutexWhenFn>("_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

ABSL_NAMESPACE_END
}  // namespace absl
