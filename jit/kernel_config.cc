// Kernel variants as values: configs, problems, GPU traits, and the
// registered families with their spaces, generic variants and cost terms.
//
// The cost model (after DietCode): for a variant on a problem,
//   occupancy  resident threads / the GPU's thread slots, where a block's
//              residency per SM is bounded by threads, blocks, registers and
//              shared memory per SM, and a grid smaller than one wave fills
//              only part of the GPU;
//   waste      the share of launched lane-iterations that do no useful work
//              (lanes past a row's end, threads past the last item, tiles
//              past M/N/K);
//   bytes      DRAM bytes the kernel moves; flops its arithmetic;
//   estimate_us = launch_us + max(bytes / bandwidth, flops / peak)
//                 / (min(1, 2 * occupancy) * (1 - waste)).
// Memory-bound kernels reach the bandwidth at about half occupancy, hence
// min(1, 2 * occupancy). Numbers are relative: they rank variants of one
// family for one problem; the measured table (jit/dispatch_table.h) wins
// where it has an entry.
#include "jit/kernel_config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "jit/kernels/attention_params.h"

namespace grove::jit {

// ---------------------------------------------------------------------------
// KernelConfig, KernelProblem
// ---------------------------------------------------------------------------

int KernelConfig::Get(absl::string_view name, int fallback) const {
  for (const auto& [n, v] : params) {
    if (n == name) return v;
  }
  return fallback;
}

std::string KernelConfig::Name() const {
  std::vector<std::string> types;
  for (DType t : dtypes) types.emplace_back(DTypeName(t));
  std::string out = absl::StrCat(family, "__", absl::StrJoin(types, "_"));
  if (!params.empty()) absl::StrAppend(&out, "__", ParamsName(params));
  return out;
}

namespace {

bool IsLowerAlnum(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<KernelConfig> KernelConfig::Parse(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("kernel config '", name, "': ", why,
                                                   " (expected FAMILY__DTYPES[__PARAMS], e.g. "
                                                   "softmax__f32__lanes32_threads256)"));
  };
  const std::vector<absl::string_view> parts = absl::StrSplit(name, "__");
  if (parts.size() < 2 || parts.size() > 3) return bad("not two or three parts separated by '__'");
  KernelConfig c;
  if (!IsLowerAlnum(absl::StrReplaceAll(parts[0], {{"_", ""}}))) return bad("bad family name");
  const KernelFamily* family = FindKernelFamily(parts[0]);
  if (family == nullptr) return bad(absl::StrCat("unknown family '", parts[0], "'"));
  c.family = std::string(parts[0]);
  if (parts[1].empty()) return bad("no dtypes");
  for (absl::string_view t : absl::StrSplit(parts[1], '_')) {
    absl::StatusOr<DType> d = ParseDType(t);
    if (!d.ok()) return bad(absl::StrCat("unknown dtype '", t, "'"));
    c.dtypes.push_back(*d);
  }
  if (parts.size() == 3) {
    if (parts[2].empty()) return bad("empty parameter list");
    for (absl::string_view p : absl::StrSplit(parts[2], '_')) {
      size_t digits = 0;
      while (digits < p.size() && absl::ascii_isdigit(p[p.size() - 1 - digits])) ++digits;
      const absl::string_view pname = p.substr(0, p.size() - digits), pvalue = p.substr(p.size() - digits);
      if (pname.empty() || !IsLowerAlnum(pname)) return bad(absl::StrCat("bad parameter '", p, "'"));
      int value = 0;
      if (pvalue.empty() || !absl::SimpleAtoi(pvalue, &value) || value < 0) {
        return bad(absl::StrCat("parameter '", p, "' has no value"));
      }
      if (!c.params.empty() && c.params.back().first >= pname) {
        return bad(absl::StrCat("parameters not sorted by name, or repeated, at '", p, "'"));
      }
      c.params.emplace_back(std::string(pname), value);
    }
  }
  if (!family->InSpace(c)) {
    return bad(absl::StrCat("not in the variant space of family ", family->name(), " for these dtypes"));
  }
  return c;
}

int64_t KernelProblem::Dim(absl::string_view name, int64_t fallback) const {
  for (const auto& [n, v] : dims) {
    if (n == name) return v;
  }
  return fallback;
}

std::string KernelProblem::ToString() const {
  std::vector<std::string> parts;
  for (const auto& [n, v] : dims) parts.push_back(absl::StrCat(n, "=", v));
  return absl::StrJoin(parts, ",");
}

// ---------------------------------------------------------------------------
// GpuTraits
// ---------------------------------------------------------------------------

GpuTraits GpuTraits::FromArch(int arch) {
  GpuTraits g;  // sm_90: H100 SXM / H200 (the defaults)
  if (arch >= 90) {
    g.arch = arch;
    return g;
  }
  if (arch >= 89) {  // L40S
    g.sms = 142;
    g.max_threads_per_sm = 1536;
    g.max_blocks_per_sm = 24;
    g.shared_bytes_per_sm = 100 * 1024;
    g.dram_gbs = 864;
    g.fp32_tflops = 91.6;
  } else if (arch >= 86) {  // A10
    g.sms = 72;
    g.max_threads_per_sm = 1536;
    g.max_blocks_per_sm = 16;
    g.shared_bytes_per_sm = 100 * 1024;
    g.dram_gbs = 600;
    g.fp32_tflops = 31.2;
  } else {  // sm_80 (A100 40 GB SXM), and older archs get its numbers
    g.sms = 108;
    g.max_threads_per_sm = 2048;
    g.max_blocks_per_sm = 32;
    g.shared_bytes_per_sm = 164 * 1024;
    g.dram_gbs = 1555;
    g.fp32_tflops = 19.5;
  }
  g.regs_per_sm = 65536;
  g.arch = arch;
  return g;
}

// ---------------------------------------------------------------------------
// KernelFamily
// ---------------------------------------------------------------------------

bool KernelFamily::InSpace(const KernelConfig& config) const {
  if (config.family != name()) return false;
  bool dtypes_ok = false;
  for (const std::vector<DType>& l : dtype_lists()) dtypes_ok |= l == config.dtypes;
  if (!dtypes_ok) return false;
  std::vector<ParamSpace> sp = space();
  std::sort(sp.begin(), sp.end(), [](const ParamSpace& a, const ParamSpace& b) { return a.name < b.name; });
  if (config.params.size() != sp.size()) return false;
  for (size_t i = 0; i < sp.size(); ++i) {  // both sorted by name
    if (config.params[i].first != sp[i].name) return false;
    if (std::find(sp[i].values.begin(), sp[i].values.end(), config.params[i].second) == sp[i].values.end()) {
      return false;
    }
  }
  return Consistent(config);
}

std::vector<KernelConfig> KernelFamily::Enumerate(absl::Span<const DType> dtypes) const {
  std::vector<ParamSpace> sp = space();
  std::sort(sp.begin(), sp.end(), [](const ParamSpace& a, const ParamSpace& b) { return a.name < b.name; });
  std::vector<KernelConfig> out;
  KernelConfig c{std::string(name()), std::vector<DType>(dtypes.begin(), dtypes.end()), {}};
  for (const ParamSpace& p : sp) c.params.emplace_back(p.name, 0);
  std::vector<size_t> at(sp.size(), 0);
  for (const ParamSpace& p : sp) {
    if (p.values.empty()) return out;
  }
  while (true) {
    for (size_t i = 0; i < sp.size(); ++i) c.params[i].second = sp[i].values[at[i]];
    if (InSpace(c)) out.push_back(c);
    size_t i = sp.size();
    while (i > 0) {
      --i;
      if (++at[i] < sp[i].values.size()) break;
      at[i] = 0;
      if (i == 0) return out;
    }
    if (sp.empty()) return out;
  }
}

ModuleSpec ConfigModule(const KernelConfig& config) {
  ModuleSpec m;
  const KernelFamily* f = FindKernelFamily(config.family);
  m.file = f != nullptr ? std::string(f->file()) : config.family;
  m.types = config.dtypes;
  m.params = config.params;
  return m;
}

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

constexpr int64_t kMaxBlocks = 65535;

// Resident share of the GPU's thread slots for `blocks` blocks of `block`
// threads using `regs` registers per thread and `shared` bytes per block.
double Occupancy(int64_t blocks, int block, int regs, int64_t shared, const GpuTraits& gpu) {
  if (blocks <= 0 || block <= 0) return 1.0 / (gpu.sms * 64.0);
  int64_t per_sm = std::min<int64_t>(gpu.max_threads_per_sm / block, gpu.max_blocks_per_sm);
  per_sm = std::min<int64_t>(per_sm, gpu.regs_per_sm / std::max<int64_t>(1, int64_t{regs} * block));
  if (shared > 0) per_sm = std::min<int64_t>(per_sm, gpu.shared_bytes_per_sm / shared);
  per_sm = std::max<int64_t>(per_sm, 1);
  const double resident = static_cast<double>(std::min<int64_t>(blocks, per_sm * gpu.sms)) * block;
  const double slots = static_cast<double>(gpu.sms) * gpu.max_threads_per_sm;
  return std::clamp(resident / slots, 1.0 / (gpu.sms * 64.0), 1.0);
}

double Estimate(const CostTerms& t, const GpuTraits& gpu) {
  const double mem_us = t.bytes / (gpu.dram_gbs * 1e3);
  const double flop_us = t.flops / (gpu.fp32_tflops * 1e6);
  const double eff = std::min(1.0, 2 * t.occupancy) * std::max(1e-6, 1 - t.waste);
  return gpu.launch_us + std::max(mem_us, flop_us) / eff;
}

const std::vector<int> kThreads = {64, 128, 256, 512, 1024};

// ---------------------------------------------------------------------------
// Row families: softmax, norm (LayerNorm/InstanceNorm rows), reduce.
// ---------------------------------------------------------------------------
// A problem has `rows` work items (rows, or output elements) of `n`
// elements each; `inner` > 1 when a row's elements are strided (only a
// thread per item then). Parameters: threads (the block) and lanes per
// item: 1 (a thread), 32 (a warp) or the whole block (lanes == threads).
// The kernel reads lanes as its row mode (0, 1, 2 of launch_util.h).
class RowFamily : public KernelFamily {
 public:
  struct Spec {
    const char* name;
    std::vector<std::vector<DType>> dtypes;
    double reads;         // passes over the input
    double flops_per_el;  // arithmetic per element
  };
  explicit RowFamily(Spec spec) : spec_(std::move(spec)) {}
  absl::string_view name() const override { return spec_.name; }
  std::vector<std::vector<DType>> dtype_lists() const override { return spec_.dtypes; }
  std::vector<ParamSpace> space() const override {
    return {{"lanes", {1, 32, 64, 128, 256, 512, 1024}}, {"threads", kThreads}};
  }
  bool Consistent(const KernelConfig& c) const override {
    const int lanes = c.Get("lanes", 0), threads = c.Get("threads", 0);
    return lanes == 1 || lanes == 32 || lanes == threads;
  }
  bool Valid(const KernelConfig& c, const KernelProblem& p) const override {
    if (!InSpace(c) || c.dtypes != p.dtypes) return false;
    return c.Get("lanes", 1) == 1 || p.Dim("inner", 1) == 1;
  }
  KernelConfig Generic(const KernelProblem& p) const override {
    // launch_util.h: RowMode(n) for contiguous rows, else a thread each;
    // kRowThreads (256) threads a block.
    const int64_t n = p.Dim("n"), inner = p.Dim("inner", 1);
    int lanes = 1;
    if (inner == 1 && n > 8) lanes = n > 512 ? 256 : 32;
    return KernelConfig{spec_.name, p.dtypes, {{"lanes", lanes}, {"threads", 256}}};
  }
  LaunchShape Launch(const KernelConfig& c, const KernelProblem& p) const override {
    const int threads = c.Get("threads", 256), lanes = c.Get("lanes", 1);
    const int64_t work = std::max<int64_t>(1, p.Dim("rows")) * lanes;
    return LaunchShape{std::clamp<int64_t>(CeilDiv(work, threads), 1, kMaxBlocks), threads};
  }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    CostTerms t;
    const int lanes = c.Get("lanes", 1);
    const int64_t rows = std::max<int64_t>(1, p.Dim("rows")), n = std::max<int64_t>(1, p.Dim("n"));
    const LaunchShape l = Launch(c, p);
    const int64_t launched = l.blocks * l.threads;  // lanes in flight
    const int64_t waves = CeilDiv(rows * lanes, launched);
    const double slots = static_cast<double>(waves) * launched * CeilDiv(n, lanes);
    t.waste = 1 - static_cast<double>(rows) * n / slots;
    t.occupancy = Occupancy(l.blocks, l.threads, 32, lanes > 32 ? 32 * 8 : 0, gpu);
    const double el = p.dtypes.empty() ? 4 : static_cast<double>(DTypeSize(p.dtypes[0]));
    t.bytes = el * rows * n * (spec_.reads + 1);
    t.flops = spec_.flops_per_el * rows * n;
    t.estimate_us = Estimate(t, gpu);
    return t;
  }

 private:
  Spec spec_;
};

// ---------------------------------------------------------------------------
// Grid-stride element loops (ew, cast): threads a block; each thread runs
// ipt items (parameter "ipt", 1 where the family has none) or one vector of
// vec elements (parameter "vec") per trip.
// ---------------------------------------------------------------------------

// The element types of the elementwise kernels (kernels.cmake's ALL_TYPES).
constexpr DType kEwDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                               DType::kI32, DType::kI8,  DType::kU8,  DType::kBool};

// Enough blocks for one trip over the problem's `n`.
LaunchShape GridStrideLaunch(const KernelConfig& c, const KernelProblem& p) {
  const int64_t n = std::max<int64_t>(1, p.Dim("n"));
  const int64_t per_thread = int64_t{c.Get("ipt", 1)} * c.Get("vec", 1);
  const int threads = c.Get("threads", 256);
  return LaunchShape{std::clamp<int64_t>(CeilDiv(n, threads * per_thread), 1, kMaxBlocks), threads};
}

// The terms of such a loop over `n` elements moving `bytes` for `flops`.
CostTerms GridStrideCost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu, double bytes,
                         double flops) {
  CostTerms t;
  const int64_t n = std::max<int64_t>(1, p.Dim("n"));
  const int ipt = c.Get("ipt", 1), vec = c.Get("vec", 1);
  const LaunchShape l = GridStrideLaunch(c, p);
  const int64_t per_trip = l.blocks * l.threads * ipt * vec;
  t.waste = 1 - static_cast<double>(n) / (static_cast<double>(CeilDiv(n, per_trip)) * per_trip);
  // Items in flight per thread hide latency as more resident threads
  // would; a vector brings its elements in one access, so it counts a
  // little more than as many separate items (fewer instructions issued).
  const double in_flight = ipt * (vec > 1 ? vec * 1.25 : 1.0);
  t.occupancy = std::min(1.0, Occupancy(l.blocks, l.threads, 24 + 8 * ipt + 4 * vec, 0, gpu) * std::sqrt(in_flight));
  t.bytes = bytes;
  t.flops = flops;
  t.estimate_us = Estimate(t, gpu);
  return t;
}

// ---------------------------------------------------------------------------
// Elementwise (jit/kernels/elementwise.cuh): ew and ew_chain.
// ---------------------------------------------------------------------------
// A problem: `n` elements, `inputs` operands read, `ops` operations each,
// and `vec`, the widest vector its layout and op allow (1: none; 4 when no
// operand is strided and the op is same-typed, elementwise.cuh's vector
// path). Parameters: threads (the block); ipt, the items a thread runs per
// trip of its grid-stride loop; vec, the elements it moves per access (one
// aligned vector load per operand; where the pointers at run time are not
// aligned the kernel runs its scalar loop on the same grid). A thread runs
// ipt items or one vector a trip, not both (vec > 1 only with ipt 1).
// Generic: 256 threads, one item (the geometry before variants).
class EwFamily : public KernelFamily {
 public:
  absl::string_view name() const override { return "ew"; }
  absl::string_view file() const override { return "elementwise"; }
  std::vector<std::vector<DType>> dtype_lists() const override {
    std::vector<std::vector<DType>> out;
    for (DType t : kEwDTypes) out.push_back({t});
    return out;
  }
  std::vector<ParamSpace> space() const override {
    return {{"ipt", {1, 2, 4, 8}}, {"threads", kThreads}, {"vec", {1, 2, 4}}};
  }
  bool Consistent(const KernelConfig& c) const override { return c.Get("vec", 1) == 1 || c.Get("ipt", 1) == 1; }
  bool Valid(const KernelConfig& c, const KernelProblem& p) const override {
    return InSpace(c) && c.dtypes == p.dtypes && c.Get("vec", 1) <= p.Dim("vec", 1);
  }
  KernelConfig Generic(const KernelProblem& p) const override {
    return KernelConfig{"ew", p.dtypes, {{"ipt", 1}, {"threads", 256}, {"vec", 1}}};
  }
  LaunchShape Launch(const KernelConfig& c, const KernelProblem& p) const override { return GridStrideLaunch(c, p); }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    const int64_t n = std::max<int64_t>(1, p.Dim("n"));
    const double el = p.dtypes.empty() ? 4 : static_cast<double>(DTypeSize(p.dtypes[0]));
    return GridStrideCost(c, p, gpu, el * n * (std::max<int64_t>(1, p.Dim("inputs", 1)) + 1),
                          static_cast<double>(n) * std::max<int64_t>(1, p.Dim("ops", 1)));
  }
};

// ---------------------------------------------------------------------------
// Cast (jit/kernels/cast.cuh): every (from, to) pair of the elementwise
// dtypes.
// ---------------------------------------------------------------------------
// A problem: `n` contiguous elements. Parameters: threads (the block) and
// vec, the elements a thread converts per access (one aligned vector read
// of the source, one write of the result; where either pointer is not
// aligned at run time the kernel runs its scalar loop on the same grid).
// Generic: 256 threads, one element (the geometry before variants).
class CastFamily : public KernelFamily {
 public:
  absl::string_view name() const override { return "cast"; }
  std::vector<std::vector<DType>> dtype_lists() const override {
    std::vector<std::vector<DType>> out;
    for (DType from : kEwDTypes) {
      for (DType to : kEwDTypes) out.push_back({from, to});
    }
    return out;
  }
  std::vector<ParamSpace> space() const override { return {{"threads", kThreads}, {"vec", {1, 2, 4}}}; }
  bool Valid(const KernelConfig& c, const KernelProblem& p) const override {
    return InSpace(c) && c.dtypes == p.dtypes;
  }
  KernelConfig Generic(const KernelProblem& p) const override {
    return KernelConfig{"cast", p.dtypes, {{"threads", 256}, {"vec", 1}}};
  }
  LaunchShape Launch(const KernelConfig& c, const KernelProblem& p) const override { return GridStrideLaunch(c, p); }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    const int64_t n = std::max<int64_t>(1, p.Dim("n"));
    double bytes = 0;
    for (DType t : p.dtypes) bytes += static_cast<double>(DTypeSize(t)) * n;
    return GridStrideCost(c, p, gpu, bytes, static_cast<double>(n));
  }
};

// ---------------------------------------------------------------------------
// Small-M GEMM / GEMV (jit/kernels/gemv.cuh)
// ---------------------------------------------------------------------------
// A problem: m (<= 64), n, k, batch, transb (1: B is [N, K]). Parameters:
// threads (the block), ksplit (threads sharing one column's K, summed in
// shared memory) and mtile (rows of A a thread accumulates per pass over
// B). A block covers threads / ksplit columns.
class GemvFamily : public KernelFamily {
 public:
  absl::string_view name() const override { return "gemv"; }
  std::vector<std::vector<DType>> dtype_lists() const override {
    return {{DType::kF32}, {DType::kF16}, {DType::kBF16}};
  }
  std::vector<ParamSpace> space() const override {
    return {{"ksplit", {1, 2, 4, 8, 16, 32}}, {"mtile", {1, 2, 4, 8}}, {"threads", {64, 128, 256}}};
  }
  bool Valid(const KernelConfig& c, const KernelProblem& p) const override {
    if (!InSpace(c) || c.dtypes != p.dtypes) return false;
    const int64_t m = p.Dim("m");
    return m >= 1 && m <= kGemvMaxM && p.Dim("n") >= 1 && p.Dim("k") >= 1;
  }
  KernelConfig Generic(const KernelProblem& p) const override {
    const int64_t m = p.Dim("m", 1);
    int mtile = 1;
    while (mtile < 8 && mtile < m) mtile *= 2;
    const int ksplit = p.Dim("transb") != 0 ? 32 : (p.Dim("k") >= 1024 ? 4 : 1);
    return KernelConfig{"gemv", p.dtypes, {{"ksplit", ksplit}, {"mtile", mtile}, {"threads", 128}}};
  }
  LaunchShape Launch(const KernelConfig& c, const KernelProblem& p) const override {
    const int threads = c.Get("threads", 128), ksplit = c.Get("ksplit", 1);
    const int64_t cols = std::max(1, threads / ksplit);
    const int64_t blocks = std::max<int64_t>(1, p.Dim("batch", 1)) * CeilDiv(std::max<int64_t>(1, p.Dim("n")), cols);
    return LaunchShape{std::clamp<int64_t>(blocks, 1, kMaxBlocks), threads};
  }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    CostTerms t;
    const int threads = c.Get("threads", 128), ksplit = c.Get("ksplit", 1), mtile = c.Get("mtile", 1);
    const int64_t m = std::max<int64_t>(1, p.Dim("m")), n = std::max<int64_t>(1, p.Dim("n")),
                  k = std::max<int64_t>(1, p.Dim("k")), batch = std::max<int64_t>(1, p.Dim("batch", 1));
    const bool transb = p.Dim("transb") != 0;
    const int64_t cols = std::max(1, threads / ksplit);
    const LaunchShape l = Launch(c, p);
    const double padded = static_cast<double>(CeilDiv(m, mtile) * mtile) * (CeilDiv(n, cols) * cols) *
                          (CeilDiv(k, ksplit) * ksplit);
    t.waste = 1 - static_cast<double>(m) * n * k / padded;
    t.occupancy = Occupancy(l.blocks, l.threads, 32 + 2 * mtile, int64_t{4} * threads * mtile, gpu);
    const double el = p.dtypes.empty() ? 4 : static_cast<double>(DTypeSize(p.dtypes[0]));
    // B is read once per pass of mtile rows; a warp's reads coalesce over
    // runs of `cols` (B [K, N]) or `ksplit` (B [N, K]) elements.
    const double run_bytes = el * (transb ? ksplit : cols);
    const double coalesce = std::min(1.0, run_bytes / 32.0);
    t.bytes = el * batch * (static_cast<double>(k) * n * CeilDiv(m, mtile) / coalesce + double(m) * k + double(m) * n);
    t.flops = 2.0 * batch * m * n * k;
    t.estimate_us = Estimate(t, gpu);
    return t;
  }
};

// ---------------------------------------------------------------------------
// Tiled transpose (jit/kernels/copy.cuh's transpose_tile)
// ---------------------------------------------------------------------------
// A problem: dst [batch, rows, cols] whose rows are contiguous in src (a
// strided copy that moves a contiguous dim inward). Dtypes by element width
// (u8, f16, i32, i64). Parameters: tile (TILE x TILE elements through
// shared memory) and rows (thread rows: a block is tile x rows threads,
// each moving tile / rows elements of a column, then of a row).
class TransposeFamily : public KernelFamily {
 public:
  absl::string_view name() const override { return "transpose"; }
  absl::string_view file() const override { return "copy"; }
  std::vector<std::vector<DType>> dtype_lists() const override {
    return {{DType::kU8}, {DType::kF16}, {DType::kI32}, {DType::kI64}};
  }
  std::vector<ParamSpace> space() const override { return {{"rows", {4, 8}}, {"tile", {16, 32}}}; }
  bool Valid(const KernelConfig& c, const KernelProblem& p) const override {
    return InSpace(c) && c.dtypes == p.dtypes;
  }
  KernelConfig Generic(const KernelProblem& p) const override {
    return KernelConfig{"transpose", p.dtypes, {{"rows", 8}, {"tile", 32}}};
  }
  LaunchShape Launch(const KernelConfig& c, const KernelProblem& p) const override {
    const int tile = c.Get("tile", 32);
    const int64_t tiles = std::max<int64_t>(1, p.Dim("batch", 1)) * CeilDiv(std::max<int64_t>(1, p.Dim("rows")), tile) *
                          CeilDiv(std::max<int64_t>(1, p.Dim("cols")), tile);
    return LaunchShape{std::clamp<int64_t>(tiles, 1, kMaxBlocks), tile * c.Get("rows", 8)};
  }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    CostTerms t;
    const int tile = c.Get("tile", 32);
    const int64_t batch = std::max<int64_t>(1, p.Dim("batch", 1)), rows = std::max<int64_t>(1, p.Dim("rows")),
                  cols = std::max<int64_t>(1, p.Dim("cols"));
    const double el = p.dtypes.empty() ? 4 : static_cast<double>(DTypeSize(p.dtypes[0]));
    const LaunchShape l = Launch(c, p);
    // Tiles past the edges move nothing.
    const double padded = static_cast<double>(batch) * (CeilDiv(rows, tile) * tile) * (CeilDiv(cols, tile) * tile);
    t.waste = 1 - static_cast<double>(batch) * rows * cols / padded;
    // A tile's row is one transaction of tile * el bytes: short rows of
    // narrow elements use part of each 32-byte sector.
    const double sector = std::min(1.0, tile * el / 32.0);
    t.occupancy = Occupancy(l.blocks, l.threads, 24, static_cast<int64_t>(tile * (tile + 1) * el), gpu) *
                  std::sqrt(static_cast<double>(tile) / c.Get("rows", 8) / 4.0);
    t.occupancy = std::clamp(t.occupancy, 1.0 / (gpu.sms * 64.0), 1.0);
    t.bytes = 2.0 * el * batch * rows * cols / sector;
    t.flops = static_cast<double>(batch) * rows * cols;
    t.estimate_us = Estimate(t, gpu);
    return t;
  }
};

// ---------------------------------------------------------------------------
// Tiled GEMM of bucketed plans (jit/kernels/gemm_tiled.cuh)
// ---------------------------------------------------------------------------
// A problem: m, n, k, batch (every one read by the kernel at run time, so
// any variant runs any problem) and transa, transb. Parameters: tm x tn,
// the tile of C a block computes; tk, the K step staged through shared
// memory; rm x rn, a thread's patch of C; threads, the block: (tm / rm) *
// (tn / rn), from 64 to 256. Generic: 32 x 32 tiles, K steps of 16, 4 x 4
// a thread (64 threads: the kernel before variants).
//
// Terms: waste, the padding of partial tiles (M, N and K rounded up to
// whole tiles and steps); bytes, op(A) read once per column of tiles and
// op(B) once per row of tiles, C written once; flops, 2 m n k, issued at
// the share of a thread's instructions that are multiply-adds (rm rn of
// rm rn + rm + rn: each k step loads rm + rn operands from shared memory);
// occupancy by block, registers (24 + the patch and its operands) and
// shared memory (two staged slices of f32).
class GemmTiledFamily : public KernelFamily {
 public:
  absl::string_view name() const override { return "gemm_tiled"; }
  std::vector<std::vector<DType>> dtype_lists() const override {
    return {{DType::kF32}, {DType::kF16}, {DType::kBF16}};
  }
  std::vector<ParamSpace> space() const override {
    return {{"rm", {2, 4}}, {"rn", {2, 4}},         {"threads", {64, 128, 256}},
            {"tk", {8, 16}}, {"tm", {16, 32, 64}}, {"tn", {16, 32, 64}}};
  }
  bool Consistent(const KernelConfig& c) const override {
    return c.Get("threads", 0) == (c.Get("tm", 0) / c.Get("rm", 1)) * (c.Get("tn", 0) / c.Get("rn", 1));
  }
  bool Valid(const KernelConfig& c, const KernelProblem& p) const override {
    return InSpace(c) && c.dtypes == p.dtypes;
  }
  KernelConfig Generic(const KernelProblem& p) const override {
    return KernelConfig{
        "gemm_tiled", p.dtypes, {{"rm", 4}, {"rn", 4}, {"threads", 64}, {"tk", 16}, {"tm", 32}, {"tn", 32}}};
  }
  LaunchShape Launch(const KernelConfig& c, const KernelProblem& p) const override {
    const int64_t tiles = std::max<int64_t>(1, p.Dim("batch", 1)) *
                          CeilDiv(std::max<int64_t>(1, p.Dim("m")), c.Get("tm", 32)) *
                          CeilDiv(std::max<int64_t>(1, p.Dim("n")), c.Get("tn", 32));
    return LaunchShape{std::clamp<int64_t>(tiles, 1, kMaxBlocks), c.Get("threads", 64)};
  }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    CostTerms t;
    const int tm = c.Get("tm", 32), tn = c.Get("tn", 32), tk = c.Get("tk", 16);
    const int rm = c.Get("rm", 4), rn = c.Get("rn", 4);
    const int64_t m = std::max<int64_t>(1, p.Dim("m")), n = std::max<int64_t>(1, p.Dim("n")),
                  k = std::max<int64_t>(1, p.Dim("k")), batch = std::max<int64_t>(1, p.Dim("batch", 1));
    const int64_t tiles_m = CeilDiv(m, tm), tiles_n = CeilDiv(n, tn);
    const double padded = static_cast<double>(tiles_m * tm) * (tiles_n * tn) * (CeilDiv(k, tk) * tk);
    t.waste = 1 - static_cast<double>(m) * n * k / padded;
    const LaunchShape l = Launch(c, p);
    t.occupancy = Occupancy(l.blocks, l.threads, 24 + rm * rn + rm + rn, int64_t{4} * tk * (tm + tn + 2), gpu);
    const double el = p.dtypes.empty() ? 4 : static_cast<double>(DTypeSize(p.dtypes[0]));
    const double a_reads = static_cast<double>(m) * k * tiles_n, b_reads = static_cast<double>(k) * n * tiles_m;
    t.bytes = el * batch * (a_reads + b_reads + static_cast<double>(m) * n);
    t.flops = 2.0 * batch * m * n * k;
    const double fma_share = static_cast<double>(rm * rn) / (rm * rn + rm + rn);
    CostTerms issued = t;
    issued.flops = t.flops / fma_share;
    t.estimate_us = Estimate(issued, gpu);
    return t;
  }
};

// ---------------------------------------------------------------------------
// Tiled fused attention (jit/kernels/attention.cuh, with parameters)
// ---------------------------------------------------------------------------
// A problem: heads (b0 x b1), sq, sk, d, dv (sq and sk read by the kernel
// at run time). Parameters: bq query rows and bk keys a tile, hd the
// largest head size (d and dv) the variant holds, 128 threads; the pairs
// that fit 48 KiB of static shared memory and 168 registers a thread
// (three blocks an SM): 64 keys by 64, 32 or 16 query rows for hd 64, 32
// keys by 32 or 16 rows for hd 128 (fewer rows: more blocks, for short
// sequences). Without parameters the file is the warp-per-row kernel,
// which serves d or dv above 128 and decode shapes (the CUDA prepare's
// choice, outside this family). Generic: the smallest hd that holds the
// head.
//
// Terms: waste, the padding of partial tiles and of V's row up to hd (the
// scores sum over d only); bytes, Q read and O written once, K and V once per query tile; flops,
// 2 sq sk (d + dv) per head, issued at the share of a thread's
// instructions that are multiply-adds (each k of a patch loads its row and
// column operands from shared memory); occupancy by block, registers and
// shared memory.
constexpr int kAttentionRegisters = 168;

// The terms both tiled attention kernels share (this family's and
// attention_mma's): waste over tiles of bq rows by bk keys whose products
// run over `padded_heads` columns (d + hd here: the scores sum over d only;
// 2 hd on tensor cores, whose k steps cover hd), bytes of `element_bytes`
// elements, flops.
CostTerms TiledAttentionTerms(const KernelProblem& p, int bq, int bk, double padded_heads, double element_bytes) {
  CostTerms t;
  const int64_t heads = std::max<int64_t>(1, p.Dim("heads", 1)), sq = std::max<int64_t>(1, p.Dim("sq")),
                sk = std::max<int64_t>(1, p.Dim("sk")), d = std::max<int64_t>(1, p.Dim("d")),
                dv = std::max<int64_t>(1, p.Dim("dv"));
  const int64_t qtiles = CeilDiv(sq, bq);
  const double padded = static_cast<double>(qtiles * bq) * (CeilDiv(sk, bk) * bk) * padded_heads;
  t.waste = 1 - static_cast<double>(sq) * sk * (d + dv) / padded;
  t.bytes = element_bytes * heads *
            (static_cast<double>(sq) * (d + dv) + static_cast<double>(qtiles) * sk * (d + dv));
  t.flops = 2.0 * heads * sq * sk * (d + dv);
  return t;
}

class AttentionFamily : public KernelFamily {
 public:
  absl::string_view name() const override { return "attention"; }
  std::vector<std::vector<DType>> dtype_lists() const override {
    return {{DType::kF32}, {DType::kF16}, {DType::kBF16}};
  }
  std::vector<ParamSpace> space() const override {
    return {{"bk", {32, 64}}, {"bq", {16, 32, 64}}, {"hd", {64, 128}}, {"threads", {128}}};
  }
  bool Consistent(const KernelConfig& c) const override {
    const int bk = c.Get("bk", 0), bq = c.Get("bq", 0), hd = c.Get("hd", 0);
    return (hd == 64 && bk == 64) || (hd == 128 && bk == 32 && bq <= 32);
  }
  bool Valid(const KernelConfig& c, const KernelProblem& p) const override {
    return InSpace(c) && c.dtypes == p.dtypes && p.Dim("d") <= c.Get("hd", 0) && p.Dim("dv") <= c.Get("hd", 0);
  }
  KernelConfig Generic(const KernelProblem& p) const override {
    const bool small = p.Dim("d") <= 64 && p.Dim("dv") <= 64;
    return KernelConfig{"attention", p.dtypes,
                        {{"bk", small ? 64 : 32}, {"bq", small ? 64 : 32}, {"hd", small ? 64 : 128}, {"threads", 128}}};
  }
  LaunchShape Launch(const KernelConfig& c, const KernelProblem& p) const override {
    const int64_t tiles = std::max<int64_t>(1, p.Dim("heads", 1)) * CeilDiv(std::max<int64_t>(1, p.Dim("sq")), c.Get("bq", 64));
    return LaunchShape{std::clamp<int64_t>(tiles, 1, kMaxBlocks), 128};
  }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    const int bq = c.Get("bq", 64), bk = c.Get("bk", 64), hd = c.Get("hd", 64);
    const double el = p.dtypes.empty() ? 4 : static_cast<double>(DTypeSize(p.dtypes[0]));
    CostTerms t =
        TiledAttentionTerms(p, bq, bk, static_cast<double>(std::max<int64_t>(1, p.Dim("d"))) + hd, el);
    const LaunchShape l = Launch(c, p);
    // 168 registers: ptxas's count for every variant, compiled for three
    // blocks an SM. Shared: Q's tile and the larger of K's (padded) and V's.
    const int64_t shared = int64_t{4} * (hd * (bq + 1) + std::max(hd * (bk + 1), bk * hd));
    t.occupancy = Occupancy(l.blocks, l.threads, kAttentionRegisters, shared, gpu);
    const int rq = bq / 16, rk = bk / 8;
    const double fma_share = static_cast<double>(rq * rk) / (rq * rk + rq + rk);
    CostTerms issued = t;
    issued.flops = t.flops / fma_share;
    t.estimate_us = Estimate(issued, gpu);
    return t;
  }
};

// ---------------------------------------------------------------------------
// Fused attention on tensor cores (jit/kernels/attention_mma.cuh)
// ---------------------------------------------------------------------------
// The problem of "attention" for f16 and bf16 on sm_80 and later. Parameters:
// 64 query rows a block (16 a warp), 64 keys a tile, hd 64 or 128 (Q's tile
// and one of K's or V's, 16-bit, padded: 18 or 34 KiB of shared memory),
// 128 threads. Generic: the smaller hd that holds the head.
//
// Terms as the tiled kernel's, the multiply-adds issued on tensor cores:
// kTensorCoreSpeedup times the f32 rate (an H100's dense f16 rate is ~15x
// its f32 FMA rate; a quarter of that left for the staging, the softmax and
// mma.sync's issue), and nothing below sm_80 (no m16n8k16: the kernel there
// is the shuffled emulation, never picked).
constexpr double kTensorCoreSpeedup = 4;

// Valid and Launch as the tiled kernel's (bq 64).
class AttentionMmaFamily : public AttentionFamily {
 public:
  absl::string_view name() const override { return "attention_mma"; }
  std::vector<std::vector<DType>> dtype_lists() const override { return {{DType::kF16}, {DType::kBF16}}; }
  std::vector<ParamSpace> space() const override {
    return {{"bk", {64}}, {"bq", {64}}, {"hd", {64, 128}}, {"threads", {128}}};
  }
  bool Consistent(const KernelConfig&) const override { return true; }
  KernelConfig Generic(const KernelProblem& p) const override {
    const bool small = p.Dim("d") <= 64 && p.Dim("dv") <= 64;
    return KernelConfig{"attention_mma", p.dtypes, {{"bk", 64}, {"bq", 64}, {"hd", small ? 64 : 128}, {"threads", 128}}};
  }
  CostTerms Cost(const KernelConfig& c, const KernelProblem& p, const GpuTraits& gpu) const override {
    const int hd = c.Get("hd", 64);
    CostTerms t = TiledAttentionTerms(p, 64, 64, 2.0 * hd, 2);
    const LaunchShape l = Launch(c, p);
    // Q's tile and K's and V's (one tile of both where three would pass
    // 48 KB), 16-bit rows of hd + 8.
    const int kv_tiles = hd == 64 ? grove_k::AttnMmaKvTiles<64, 64, 64>::value : grove_k::AttnMmaKvTiles<64, 64, 128>::value;
    const int64_t shared = int64_t{2} * (64 + kv_tiles * 64) * (hd + 8);
    // ptxas's registers at sm_90 (200 for hd 64, 236 for hd 128): two
    // blocks an SM either way.
    t.occupancy = Occupancy(l.blocks, l.threads, hd == 64 ? 200 : 236, shared, gpu);
    CostTerms issued = t;
    issued.flops = gpu.arch >= 80 ? t.flops / kTensorCoreSpeedup : t.flops * 16;
    t.estimate_us = Estimate(issued, gpu);
    return t;
  }
};

const std::vector<const KernelFamily*>& Registry() {
  static const std::vector<const KernelFamily*>* const families = [] {
    const std::vector<DType> f32{DType::kF32}, f64{DType::kF64}, f16{DType::kF16}, bf16{DType::kBF16};
    auto* v = new std::vector<const KernelFamily*>;
    v->push_back(new RowFamily({"softmax", {f32, f64, f16, bf16}, 2, 5}));
    v->push_back(new RowFamily({"norm", {f32, f64, f16, bf16}, 2, 8}));
    v->push_back(new RowFamily({"reduce",
                                {f32, f64, f16, bf16, {DType::kI64}, {DType::kI32}, {DType::kI8}, {DType::kU8}},
                                1, 1}));
    v->push_back(new EwFamily());
    v->push_back(new CastFamily());
    v->push_back(new GemvFamily());
    v->push_back(new TransposeFamily());
    v->push_back(new GemmTiledFamily());
    v->push_back(new AttentionFamily());
    v->push_back(new AttentionMmaFamily());
    return v;
  }();
  return *families;
}

}  // namespace

const KernelFamily* FindKernelFamily(absl::string_view name) {
  for (const KernelFamily* f : Registry()) {
    if (f->name() == name) return f;
  }
  return nullptr;
}

absl::Span<const KernelFamily* const> KernelFamilies() { return Registry(); }

double GemmLibraryEstimateUs(const KernelProblem& p, const GpuTraits& gpu) {
  const double m = std::max<int64_t>(1, p.Dim("m")), n = std::max<int64_t>(1, p.Dim("n")),
               k = std::max<int64_t>(1, p.Dim("k")), batch = std::max<int64_t>(1, p.Dim("batch", 1));
  const double el = p.dtypes.empty() ? 4 : static_cast<double>(DTypeSize(p.dtypes[0]));
  CostTerms t;
  t.bytes = el * batch * (m * k + k * n + m * n);
  // Its smallest tiles are 64 rows: a smaller M computes padding. Halves
  // run on tensor cores (taken as 8x the f32 peak).
  t.flops = 2.0 * batch * std::max(m, 64.0) * n * k / (el < 4 ? 8 : 1);
  t.occupancy = 1;
  return Estimate(t, gpu);
}

}  // namespace grove::jit
