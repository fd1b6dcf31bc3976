// Runs an emulated kernel launch (see jit/emulation.h): the entry points of
// jit/kernels/*.cuh compiled as host C++, looked up by name.
#ifndef GROVE_JIT_EMULATION_LAUNCH_H_
#define GROVE_JIT_EMULATION_LAUNCH_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grove::emu {

using EntryFn = void (*)(const void* params);

// The host function of an entry point ("ew_chain__f32"), or nullptr.
EntryFn FindEntry(absl::string_view name);
// Every registered entry name, sorted.
std::vector<std::string> EntryNames();
// The kernel file that defines an entry, as a ModuleSpec names it
// ("selftest" for jit/kernels/selftest.cuh), or "" for an unknown entry.
std::string EntryFile(absl::string_view name);

// Runs `fn` over grid × block as CUDA would: blocks one after another, the
// threads of a block together on host threads. Launches are serialised
// (__shared__ memory is static storage). Fails on an empty or oversized
// launch (more than 1024 threads per block, as CUDA).
absl::Status Launch(EntryFn fn, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block, const void* params);

}  // namespace grove::emu

#endif  // GROVE_JIT_EMULATION_LAUNCH_H_
