// Kernel variants as values (after DietCode): a kernel family is a template of
// jit/kernels/ with tile parameters; a configuration (family, dtypes, tile
// parameters) is a value. Its name spells it and names its entry point
// ("softmax__f32__threads128_vec4"), and its module (ModuleSpec with the
// parameters as GROVE_V_<NAME> defines) keys the kernel cache.
//
// Each family declares its variant space (which parameters, which values,
// which combinations are valid for a problem), today's geometry as its generic
// variant, and the cost model's terms for a variant on a problem
// (jit/cost_model.h ranks by them). The dispatcher (jit/dispatch_table.h)
// picks a variant per step when the step is prepared: a table hit, else the
// cost model's pick.
//
// Backend-free: no CUDA header, no device; tested in CI.
#ifndef GROVE_JIT_KERNEL_CONFIG_H_
#define GROVE_JIT_KERNEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "jit/module.h"

namespace grove::jit {

// A kernel configuration. `params` are sorted by name, names unique,
// lower-case letters and digits only (they become GROVE_V_<NAME> defines and
// part of the entry name).
struct KernelConfig {
  std::string family;                              // "softmax", "reduce", "ew", "gemv", ...
  std::vector<DType> dtypes;                       // the module's GROVE_T0, GROVE_T1
  std::vector<std::pair<std::string, int>> params;  // {"threads", 128}, {"vec", 4}

  // The value of a parameter, or `fallback` when the config has none.
  int Get(absl::string_view name, int fallback) const;
  // "softmax__f32__threads128_vec4" ("softmax__f32" without parameters).
  std::string Name() const;
  // Parses Name()'s spelling back (tables, CLI); an error names what is wrong.
  static absl::StatusOr<KernelConfig> Parse(absl::string_view name);

  bool operator==(const KernelConfig& o) const {
    return family == o.family && dtypes == o.dtypes && params == o.params;
  }
  bool operator!=(const KernelConfig& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const KernelConfig& c) {
    return H::combine(std::move(h), c.family, c.dtypes, c.params);
  }
};

// What a step asks of a family: its dtypes and extents, by family-specific
// names ("rows", "n" for a row kernel; "m", "n", "k" for a GEMV).
struct KernelProblem {
  std::string family;
  std::vector<DType> dtypes;
  std::vector<std::pair<std::string, int64_t>> dims;  // sorted by name

  int64_t Dim(absl::string_view name, int64_t fallback = 0) const;
  // "n=512,rows=4096".
  std::string ToString() const;
};

// What the cost model knows of a GPU. FromArch fills typical numbers for an
// arch when no device is open (grove compile, inspect without a GPU).
struct GpuTraits {
  int arch = 90;                     // sm_90
  int sms = 132;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int regs_per_sm = 65536;
  int64_t shared_bytes_per_sm = 228 * 1024;
  double dram_gbs = 4800;            // memory bandwidth, GB/s
  double fp32_tflops = 67;
  double launch_us = 2.5;            // a launch's fixed cost

  static GpuTraits FromArch(int arch);
};

// The cost model's terms for one variant on one problem (DietCode's):
// occupancy in (0, 1], the share of launched work that is padding, bytes
// moved, flops, and the estimate they give in microseconds.
struct CostTerms {
  double occupancy = 1;
  double waste = 0;
  double bytes = 0;
  double flops = 0;
  double estimate_us = 0;
};

// A launch: blocks of `threads` threads (1-D).
struct LaunchShape {
  int64_t blocks = 1;
  int threads = 1;
};

// One tunable parameter of a family and the values it may take.
struct ParamSpace {
  std::string name;
  std::vector<int> values;
};

// A kernel family: its variant space, generic variant and cost terms.
// Families are registered once (static tables in kernel_config.cc) and live
// for the process.
class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  // "softmax"; also the jit/kernels file unless file() says otherwise.
  virtual absl::string_view name() const = 0;
  virtual absl::string_view file() const { return name(); }
  // The dtype lists the family is built for (as kernels.cmake lists them).
  virtual std::vector<std::vector<DType>> dtype_lists() const = 0;
  virtual std::vector<ParamSpace> space() const = 0;
  // Whether a config is in the space: this family, one of its dtype lists,
  // exactly the space's parameters with listed values, and Consistent.
  // Every config in the space has a NVRTC module and an emulated entry.
  bool InSpace(const KernelConfig& config) const;
  // Combinations of listed values that cannot be built (e.g. lanes that
  // are neither a thread, a warp nor the block); true by default.
  virtual bool Consistent(const KernelConfig&) const { return true; }
  // Whether a config is in the space and can run `problem` (e.g. a vector
  // width that divides the row).
  virtual bool Valid(const KernelConfig& config, const KernelProblem& problem) const = 0;
  // Today's fixed geometry for the problem: what runs when nothing better is
  // known, and the baseline of `grove tune`.
  virtual KernelConfig Generic(const KernelProblem& problem) const = 0;
  virtual CostTerms Cost(const KernelConfig& config, const KernelProblem& problem, const GpuTraits& gpu) const = 0;
  // The launch geometry of `config` on `problem` (what the CUDA prepares
  // launch; grids are capped at 65535 blocks, the kernels loop grid-stride).
  virtual LaunchShape Launch(const KernelConfig& config, const KernelProblem& problem) const = 0;

  // Every config of the space for these dtypes (the cross product less
  // what is not InSpace, in a stable order: parameters by name, values as
  // listed, the last parameter varying fastest), valid or not for a
  // particular problem.
  std::vector<KernelConfig> Enumerate(absl::Span<const DType> dtypes) const;
};

// The registered families, by name; nullptr for an unknown one.
const KernelFamily* FindKernelFamily(absl::string_view name);
absl::Span<const KernelFamily* const> KernelFamilies();

// The module that builds `config`: its family's file, dtypes and parameters
// as GROVE_V_<NAME> defines.
ModuleSpec ConfigModule(const KernelConfig& config);

// The largest M of the "gemv" family (jit/kernels/gemv.cuh).
inline constexpr int64_t kGemvMaxM = 64;
// The cost model's estimate for the vendor GEMM (cuBLASLt) on a "gemv"
// problem: the bytes it must move, and M padded to its smallest tile (64)
// in flops. A GEMM step runs the gemv family when its pick estimates less.
double GemmLibraryEstimateUs(const KernelProblem& problem, const GpuTraits& gpu);

}  // namespace grove::jit

#endif  // GROVE_JIT_KERNEL_CONFIG_H_
