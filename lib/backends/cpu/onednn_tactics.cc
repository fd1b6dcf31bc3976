// Timing oneDNN's implementations of a problem (onednn_tactics.h).
#include "lib/backends/cpu/onednn_tactics.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "lib/backends/cpu/onednn_internal.h"

namespace grove::cpu {
namespace {

using Timer = std::function<std::optional<double>(const std::string& impl)>;

// A challenger replaces oneDNN's first pick only when it is this much faster:
// two implementations within noise keep oneDNN's order (and its results).
constexpr double kMargin = 0.97;

std::atomic<bool>& TimingFlag() {
  static std::atomic<bool> enabled{[] {
    const char* v = std::getenv("GROVE_CPU_ONEDNN_TIMING");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }()};
  return enabled;
}

std::atomic<int64_t> g_problems_timed{0};

struct Choices {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::string> impl_of ABSL_GUARDED_BY(mu);  // key -> implementation
  Timer timer ABSL_GUARDED_BY(mu);
};

Choices& KeptChoices() {
  static Choices* choices = new Choices();
  return *choices;
}

std::string Dims(const memory::dims& d) { return absl::StrJoin(d, "x"); }

// The arguments a run binds: the data ones and each binary post-op's
// operand (DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1; oneDNN answers
// garbage, not an empty descriptor, for that argument of another post-op).
std::vector<int> RunArgs(const dnnl::primitive_desc& pd) {
  std::vector<int> args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
  const dnnl::primitive_attr attr = pd.get_primitive_attr();
  const dnnl::post_ops ops = attr.get_post_ops();
  for (int i = 0; i < ops.len(); ++i) {
    if (ops.kind(i) == dnnl::primitive::kind::binary) args.push_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1);
  }
  return args;
}

// Seconds of the best of three runs of `pd`'s primitive (after a warm-up)
// over zero-filled arrays, on the calling thread; nullopt when it cannot run.
// A run slower than `give_up` seconds ends the timing: it lost already.
std::optional<double> TimeRuns(const dnnl::primitive_desc& pd, double give_up) {
  try {
    const dnnl::engine& engine = CpuEngine();
    dnnl::stream stream(engine);
    dnnl::primitive primitive(pd);
    std::vector<memory> arrays;
    std::vector<dnnl_exec_arg_t> args;
    std::vector<int> run_args = RunArgs(pd);
    run_args.push_back(DNNL_ARG_SCRATCHPAD);
    for (int arg : run_args) {
      // The scratchpad's descriptor is a query of its own.
      const memory::desc md = arg == DNNL_ARG_SCRATCHPAD ? pd.scratchpad_desc()
                                                         : pd.query_md(dnnl::query::exec_arg_md, arg);
      if (md.get_size() == 0) continue;
      memory m(md, engine);
      std::memset(m.get_data_handle(), 0, md.get_size());
      arrays.push_back(m);
      args.push_back({arg, m.get()});
    }
    double best = std::numeric_limits<double>::infinity();
    for (int run = 0; run < 4; ++run) {
      const auto start = std::chrono::steady_clock::now();
      if (dnnl_primitive_execute(primitive.get(), stream.get(), static_cast<int>(args.size()), args.data()) !=
              dnnl_success ||
          dnnl_stream_wait(stream.get()) != dnnl_success) {
        return std::nullopt;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (run > 0) best = std::min(best, s);
      if (s > give_up) return s;
    }
    return best;
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

}  // namespace

bool OneDnnTimingEnabled() { return TimingFlag().load(std::memory_order_relaxed); }
void SetOneDnnTimingEnabled(bool enabled) { TimingFlag().store(enabled, std::memory_order_relaxed); }
int64_t OneDnnProblemsTimed() { return g_problems_timed.load(std::memory_order_relaxed); }

void SetOneDnnTimerForTest(Timer timer) {
  Choices& c = KeptChoices();
  absl::MutexLock lock(&c.mu);
  c.timer = std::move(timer);
}

void ForgetOneDnnChoicesForTest() {
  Choices& c = KeptChoices();
  absl::MutexLock lock(&c.mu);
  c.impl_of.clear();
}

namespace internal_tactics {

std::string ProblemKey(const dnnl::primitive_desc& pd, absl::string_view problem) {
  std::string key = absl::StrCat(static_cast<int>(pd.get_kind()), " ", problem);
  for (int arg : {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}) {
    const memory::desc md = pd.query_md(dnnl::query::exec_arg_md, arg);
    if (md.get_size() == 0) continue;
    absl::StrAppend(&key, " ", arg, ":", Dims(md.dims()), ":", static_cast<int>(md.data_type()));
    // The weights' layout is the implementation's own (reordered once at the
    // prepare); the source's and destination's are the step's.
    if (arg != DNNL_ARG_WEIGHTS) {
      absl::StrAppend(&key, ":", Dims(memory::dims(md.data.format_desc.blocking.strides,
                                                   md.data.format_desc.blocking.strides + md.data.ndims)));
      for (int b = 0; b < md.data.format_desc.blocking.inner_nblks; ++b) {
        absl::StrAppend(&key, "/", md.data.format_desc.blocking.inner_blks[b], "@",
                        md.data.format_desc.blocking.inner_idxs[b]);
      }
    }
  }
  // The post-ops are a view into the attributes: both kept alive here.
  const dnnl::primitive_attr attr = pd.get_primitive_attr();
  const dnnl::post_ops ops = attr.get_post_ops();
  for (int i = 0; i < ops.len(); ++i) {
    absl::StrAppend(&key, " post", static_cast<int>(ops.kind(i)));
    if (ops.kind(i) == dnnl::primitive::kind::eltwise) {
      float scale, alpha, beta;
      dnnl::algorithm alg;
      ops.get_params_eltwise(i, scale, alg, alpha, beta);
      absl::StrAppend(&key, ":", static_cast<int>(alg), ":", alpha, ":", beta);
    } else if (ops.kind(i) == dnnl::primitive::kind::binary) {
      dnnl::algorithm alg;
      memory::desc src1;
      ops.get_params_binary(i, alg, src1);
      absl::StrAppend(&key, ":", static_cast<int>(alg), ":", Dims(src1.dims()));
    }
  }
  return key;
}

std::vector<dnnl_primitive_desc_t> OtherImpls(const dnnl::primitive_desc& first) {
  std::vector<dnnl_primitive_desc_t> out;
  const_dnnl_op_desc_t op = nullptr;
  if (dnnl_primitive_desc_query(first.get(), dnnl_query_op_d, 0, &op) != dnnl_success || op == nullptr) return out;
  // A Conv's source and destination as `first` resolved them (its
  // operation may say format_tag::any, which each implementation resolves
  // its own way).
  dnnl_convolution_desc_t conv;
  if (first.get_kind() == dnnl::primitive::kind::convolution) {
    conv = *static_cast<const dnnl_convolution_desc_t*>(op);
    conv.src_desc = *dnnl_primitive_desc_query_md(first.get(), dnnl_query_exec_arg_md, DNNL_ARG_SRC);
    conv.dst_desc = *dnnl_primitive_desc_query_md(first.get(), dnnl_query_exec_arg_md, DNNL_ARG_DST);
    op = &conv;
  }
  const dnnl::primitive_attr attr = first.get_primitive_attr();
  dnnl_primitive_desc_iterator_t it = nullptr;
  if (dnnl_primitive_desc_iterator_create(&it, op, attr.get(), CpuEngine().get(), nullptr) != dnnl_success) {
    return out;
  }
  const std::string first_impl = first.impl_info_str();
  auto same_md = [&](const_dnnl_primitive_desc_t pd, int arg) {
    const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg);
    const dnnl_memory_desc_t* want = dnnl_primitive_desc_query_md(first.get(), dnnl_query_exec_arg_md, arg);
    return md != nullptr && want != nullptr && dnnl_memory_desc_equal(md, want) != 0;
  };
  dnnl_status_t status = dnnl_success;
  while (status == dnnl_success && out.size() + 1 < static_cast<size_t>(kMaxTimedImpls)) {
    dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
    status = dnnl_primitive_desc_iterator_next(it);
    if (pd == nullptr) continue;
    const char* name = nullptr;
    const std::string impl =
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name != nullptr
            ? name
            : "";
    if (impl.empty() || impl == first_impl || absl::StartsWith(impl, "ref:") || absl::StrContains(impl, "gemm") ||
        !same_md(pd, DNNL_ARG_SRC) || !same_md(pd, DNNL_ARG_DST)) {
      dnnl_primitive_desc_destroy(pd);
      continue;
    }
    out.push_back(pd);
  }
  dnnl_primitive_desc_iterator_destroy(it);
  return out;
}

std::optional<std::string> KeptImpl(const std::string& key) {
  Choices& c = KeptChoices();
  absl::MutexLock lock(&c.mu);
  if (auto it = c.impl_of.find(key); it != c.impl_of.end()) return it->second;
  return std::nullopt;
}

void Keep(const std::string& key, const std::string& impl) {
  Choices& c = KeptChoices();
  absl::MutexLock lock(&c.mu);
  c.impl_of.emplace(key, impl);
}

size_t ChooseIndex(const std::string& key, const std::vector<const dnnl::primitive_desc*>& candidates) {
  Choices& c = KeptChoices();
  Timer timer;
  {
    absl::MutexLock lock(&c.mu);
    if (auto it = c.impl_of.find(key); it != c.impl_of.end()) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (candidates[i]->impl_info_str() == it->second) return i;
      }
      return 0;
    }
    timer = c.timer;
  }
  // Timed outside the lock: two prepares of one problem at once may both
  // time it, and keep the same kind of answer.
  size_t best = 0;
  double best_s = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double give_up = i == 0 ? std::numeric_limits<double>::infinity() : 2 * best_s;
    const std::optional<double> s =
        timer ? timer(candidates[i]->impl_info_str()) : TimeRuns(*candidates[i], give_up);
    if (!s.has_value()) continue;
    const double needed = best_s == std::numeric_limits<double>::infinity() || best != 0 ? 1.0 : kMargin;
    if (*s < best_s * needed) {
      best = i;
      best_s = *s;
    }
  }
  g_problems_timed.fetch_add(1, std::memory_order_relaxed);
  Keep(key, candidates[best]->impl_info_str());
  return best;
}

}  // namespace internal_tactics
}  // namespace grove::cpu
