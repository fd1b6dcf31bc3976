// Small kernel families for the dispatcher's tests (jit/cost_model.h,
// jit/dispatch_table.h, lib/backends/cuda/kernel_choice.h), with a cost
// simple enough to rank by hand:
//   "rowtest": threads {64, 128, 256} x vec {1, 2, 4}, dtypes f32 and f16;
//     valid when vec divides n; estimate_us = ceil(n / (threads * vec)) * 0.1
//     + threads * 0.001; generic threads256_vec1.
#ifndef GROVE_TEST_CUDA_TEST_KERNEL_FAMILIES_H_
#define GROVE_TEST_CUDA_TEST_KERNEL_FAMILIES_H_

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "jit/dispatch_table.h"
#include "jit/kernel_config.h"

namespace grove::testing {

class RowTestFamily : public jit::KernelFamily {
 public:
  // `threads`: the space's thread counts (a family that lost 256 later).
  explicit RowTestFamily(std::vector<int> threads = {64, 128, 256}) : threads_(std::move(threads)) {}
  absl::string_view name() const override { return "rowtest"; }
  std::vector<std::vector<DType>> dtype_lists() const override { return {{DType::kF32}, {DType::kF16}}; }
  std::vector<jit::ParamSpace> space() const override { return {{"threads", threads_}, {"vec", {1, 2, 4}}}; }
  bool Valid(const jit::KernelConfig& c, const jit::KernelProblem& p) const override {
    const int vec = c.Get("vec", 0);
    return InSpace(c) && vec > 0 && p.Dim("n") % vec == 0;
  }
  jit::KernelConfig Generic(const jit::KernelProblem& p) const override {
    return jit::KernelConfig{"rowtest", p.dtypes, {{"threads", 256}, {"vec", 1}}};
  }
  jit::CostTerms Cost(const jit::KernelConfig& c, const jit::KernelProblem& p, const jit::GpuTraits&) const override {
    jit::CostTerms t;
    const int64_t per_pass = int64_t{c.Get("threads", 1)} * c.Get("vec", 1);
    const int64_t passes = (p.Dim("n") + per_pass - 1) / per_pass;
    t.estimate_us = static_cast<double>(passes) * 0.1 + c.Get("threads", 0) * 0.001;
    if (nan_threads == c.Get("threads", 0)) t.estimate_us = std::numeric_limits<double>::quiet_NaN();
    return t;
  }
  jit::LaunchShape Launch(const jit::KernelConfig& c, const jit::KernelProblem& p) const override {
    return {p.Dim("rows", 1), c.Get("threads", 1)};
  }
  int nan_threads = 0;  // a thread count whose estimates are NaN

 private:
  std::vector<int> threads_;
};

// Looks up families in a fixed list (tests' jit::FamilyLookup).
inline jit::FamilyLookup Families(std::vector<const jit::KernelFamily*> list) {
  return [list](absl::string_view name) -> const jit::KernelFamily* {
    for (const jit::KernelFamily* f : list) {
      if (f->name() == name) return f;
    }
    return nullptr;
  };
}

inline jit::KernelProblem RowProblem(int64_t n, int64_t rows, DType t = DType::kF32) {
  return jit::KernelProblem{"rowtest", {t}, {{"n", n}, {"rows", rows}}};
}

inline jit::KernelConfig RowConfig(int threads, int vec, DType t = DType::kF32) {
  return jit::KernelConfig{"rowtest", {t}, {{"threads", threads}, {"vec", vec}}};
}

inline jit::TableProvenance TestProvenance(int arch = 90) {
  jit::TableProvenance p;
  p.gpu = "test table (written by a unit test)";
  p.arch = arch;
  p.date = "2026-12-02T00:00:00Z";
  p.grove_version = "0.2.0";
  return p;
}

inline jit::DispatchEntry RowEntry(int arch, int64_t n, int64_t rows, int threads, int vec, double us = 1.5) {
  jit::DispatchEntry e;
  e.arch = arch;
  e.problem = RowProblem(n, rows);
  e.bucket = jit::ShapeBucket(e.problem);
  e.config = RowConfig(threads, vec);
  e.measured_us = us;
  e.generic_us = 2 * us;
  return e;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_CUDA_TEST_KERNEL_FAMILIES_H_
