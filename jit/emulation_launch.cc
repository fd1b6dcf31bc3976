#include "jit/emulation_launch.h"

#include <algorithm>
#include <barrier>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

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

std::map<std::string, RegisteredEntry, std::less<>>& Entries() {
  static auto* entries = new std::map<std::string, RegisteredEntry, std::less<>>;
  return *entries;
}

// "/src/jit/kernels/selftest.cuh" -> "selftest".
std::string FileStem(absl::string_view path) {
  const size_t slash = path.find_last_of('/');
  if (slash != absl::string_view::npos) path.remove_prefix(slash + 1);
  const size_t dot = path.find('.');
  if (dot != absl::string_view::npos) path = path.substr(0, dot);
  return std::string(path);
}

struct Warp {
  explicit Warp(int lanes) : barrier(lanes) {}
  std::barrier<> barrier;
  uint64_t slots[32] = {};
};

struct Block {
  explicit Block(int threads) : barrier(threads) {}
  std::barrier<> barrier;
  std::vector<std::unique_ptr<Warp>> warps;
};

thread_local Block* tls_block = nullptr;
thread_local int tls_thread = 0;

}  // namespace

bool RegisterEntry(const char* name, const char* file, EntryFn fn) {
  Entries().emplace(name, RegisteredEntry{fn, FileStem(file)});
  return true;
}

EntryFn FindEntry(absl::string_view name) {
  LinkEmulatedKernels();
  auto it = Entries().find(name);
  return it == Entries().end() ? nullptr : it->second.fn;
}

std::string EntryFile(absl::string_view name) {
  LinkEmulatedKernels();
  auto it = Entries().find(name);
  return it == Entries().end() ? std::string() : it->second.file;
}

std::vector<std::string> EntryNames() {
  LinkEmulatedKernels();
  std::vector<std::string> names;
  for (const auto& [name, entry] : Entries()) names.push_back(name);
  return names;
}

void SyncThreads() { tls_block->barrier.arrive_and_wait(); }

int LaneId() { return tls_thread % 32; }

uint64_t WarpExchange(uint64_t mine, int src) {
  Warp& w = *tls_block->warps[tls_thread / 32];
  const int lane = tls_thread % 32;
  w.slots[lane] = mine;
  w.barrier.arrive_and_wait();
  const int lanes_in_warp = static_cast<int>(tls_block->warps.size()) == tls_thread / 32 + 1
                                ? static_cast<int>(blockDim.x * blockDim.y * blockDim.z) - (tls_thread / 32) * 32
                                : 32;
  const uint64_t got = (src >= 0 && src < lanes_in_warp) ? w.slots[src] : mine;
  w.barrier.arrive_and_wait();
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
  Block shared_block(n);
  for (int w = 0; w * 32 < n; ++w) shared_block.warps.push_back(std::make_unique<Warp>(std::min(32, n - w * 32)));
  auto body = [&](int t) {
    tls_block = &shared_block;
    tls_thread = t;
    blockDim = dim3(block[0], block[1], block[2]);
    gridDim = dim3(grid[0], grid[1], grid[2]);
    threadIdx.x = t % block[0];
    threadIdx.y = (t / block[0]) % block[1];
    threadIdx.z = t / (block[0] * block[1]);
    for (uint32_t bz = 0; bz < grid[2]; ++bz) {
      for (uint32_t by = 0; by < grid[1]; ++by) {
        for (uint32_t bx = 0; bx < grid[0]; ++bx) {
          blockIdx.x = bx;
          blockIdx.y = by;
          blockIdx.z = bz;
          fn(params);
          // No thread starts the next block while another still uses this
          // block's __shared__ storage.
          shared_block.barrier.arrive_and_wait();
        }
      }
    }
    tls_block = nullptr;
  };
  if (n == 1) {
    body(0);
    return absl::OkStatus();
  }
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (int t = 1; t < n; ++t) pool.emplace_back(body, t);
  body(0);
  for (std::thread& th : pool) th.join();
  return absl::OkStatus();
}

}  // namespace grove::emu
