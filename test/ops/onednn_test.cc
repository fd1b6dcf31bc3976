// The oneDNN path of the CPU backend (lib/backends/cpu/onednn.h) against its
// reference kernels, both run in this process (ScopedOneDnn): Conv over every
// combination of spatial rank, groups (depthwise included), strides,
// dilations, explicit and auto pads and bias, at random shapes; the prepared
// step's weights packed once and its fallback when the invoke sees other
// weights; what oneDNN does not take (f64, empty tensors, the switch off); a
// session end to end; and the caller's OpenMP thread count left alone. MatMul
// over ranks and broadcast batches, Gemm over transposes, C forms, alpha and
// beta.
//
// Tolerance: both paths sum the same K = C/group * taps products (plus the
// bias) in different orders. Any order of a float sum of K terms is within
// gamma_K * sum|x_i w_i| of the exact value (gamma_K = K u / (1 - K u),
// u = 2^-24; Higham, Accuracy and Stability, 3.1), so two results differ by
// at most 2 gamma_K * sum|x_i w_i|. sum|x_i w_i| per output is the reference
// Conv of |X| and |W| (its own rounding is far below the bound's slack), and
// the bias adds one rounding of |y| each side.
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"
#include "test/ops/onednn_isa.h"

extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int num_threads);

namespace grove {
namespace {

using testing::Count;
using testing::MakeTensor;
using testing::RunOp;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Shape = std::vector<int64_t>;

Tensor Random(const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(Count(shape)));
  for (float& x : v) x = dist(rng);
  return MakeTensor<float>(DType::kF32, shape, v);
}

Tensor Abs(const Tensor& t) {
  Tensor out = Tensor::CopyOf(t.view()).value();
  float* p = out.as<float>();
  for (int64_t i = 0; i < out.view().num_elements(); ++i) p[i] = std::fabs(p[i]);
  return out;
}

// Conv through the path `onednn` picks; `made` gets the oneDNN steps its
// prepare made (0 or 1).
absl::StatusOr<Tensor> Conv(bool onednn, const std::vector<const Tensor*>& inputs, const Attrs& attrs,
                            int64_t* made = nullptr) {
  cpu::ScopedOneDnn scope(onednn);
  const int64_t before = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<Tensor>> out = RunOp("Conv", inputs, attrs);
  if (made != nullptr) *made = cpu::OneDnnStepsMade() - before;
  if (!out.ok()) return out.status();
  return std::move((*out)[0]);
}

// Checks `got` against `want` within the bound of the file comment; `abs_sum`
// is sum|x_i w_i| per output, `terms` the K of the sums.
void ExpectWithinSumBound(const Tensor& got, const Tensor& want, const Tensor& abs_sum, int64_t terms,
                          const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const double u = std::ldexp(1.0, -24);
  const double gamma = terms * u / (1 - terms * u);
  const float* g = got.as<float>();
  const float* w = want.as<float>();
  const float* a = abs_sum.as<float>();
  int reported = 0;
  for (int64_t i = 0; i < got.view().num_elements(); ++i) {
    const double bound = 2 * gamma * a[i] + 2 * u * std::fabs(w[i]) + 1e-30;
    if (std::fabs(static_cast<double>(g[i]) - w[i]) > bound && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", the reference " << w[i] << " (bound "
                    << bound << ")";
    }
  }
}

struct ConvCase {
  int spatial = 2;
  int group_kind = 0;  // 0: group 1, 1: group 2, 2: depthwise
  int64_t stride = 1, dilation = 1;
  int pad_kind = 0;    // 0: none, 1: explicit asymmetric, 2: SAME_UPPER, 3: SAME_LOWER, 4: VALID
  bool bias = false;
};

std::string Describe(const ConvCase& c) {
  static const char* kGroups[] = {"group1", "group2", "depthwise"};
  static const char* kPads[] = {"no_pads", "explicit_pads", "SAME_UPPER", "SAME_LOWER", "VALID"};
  return absl::StrCat(c.spatial, "d_", kGroups[c.group_kind], "_stride", c.stride, "_dilation", c.dilation, "_",
                      kPads[c.pad_kind], c.bias ? "_bias" : "");
}

// Compares both paths on a random shape of `c`; returns K (for the report).
void CompareConv(const ConvCase& c, std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t n = pick(1, 3);
  int64_t group = 1, cg = pick(1, 4), mg = pick(1, 5);
  if (c.group_kind == 1) group = 2;
  if (c.group_kind == 2) {
    group = pick(2, 6);
    cg = 1;
    mg = pick(1, 2);  // channel multiplier
  }
  const int64_t max_in = c.spatial == 3 ? 6 : c.spatial == 2 ? 10 : 17;
  Shape x_shape = {n, group * cg}, w_shape = {group * mg, cg};
  std::vector<int64_t> strides, dilations, pads(2 * c.spatial, 0);
  for (int d = 0; d < c.spatial; ++d) {
    const int64_t k = pick(1, 3);
    const int64_t ext = (k - 1) * c.dilation + 1;
    x_shape.push_back(pick(ext, std::max(ext, max_in)));
    w_shape.push_back(k);
    strides.push_back(c.stride);
    dilations.push_back(c.dilation);
    if (c.pad_kind == 1) {
      pads[d] = pick(0, 2);
      pads[c.spatial + d] = pick(0, 2);
    }
  }
  Attrs attrs = {{"strides", strides}, {"dilations", dilations}, {"group", group}};
  if (c.pad_kind <= 1) attrs.push_back({"pads", pads});
  if (c.pad_kind == 2) attrs.push_back({"auto_pad", std::string("SAME_UPPER")});
  if (c.pad_kind == 3) attrs.push_back({"auto_pad", std::string("SAME_LOWER")});
  if (c.pad_kind == 4) attrs.push_back({"auto_pad", std::string("VALID")});
  const Tensor x = Random(x_shape, rng), w = Random(w_shape, rng), b = Random({group * mg}, rng);
  std::vector<const Tensor*> in = {&x, &w};
  if (c.bias) in.push_back(&b);
  const std::string what = absl::StrCat(Describe(c), " X [", absl::StrJoin(x_shape, ","), "] W [",
                                        absl::StrJoin(w_shape, ","), "]");
  int64_t made = 0;
  absl::StatusOr<Tensor> fast = Conv(true, in, attrs, &made);
  ASSERT_TRUE(fast.ok()) << what << ": " << fast.status();
  EXPECT_EQ(made, 1) << what << ": oneDNN did not take it";
  absl::StatusOr<Tensor> ref = Conv(false, in, attrs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status();
  const Tensor ax = Abs(x), aw = Abs(w);
  absl::StatusOr<Tensor> abs_sum = Conv(false, {&ax, &aw}, attrs);
  ASSERT_TRUE(abs_sum.ok()) << abs_sum.status();
  int64_t terms = cg;
  for (int d = 0; d < c.spatial; ++d) terms *= w_shape[2 + d];
  ExpectWithinSumBound(*fast, *ref, *abs_sum, terms + (c.bias ? 1 : 0), what);
}

TEST(OneDnnConvTest, EveryAttributeCombinationMatchesTheReferenceKernel) {
  std::mt19937 rng(20240514);
  int cases = 0;
  for (int spatial = 1; spatial <= 3; ++spatial) {
    for (int group_kind = 0; group_kind < 3; ++group_kind) {
      for (int64_t stride : {1, 2}) {
        for (int64_t dilation : {1, 2}) {
          for (int pad_kind = 0; pad_kind < 5; ++pad_kind) {
            for (bool bias : {false, true}) {
              ConvCase c{spatial, group_kind, stride, dilation, pad_kind, bias};
              // SAME pads need stride-compatible shapes only; any shape works.
              for (int repeat = 0; repeat < 2; ++repeat) CompareConv(c, rng);
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 3 * 2 * 2 * 5 * 2);
}

// The shapes of a small CNN and of a 1x1 convolution, at sizes where oneDNN
// takes its blocked (reordered) layouts.
TEST(OneDnnConvTest, CnnShapesMatchTheReferenceKernel) {
  std::mt19937 rng(7);
  struct Shapes {
    Shape x, w;
    Attrs attrs;
  };
  const std::vector<Shapes> shapes = {
      {{1, 3, 32, 32}, {16, 3, 3, 3}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}},
      {{2, 16, 16, 16}, {32, 16, 3, 3}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}},
      {{1, 32, 8, 8}, {64, 32, 1, 1}, {}},
      {{1, 32, 15, 15}, {32, 1, 3, 3}, {{"group", int64_t{32}}, {"strides", std::vector<int64_t>{2, 2}}}},
      {{1, 24, 9, 9}, {48, 12, 3, 3}, {{"group", int64_t{2}}, {"auto_pad", std::string("SAME_UPPER")}}},
  };
  for (const Shapes& s : shapes) {
    const Tensor x = Random(s.x, rng), w = Random(s.w, rng), b = Random({s.w[0]}, rng);
    int64_t made = 0;
    absl::StatusOr<Tensor> fast = Conv(true, {&x, &w, &b}, s.attrs, &made);
    ASSERT_TRUE(fast.ok()) << fast.status();
    EXPECT_EQ(made, 1);
    absl::StatusOr<Tensor> ref = Conv(false, {&x, &w, &b}, s.attrs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const Tensor ax = Abs(x), aw = Abs(w);
    absl::StatusOr<Tensor> abs_sum = Conv(false, {&ax, &aw}, s.attrs);
    ASSERT_TRUE(abs_sum.ok()) << abs_sum.status();
    ExpectWithinSumBound(*fast, *ref, *abs_sum, s.w[1] * s.w[2] * s.w[3] + 1,
                         absl::StrCat("X [", absl::StrJoin(s.x, ","), "] W [", absl::StrJoin(s.w, ","), "]"));
  }
}

// ConvTranspose through oneDNN's deconvolution against the reference kernel
// (col2im) at random shapes: spatial rank, groups (depthwise included),
// strides, dilations, explicit pads, output_padding, output_shape, auto_pad,
// bias; W is ONNX's [C, M / group, kernel...]. The bound as for Conv, over
// the C / group * taps products an output can sum.
TEST(OneDnnConvTransposeTest, MatchesTheReferenceKernel) {
  std::mt19937 rng(20261205);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int taken = 0, cases = 0;
  for (int spatial = 1; spatial <= 3; ++spatial) {
    for (int group_kind = 0; group_kind < 3; ++group_kind) {
      for (int form = 0; form < 5; ++form) {  // pads, output_padding, output_shape, SAME_UPPER, SAME_LOWER
        for (bool bias : {false, true}) {
          const int64_t n = pick(1, 3);
          int64_t group = group_kind == 0 ? 1 : group_kind == 1 ? 2 : pick(2, 5);
          const int64_t cg = group_kind == 2 ? 1 : pick(1, 4), mg = pick(1, 4);
          Shape x_shape = {n, group * cg}, w_shape = {group * cg, mg};
          Shape strides, dilations, pads(2 * spatial, 0), output_padding, output_shape;
          for (int d = 0; d < spatial; ++d) {
            const int64_t k = pick(1, 3), s = pick(1, 3), dil = pick(1, 2), in = pick(1, spatial == 3 ? 5 : 9);
            x_shape.push_back(in);
            w_shape.push_back(k);
            strides.push_back(s);
            dilations.push_back(dil);
            const int64_t natural = (in - 1) * s + (k - 1) * dil + 1;
            if (form == 0) {
              pads[d] = pick(0, std::min<int64_t>(2, (natural - 1) / 2));
              pads[spatial + d] = pick(0, std::min<int64_t>(2, (natural - 1) / 2));
            }
            output_padding.push_back(pick(0, std::max<int64_t>(s, dil) - 1));
            output_shape.push_back(natural + pick(0, s - 1));
          }
          Attrs attrs = {{"strides", strides}, {"dilations", dilations}, {"group", group}};
          if (form == 0) attrs.push_back({"pads", pads});
          if (form == 1) attrs.push_back({"output_padding", output_padding});
          if (form == 2) attrs.push_back({"output_shape", output_shape});
          if (form == 3) attrs.push_back({"auto_pad", std::string("SAME_UPPER")});
          if (form == 4) attrs.push_back({"auto_pad", std::string("SAME_LOWER")});
          const Tensor x = Random(x_shape, rng), w = Random(w_shape, rng), b = Random({group * mg}, rng);
          std::vector<const Tensor*> in = {&x, &w};
          if (bias) in.push_back(&b);
          const std::string what = absl::StrCat(spatial, "-d, group ", group, ", form ", form, bias ? ", bias" : "",
                                                ": X [", absl::StrJoin(x_shape, ","), "] W [",
                                                absl::StrJoin(w_shape, ","), "]");
          auto run = [&](bool onednn, const std::vector<const Tensor*>& inputs, int64_t* made) {
            cpu::ScopedOneDnn scope(onednn);
            const int64_t before = cpu::OneDnnStepsMade();
            absl::StatusOr<std::vector<Tensor>> out = RunOp("ConvTranspose", inputs, attrs);
            if (made != nullptr) *made = cpu::OneDnnStepsMade() - before;
            return out;
          };
          int64_t made = 0;
          absl::StatusOr<std::vector<Tensor>> fast = run(true, in, &made);
          absl::StatusOr<std::vector<Tensor>> ref = run(false, in, nullptr);
          ASSERT_EQ(fast.ok(), ref.ok()) << what << ": " << fast.status() << " / " << ref.status();
          ++cases;
          if (!ref.ok()) continue;  // an attribute combination ONNX refuses: refused the same way
          taken += made == 1;
          const Tensor ax = Abs(x), aw = Abs(w);
          absl::StatusOr<std::vector<Tensor>> abs_sum = run(false, {&ax, &aw}, nullptr);
          ASSERT_TRUE(abs_sum.ok()) << abs_sum.status();
          int64_t terms = cg;
          for (int d = 0; d < spatial; ++d) terms *= w_shape[2 + d];
          ExpectWithinSumBound((*fast)[0], (*ref)[0], (*abs_sum)[0], terms + (bias ? 1 : 0), what);
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 3 * 5 * 2);
  // Where oneDNN has a JIT kernel (AVX2 and up) it takes nearly all.
  if (::grove::testing::OneDnnHasAvx2()) EXPECT_GE(taken, cases * 3 / 4) << taken << " of " << cases;
}

TEST(OneDnnConvTest, WhatOneDnnDoesNotTakeKeepsTheReferenceKernel) {
  std::mt19937 rng(3);
  const Attrs attrs = {{"pads", std::vector<int64_t>{1, 1}}};
  // f64.
  Tensor x64 = Tensor::Create(DType::kF64, {1, 2, 5}).value();
  Tensor w64 = Tensor::Create(DType::kF64, {3, 2, 3}).value();
  for (int i = 0; i < 10; ++i) x64.as<double>()[i] = 0.5 * i - 2;
  for (int i = 0; i < 18; ++i) w64.as<double>()[i] = 0.25 * (i % 5) - 0.5;
  int64_t made = -1;
  absl::StatusOr<Tensor> y64 = Conv(true, {&x64, &w64}, attrs, &made);
  ASSERT_TRUE(y64.ok()) << y64.status();
  EXPECT_EQ(made, 0);
  // y[0, 0, 0] = sum_c x[c, 0] w[0, c, 1] + x[c, 1] w[0, c, 2] (tap 0 in the pad).
  const double* xp = x64.as<double>();
  const double* wp = w64.as<double>();
  EXPECT_DOUBLE_EQ(y64->as<double>()[0], xp[0] * wp[1] + xp[1] * wp[2] + xp[5] * wp[4] + xp[6] * wp[5]);
  // An empty batch.
  const Tensor x0 = Random({0, 2, 5}, rng), w = Random({3, 2, 3}, rng);
  absl::StatusOr<Tensor> y0 = Conv(true, {&x0, &w}, attrs, &made);
  ASSERT_TRUE(y0.ok()) << y0.status();
  EXPECT_EQ(made, 0);
  EXPECT_EQ(y0->shape(), (Shape{0, 3, 5}));
  // The switch off.
  const Tensor x = Random({1, 2, 5}, rng);
  absl::StatusOr<Tensor> off = Conv(false, {&x, &w}, attrs, &made);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(made, 0);
}

TEST(OneDnnConvTest, ScopedOneDnnRestoresTheSwitch) {
  const bool before = cpu::OneDnnEnabled();
  {
    cpu::ScopedOneDnn off(false);
    EXPECT_FALSE(cpu::OneDnnEnabled());
    {
      cpu::ScopedOneDnn on(true);
      EXPECT_TRUE(cpu::OneDnnEnabled());
    }
    EXPECT_FALSE(cpu::OneDnnEnabled());
  }
  EXPECT_EQ(cpu::OneDnnEnabled(), before);
}

// A Conv step as a plan holds it: prepared once (weights visible, as a
// model's are), then invoked on new pointers.
class PreparedConv {
 public:
  PreparedConv(const Attrs& attrs, const std::vector<const Tensor*>& inputs, const Shape& out_shape,
               bool weights_visible)
      : def_(*runtime::GlobalOpRegistry().Find("Conv")) {
    node_.type = "Conv";
    node_.def = &def_;
    for (auto& [name, value] : attrs) node_.attrs.Set(name, value);
    for (size_t i = 0; i < inputs.size(); ++i) {
      node_.inputs.push_back(static_cast<int>(i));
      in_views_.push_back(inputs[i]->view());
      if (i != 1 || !weights_visible) in_views_.back().data = nullptr;  // what a plan's prepare sees
    }
    node_.outputs.push_back(static_cast<int>(inputs.size()));
    out_ = Tensor::Create(DType::kF32, out_shape).value();
    out_view_ = out_.view();
    out_view_.data = nullptr;
    for (TensorView& v : in_views_) in_ptrs_.push_back(&v);
    out_ptrs_.push_back(&out_view_);
    ctx_ = std::make_unique<ir::KernelContext>(node_, in_ptrs_, out_ptrs_, nullptr);
  }
  ~PreparedConv() { std::free(workspace_); }

  absl::Status Prepare() {
    absl::StatusOr<ir::PreparedKernel> p = def_.prepares[static_cast<int>(ir::Backend::kCpu)](*ctx_);
    if (!p.ok()) return p.status();
    prepared_ = *std::move(p);
    const size_t bytes = (prepared_.workspace_bytes + 63) / 64 * 64;
    if (bytes > 0) {
      workspace_ = std::aligned_alloc(64, bytes);
      std::memset(workspace_, 0xA5, bytes);  // garbage: the invoke must not rely on zeros
    }
    ctx_->SetPrepared(&prepared_, workspace_);
    return absl::OkStatus();
  }

  absl::StatusOr<Tensor> Invoke(const std::vector<const Tensor*>& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) in_views_[i].data = const_cast<void*>(inputs[i]->data());
    out_view_.data = out_.data();
    if (absl::Status s = def_.kernels[static_cast<int>(ir::Backend::kCpu)](*ctx_); !s.ok()) return s;
    return Tensor::CopyOf(out_.view());
  }

 private:
  const ir::OpDef& def_;
  ir::Node node_;
  std::vector<TensorView> in_views_;
  TensorView out_view_;
  std::vector<TensorView*> in_ptrs_, out_ptrs_;
  Tensor out_;
  std::unique_ptr<ir::KernelContext> ctx_;
  ir::PreparedKernel prepared_;
  void* workspace_ = nullptr;
};

// Packed weights serve invokes on the same weight bytes; other weight bytes
// (a caller that changed them, or weights the prepare could not see) are
// reordered per run, and every result is the reference's.
TEST(OneDnnConvTest, PreparedStepPacksTheWeightsOnceAndReordersOthers) {
  std::mt19937 rng(11);
  const Attrs attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{2}}};
  const Tensor w = Random({32, 8, 3, 3}, rng), w2 = Random({32, 8, 3, 3}, rng), b = Random({32}, rng);
  const Tensor x0 = Random({2, 16, 12, 12}, rng);
  for (bool visible : {true, false}) {
    SCOPED_TRACE(visible ? "weights visible at prepare" : "weights computed at run time");
    cpu::ScopedOneDnn on(true);
    const int64_t before = cpu::OneDnnStepsMade();
    PreparedConv step(attrs, {&x0, &w, &b}, {2, 32, 12, 12}, visible);
    ASSERT_TRUE(step.Prepare().ok());
    EXPECT_EQ(cpu::OneDnnStepsMade() - before, 1);
    for (int run = 0; run < 4; ++run) {
      const Tensor x = Random({2, 16, 12, 12}, rng);
      const Tensor& weights = run % 2 == 0 ? w : w2;
      absl::StatusOr<Tensor> got = step.Invoke({&x, &weights, &b});
      ASSERT_TRUE(got.ok()) << got.status();
      absl::StatusOr<Tensor> ref = Conv(false, {&x, &weights, &b}, attrs);
      ASSERT_TRUE(ref.ok()) << ref.status();
      const Tensor ax = Abs(x), aw = Abs(weights);
      absl::StatusOr<Tensor> abs_sum = Conv(false, {&ax, &aw}, attrs);
      ASSERT_TRUE(abs_sum.ok()) << abs_sum.status();
      ExpectWithinSumBound(*got, *ref, *abs_sum, 8 * 9 + 1, absl::StrCat("run ", run));
    }
  }
}

// A small CNN through Session::Run: plans made with oneDNN on and off give
// the same outputs within the bound, on several inputs (plan-cache hits).
TEST(OneDnnConvTest, SessionRunsMatchWithTheSwitchOnAndOff) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto values = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    return v;
  };
  ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddInput("x", DType::kF32, {"batch", 3, 16, 16});
  b.AddWeight("w1", DType::kF32, {8, 3, 3, 3}, values(8 * 3 * 9));
  b.AddWeight("b1", DType::kF32, {8}, values(8));
  b.AddWeight("w2", DType::kF32, {16, 8, 3, 3}, values(16 * 8 * 9));
  b.AddOp("Conv", {"x", "w1", "b1"}, {"c1"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.AddOp("Relu", {"c1"}, {"r1"});
  b.AddOp("MaxPool", {"r1"}, {"p1"},
          {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  b.AddOp("Conv", {"p1", "w2"}, {"y"}, {{"auto_pad", std::string("SAME_UPPER")}});
  b.AddOutput("y");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  ASSERT_TRUE(model.ok()) << model.status();
  // Plans (and the switch's choice) are made at the first run of a shape.
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> fast = Session::Create(*model, options).value();
  std::unique_ptr<Session> ref = Session::Create(*model, options).value();
  for (int64_t batch : {1, 3, 3, 1}) {
    const Tensor x = MakeTensor<float>(DType::kF32, {batch, 3, 16, 16}, values(batch * 3 * 256));
    int64_t made = 0;
    absl::StatusOr<std::vector<TensorView>> y_fast, y_ref;
    {
      cpu::ScopedOneDnn on(true);
      const int64_t before = cpu::OneDnnStepsMade();
      y_fast = fast->Run({x.view()});
      made = cpu::OneDnnStepsMade() - before;
    }
    {
      cpu::ScopedOneDnn off(false);
      y_ref = ref->Run({x.view()});
    }
    ASSERT_TRUE(y_fast.ok()) << y_fast.status();
    ASSERT_TRUE(y_ref.ok()) << y_ref.status();
    EXPECT_LE(made, 3);  // a new plan makes both Conv steps (the first with Relu) and MaxPool; a hit none
    const Tensor got = Tensor::CopyOf((*y_fast)[0]).value();
    const Tensor want = Tensor::CopyOf((*y_ref)[0]).value();
    ASSERT_EQ(got.shape(), (Shape{batch, 16, 8, 8}));
    // Loose here: the second Conv sums 72 products of values that already
    // differ by the first Conv's rounding; |y| stays below ~10.
    for (int64_t i = 0; i < got.view().num_elements(); ++i) {
      ASSERT_NEAR(got.as<float>()[i], want.as<float>()[i], 1e-4) << "batch " << batch << " element " << i;
    }
  }
}

// MatMul over A and B ranks 1 to 4 with broadcast batch dims, against the
// reference kernel (OpenBLAS) within the bound of the file comment.
TEST(OneDnnMatMulTest, RanksAndBroadcastBatchesMatchTheReferenceKernel) {
  std::mt19937 rng(17);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int taken = 0, cases = 0;
  for (int ra = 1; ra <= 4; ++ra) {
    for (int rb = 1; rb <= 4; ++rb) {
      for (int repeat = 0; repeat < 3; ++repeat) {
        const int64_t m = pick(1, 9), k = pick(1, 40), n = pick(1, 9);
        const int batch_rank = std::max(ra, rb) - 2;
        Shape batch;
        for (int d = 0; d < batch_rank; ++d) batch.push_back(pick(1, 3));
        auto batch_of = [&](int rank) {
          Shape s(batch.end() - std::max(rank - 2, 0), batch.end());
          for (int64_t& d : s) {
            if (pick(0, 2) == 0) d = 1;  // broadcast
          }
          return s;
        };
        Shape a_shape = batch_of(ra), b_shape = batch_of(rb);
        if (ra == 1) a_shape = {k};
        else a_shape.insert(a_shape.end(), {m, k});
        if (rb == 1) b_shape = {k};
        else b_shape.insert(b_shape.end(), {k, n});
        const Tensor a = Random(a_shape, rng), b = Random(b_shape, rng);
        const std::string what = absl::StrCat("A [", absl::StrJoin(a_shape, ","), "] B [", absl::StrJoin(b_shape, ","), "]");
        absl::StatusOr<std::vector<Tensor>> fast, ref, abs_sum;
        int64_t made = 0;
        {
          cpu::ScopedOneDnn on(true);
          const int64_t before = cpu::OneDnnStepsMade();
          fast = RunOp("MatMul", {&a, &b});
          made = cpu::OneDnnStepsMade() - before;
        }
        {
          cpu::ScopedOneDnn off(false);
          ref = RunOp("MatMul", {&a, &b});
          const Tensor aa = Abs(a), ab = Abs(b);
          abs_sum = RunOp("MatMul", {&aa, &ab});
        }
        ASSERT_TRUE(fast.ok()) << what << ": " << fast.status();
        ASSERT_TRUE(ref.ok()) << what << ": " << ref.status();
        ASSERT_TRUE(abs_sum.ok()) << abs_sum.status();
        taken += made == 1;
        ++cases;
        ExpectWithinSumBound((*fast)[0], (*ref)[0], (*abs_sum)[0], k, what);
      }
    }
  }
  // Every case is one oneDNN takes (its matmul broadcasts batch dims).
  EXPECT_EQ(taken, cases);
}

// Gemm over transA x transB x C's broadcast forms x alpha x beta ([N] and
// [1, N] with beta 1: oneDNN's bias post-op instead of C broadcast into Y).
TEST(OneDnnMatMulTest, GemmAttributesAndCMatchTheReferenceKernel) {
  std::mt19937 rng(19);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int64_t trans_a : {0, 1}) {
    for (int64_t trans_b : {0, 1}) {
      for (int c_form = 0; c_form < 6; ++c_form) {  // none, scalar, [N], [M, 1], [M, N], [1, N]
        for (double alpha : {1.0, 0.5}) {
          for (double beta : {1.0, 2.0, 0.0}) {
            const int64_t m = pick(1, 12), k = pick(1, 50), n = pick(1, 12);
            const Tensor a = Random(trans_a ? Shape{k, m} : Shape{m, k}, rng);
            const Tensor b = Random(trans_b ? Shape{n, k} : Shape{k, n}, rng);
            const Shape c_shapes[] = {{}, {}, {n}, {m, 1}, {m, n}, {1, n}};
            const Tensor c = Random(c_shapes[c_form], rng);
            const Attrs attrs = {{"transA", trans_a}, {"transB", trans_b}, {"alpha", alpha}, {"beta", beta}};
            const Attrs abs_attrs = {{"transA", trans_a}, {"transB", trans_b}, {"alpha", std::fabs(alpha)},
                                     {"beta", std::fabs(beta)}};
            std::vector<const Tensor*> in = {&a, &b};
            if (c_form > 0) in.push_back(&c);
            const std::string what = absl::StrCat("transA ", trans_a, " transB ", trans_b, " C form ", c_form,
                                                  " alpha ", alpha, " beta ", beta, " M ", m, " K ", k, " N ", n);
            absl::StatusOr<std::vector<Tensor>> fast, ref, abs_sum;
            int64_t made = 0;
            {
              cpu::ScopedOneDnn on(true);
              const int64_t before = cpu::OneDnnStepsMade();
              fast = RunOp("Gemm", in, attrs);
              made = cpu::OneDnnStepsMade() - before;
            }
            const Tensor aa = Abs(a), ab = Abs(b), ac = Abs(c);
            {
              cpu::ScopedOneDnn off(false);
              ref = RunOp("Gemm", in, attrs);
              std::vector<const Tensor*> abs_in = {&aa, &ab};
              if (c_form > 0) abs_in.push_back(&ac);
              abs_sum = RunOp("Gemm", abs_in, abs_attrs);
            }
            ASSERT_TRUE(fast.ok()) << what << ": " << fast.status();
            ASSERT_TRUE(ref.ok()) << what << ": " << ref.status();
            ASSERT_TRUE(abs_sum.ok()) << abs_sum.status();
            EXPECT_EQ(made, 1) << what;
            // alpha * sum (K terms) + beta * c: three more roundings.
            ExpectWithinSumBound((*fast)[0], (*ref)[0], (*abs_sum)[0], k + 3, what);
          }
        }
      }
    }
  }
}

int ThreadsOfThisProcess() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// oneDNN runs on the calling thread only, and the caller's OpenMP thread
// count is what it was.
TEST(OneDnnConvTest, RunsOnOneThreadAndLeavesTheOpenMpThreadCount) {
  std::mt19937 rng(13);
  const Tensor x = Random({4, 32, 32, 32}, rng), w = Random({32, 32, 3, 3}, rng);
  const Attrs attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  omp_set_num_threads(4);
  const int threads = ThreadsOfThisProcess();
  int64_t made = 0;
  absl::StatusOr<Tensor> y = Conv(true, {&x, &w}, attrs, &made);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(made, 1);
  EXPECT_EQ(omp_get_max_threads(), 4);
  EXPECT_EQ(ThreadsOfThisProcess(), threads) << "oneDNN started threads of its own";
  omp_set_num_threads(1);
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// A Conv's weight is reordered into the primitive's layout once per model:
// sessions (and their plans, at any batch) over one model share the packed
// copy while one of them lives; another model's bytes get their own.
TEST(OneDnnConvTest, SessionsShareTheWeightsPackedOncePerModel) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(16 * 8 * 9);
  for (float& v : w) v = dist(rng);
  auto make_model = [&] {
    ModelBuilder b;
    b.AddSymbol("batch", 1, 8);
    b.AddInput("x", DType::kF32, {"batch", 8, 16, 16});
    b.AddWeight("w", DType::kF32, {16, 8, 3, 3}, w);
    b.AddOp("Conv", {"x", "w"}, {"y"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    b.AddOutput("y");
    return Model::LoadFromBuffer(b.Finish().value()).value();
  };
  std::shared_ptr<const Model> model = make_model();
  cpu::ScopedOneDnn on(true);
  SessionOptions options;
  options.device = Device::kCpu;
  std::vector<float> xv(3 * 8 * 256);
  for (float& v : xv) v = dist(rng);
  const Tensor x1 = MakeTensor<float>(DType::kF32, {1, 8, 16, 16}, std::vector<float>(xv.begin(), xv.begin() + 2048));
  const Tensor x3 = MakeTensor<float>(DType::kF32, {3, 8, 16, 16}, xv);
  auto run = [](Session& s, const Tensor& x) { return Tensor::CopyOf(s.Run({x.view()}).value()[0]).value(); };

  int64_t before = cpu::OneDnnWeightsPacked();
  auto first = Session::Create(model, options).value();
  const Tensor y_first = run(*first, x1);
  const int64_t packed = cpu::OneDnnWeightsPacked() - before;
  if (packed == 0) GTEST_SKIP() << "oneDNN keeps this weight in grove's layout on this CPU: nothing to pack";
  EXPECT_EQ(packed, 1);

  before = cpu::OneDnnWeightsPacked();
  auto second = Session::Create(model, options).value();
  const Tensor y_second = run(*second, x1);
  run(*second, x3);  // another plan of the same model
  EXPECT_EQ(cpu::OneDnnWeightsPacked() - before, 0) << "a second session or plan packed the weight again";
  ASSERT_EQ(y_first.view().num_elements(), y_second.view().num_elements());
  for (int64_t i = 0; i < y_first.view().num_elements(); ++i) {
    ASSERT_EQ(y_first.as<float>()[i], y_second.as<float>()[i]) << i;
  }

  // Another model's weight (same values, other bytes) is its own.
  std::shared_ptr<const Model> other = make_model();
  before = cpu::OneDnnWeightsPacked();
  auto third = Session::Create(other, options).value();
  run(*third, x1);
  EXPECT_EQ(cpu::OneDnnWeightsPacked() - before, 1);

  // Once no session holds it, the next one packs it again.
  first.reset();
  second.reset();
  before = cpu::OneDnnWeightsPacked();
  auto fourth = Session::Create(model, options).value();
  const Tensor y_fourth = run(*fourth, x1);
  EXPECT_EQ(cpu::OneDnnWeightsPacked() - before, 1);
  for (int64_t i = 0; i < y_first.view().num_elements(); ++i) {
    ASSERT_EQ(y_first.as<float>()[i], y_fourth.as<float>()[i]) << i;
  }
}

}  // namespace
}  // namespace grove
