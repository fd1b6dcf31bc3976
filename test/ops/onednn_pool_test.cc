// MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool through oneDNN
// (lib/backends/cpu/onednn.h) against the reference kernels, both run in
// this process (cpu::ScopedOneDnn): 1-3 spatial dims x kernel x stride x
// dilation x explicit, SAME and VALID pads x ceil_mode x count_include_pad
// at random shapes, batch 1 and 2; then what oneDNN must not take (Indices,
// f64, empty tensors, windows wholly in the padding, count_include_pad
// windows past the end padding) and gets the reference kernel's result for.
//
// Tolerance: MaxPool and GlobalMaxPool pick one input element, so both paths
// are equal. AveragePool sums at most K = kernel_size inputs in float
// (oneDNN) or double (the reference) and divides by the same count: any
// order of a float sum of K terms is within gamma_K * sum|x_i| of the exact
// value (gamma_K = K u / (1 - K u), u = 2^-24), so with |x| <= 1 the means
// differ by at most gamma_K plus a rounding of the result each side.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/onednn.h"
#include "test/op_test_util.h"

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

// `type` through the path `onednn` picks; `made` gets the oneDNN steps its
// prepare made.
absl::StatusOr<std::vector<Tensor>> Pool(bool onednn, const std::string& type, const Tensor& x, const Attrs& attrs,
                                         int64_t* made = nullptr, int num_outputs = 1) {
  cpu::ScopedOneDnn scope(onednn);
  const int64_t before = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<Tensor>> out = RunOp(type, {&x}, attrs, num_outputs);
  if (made != nullptr) *made = cpu::OneDnnStepsMade() - before;
  return out;
}

// Equal for max pools; within gamma_K (+ a rounding of each result) for
// averages of at most K terms of |x| <= 1.
void ExpectClose(const Tensor& got, const Tensor& want, int64_t terms, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const double u = std::ldexp(1.0, -24);
  const double gamma = terms * u / (1 - terms * u);
  const float* g = got.as<float>();
  const float* w = want.as<float>();
  int reported = 0;
  for (int64_t i = 0; i < got.view().num_elements(); ++i) {
    const double bound = terms == 0 ? 0.0 : gamma + 2 * u * std::fabs(w[i]);
    if (!(std::fabs(static_cast<double>(g[i]) - w[i]) <= bound) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", the reference " << w[i] << " (bound " << bound
                    << ")";
    }
  }
}

struct PoolCase {
  bool max = true;
  int spatial = 2;
  int64_t stride = 1, dilation = 1;
  int pad_kind = 0;  // 0: none, 1: explicit asymmetric, 2: SAME_UPPER, 3: SAME_LOWER, 4: VALID
  bool ceil_mode = false;
  bool count_include_pad = false;
};

std::string Describe(const PoolCase& c) {
  static const char* kPads[] = {"no_pads", "explicit_pads", "SAME_UPPER", "SAME_LOWER", "VALID"};
  return absl::StrCat(c.max ? "MaxPool_" : "AveragePool_", c.spatial, "d_stride", c.stride, "_dilation", c.dilation,
                      "_", kPads[c.pad_kind], c.ceil_mode ? "_ceil" : "", c.count_include_pad ? "_count_pad" : "");
}

// Compares both paths on a random shape of `c`; true when oneDNN took it.
bool ComparePool(const PoolCase& c, std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Shape x_shape = {pick(1, 2), pick(1, 5)};
  std::vector<int64_t> kernel, strides, dilations, pads(2 * c.spatial, 0);
  const int64_t max_in = c.spatial == 3 ? 7 : c.spatial == 2 ? 11 : 19;
  int64_t kernel_size = 1;
  for (int d = 0; d < c.spatial; ++d) {
    const int64_t k = pick(1, 3);
    const int64_t ext = (k - 1) * c.dilation + 1;
    x_shape.push_back(pick(ext, std::max(ext, max_in)));
    kernel.push_back(k);
    kernel_size *= k;
    strides.push_back(c.stride);
    dilations.push_back(c.dilation);
    if (c.pad_kind == 1) {
      pads[d] = pick(0, k - 1);
      pads[c.spatial + d] = pick(0, k - 1);
    }
  }
  Attrs attrs = {{"kernel_shape", kernel}, {"strides", strides}, {"dilations", dilations}};
  if (c.pad_kind <= 1) attrs.push_back({"pads", pads});
  if (c.pad_kind == 2) attrs.push_back({"auto_pad", std::string("SAME_UPPER")});
  if (c.pad_kind == 3) attrs.push_back({"auto_pad", std::string("SAME_LOWER")});
  if (c.pad_kind == 4) attrs.push_back({"auto_pad", std::string("VALID")});
  if (c.ceil_mode) attrs.push_back({"ceil_mode", int64_t{1}});
  if (!c.max) attrs.push_back({"count_include_pad", int64_t{c.count_include_pad ? 1 : 0}});
  const std::string type = c.max ? "MaxPool" : "AveragePool";
  const Tensor x = Random(x_shape, rng);
  const std::string what = absl::StrCat(Describe(c), " X [", absl::StrJoin(x_shape, ","), "] kernel [",
                                        absl::StrJoin(kernel, ","), "] pads [", absl::StrJoin(pads, ","), "]");
  int64_t made = 0;
  absl::StatusOr<std::vector<Tensor>> fast = Pool(true, type, x, attrs, &made);
  absl::StatusOr<std::vector<Tensor>> ref = Pool(false, type, x, attrs);
  EXPECT_EQ(fast.ok(), ref.ok()) << what << ": " << fast.status() << " / " << ref.status();
  if (!fast.ok() || !ref.ok()) return false;
  ExpectClose((*fast)[0], (*ref)[0], c.max ? 0 : kernel_size, what);
  // Without ceil_mode and with pads below the kernel every window holds an
  // input element and stays within the pads: oneDNN takes all of them but
  // the dilated ones (oneDNN 2.6 has only its reference implementation for
  // those, which it is not given).
  if (!c.ceil_mode && c.dilation == 1) {
    EXPECT_EQ(made, 1) << what << ": oneDNN did not take it";
  }
  return made == 1;
}

TEST(OneDnnPoolTest, EveryAttributeCombinationMatchesTheReferenceKernel) {
  std::mt19937 rng(20261202);
  int cases = 0, taken = 0, ceil_taken = 0;
  for (bool max : {true, false}) {
    for (int spatial = 1; spatial <= 3; ++spatial) {
      for (int64_t stride : {1, 2, 3}) {
        for (int64_t dilation : {1, 2}) {
          for (int pad_kind = 0; pad_kind < 5; ++pad_kind) {
            for (bool ceil_mode : {false, true}) {
              for (bool count_pad : {false, true}) {
                if (max && count_pad) continue;
                const PoolCase c{max, spatial, stride, dilation, pad_kind, ceil_mode, count_pad};
                for (int repeat = 0; repeat < 2; ++repeat) {
                  const bool t = ComparePool(c, rng);
                  taken += t;
                  ceil_taken += t && ceil_mode;
                  ++cases;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 2 * (3 * 3 * 2 * 5 * 2) * 3);
  // ceil_mode windows oneDNN serves with a larger end padding.
  EXPECT_GT(ceil_taken, 50);
  EXPECT_GT(taken, cases / 3);
}

// The CNN's MaxPool 2x2 stride 2 and larger planes with a 3x3 stride 2 window
// and pads (ResNet's stem), at batch 1 and 8.
TEST(OneDnnPoolTest, CnnShapesMatchTheReferenceKernel) {
  std::mt19937 rng(9);
  struct Case {
    std::string type;
    Shape x;
    Attrs attrs;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {1, 16, 64, 64}, {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}}},
      {"MaxPool", {8, 64, 8, 8}, {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}}},
      {"MaxPool",
       {1, 64, 56, 56},
       {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"pads", Shape{1, 1, 1, 1}}}},
      {"AveragePool",
       {2, 32, 28, 28},
       {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{1, 1}}, {"pads", Shape{1, 1, 1, 1}},
        {"count_include_pad", int64_t{1}}}},
      {"AveragePool",
       {1, 8, 17, 17},
       {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"ceil_mode", int64_t{1}}}},
  };
  for (const Case& c : cases) {
    const Tensor x = Random(c.x, rng);
    const std::string what = absl::StrCat(c.type, " X [", absl::StrJoin(c.x, ","), "]");
    int64_t made = 0;
    absl::StatusOr<std::vector<Tensor>> fast = Pool(true, c.type, x, c.attrs, &made);
    ASSERT_TRUE(fast.ok()) << what << ": " << fast.status();
    EXPECT_EQ(made, 1) << what;
    absl::StatusOr<std::vector<Tensor>> ref = Pool(false, c.type, x, c.attrs);
    ASSERT_TRUE(ref.ok()) << what << ": " << ref.status();
    ExpectClose((*fast)[0], (*ref)[0], c.type == "MaxPool" ? 0 : 9, what);
  }
}

TEST(OneDnnPoolTest, GlobalPoolsMatchTheReferenceKernel) {
  std::mt19937 rng(13);
  for (const Shape& shape : {Shape{1, 3, 17}, Shape{2, 16, 8, 8}, Shape{1, 64, 4, 4}, Shape{2, 5, 3, 4, 6},
                             Shape{1, 1, 1, 1}, Shape{3, 7, 33, 1}}) {
    const Tensor x = Random(shape, rng);
    int64_t size = 1;
    for (size_t d = 2; d < shape.size(); ++d) size *= shape[d];
    for (const std::string type : {"GlobalMaxPool", "GlobalAveragePool"}) {
      const std::string what = absl::StrCat(type, " X [", absl::StrJoin(shape, ","), "]");
      int64_t made = 0;
      absl::StatusOr<std::vector<Tensor>> fast = Pool(true, type, x, {}, &made);
      ASSERT_TRUE(fast.ok()) << what << ": " << fast.status();
      EXPECT_EQ(made, 1) << what;
      absl::StatusOr<std::vector<Tensor>> ref = Pool(false, type, x, {});
      ASSERT_TRUE(ref.ok()) << what << ": " << ref.status();
      ExpectClose((*fast)[0], (*ref)[0], type == "GlobalMaxPool" ? 0 : size, what);
    }
  }
}

TEST(OneDnnPoolTest, WhatOneDnnDoesNotTakeKeepsTheReferenceKernel) {
  std::mt19937 rng(4);
  const Attrs k2s2 = {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}};
  const Tensor x = Random({1, 2, 6, 6}, rng);
  int64_t made = -1;
  // MaxPool's Indices.
  absl::StatusOr<std::vector<Tensor>> with_indices = Pool(true, "MaxPool", x, k2s2, &made, 2);
  ASSERT_TRUE(with_indices.ok()) << with_indices.status();
  EXPECT_EQ(made, 0);
  absl::StatusOr<std::vector<Tensor>> plain = Pool(true, "MaxPool", x, k2s2, &made);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(made, 1);
  ExpectClose((*with_indices)[0], (*plain)[0], 0, "MaxPool with Indices");
  // f64.
  Tensor x64 = Tensor::Create(DType::kF64, {1, 1, 4}).value();
  for (int i = 0; i < 4; ++i) x64.as<double>()[i] = 0.5 * i - 1;
  absl::StatusOr<std::vector<Tensor>> y64 =
      Pool(true, "MaxPool", x64, {{"kernel_shape", Shape{2}}, {"strides", Shape{2}}}, &made);
  ASSERT_TRUE(y64.ok()) << y64.status();
  EXPECT_EQ(made, 0);
  EXPECT_EQ(testing::Values<double>((*y64)[0]), (std::vector<double>{-0.5, 0.5}));
  // Empty batch and no channels.
  for (const Shape& shape : {Shape{0, 2, 6, 6}, Shape{1, 0, 6, 6}}) {
    const Tensor empty = Random(shape, rng);
    for (const std::string type : {"MaxPool", "AveragePool", "GlobalAveragePool"}) {
      absl::StatusOr<std::vector<Tensor>> y =
          Pool(true, type, empty, type == "GlobalAveragePool" ? Attrs{} : k2s2, &made);
      ASSERT_TRUE(y.ok()) << type << ": " << y.status();
      EXPECT_EQ(made, 0) << type;
      EXPECT_EQ((*y)[0].view().num_elements(), 0) << type;
    }
  }
  // count_include_pad with a ceil_mode window past the end padding: ONNX
  // divides the last window by its one tap, oneDNN would by 2.
  const Tensor x5 = MakeTensor<float>(DType::kF32, {1, 1, 5}, {1, 2, 3, 4, 5});
  const Attrs ceil_count = {{"kernel_shape", Shape{2}},
                            {"strides", Shape{2}},
                            {"ceil_mode", int64_t{1}},
                            {"count_include_pad", int64_t{1}}};
  absl::StatusOr<std::vector<Tensor>> avg = Pool(true, "AveragePool", x5, ceil_count, &made);
  ASSERT_TRUE(avg.ok()) << avg.status();
  EXPECT_EQ(made, 0);
  EXPECT_EQ(testing::Values<float>((*avg)[0]), (std::vector<float>{1.5f, 3.5f, 5.0f}));
  // Without count_include_pad the same window is oneDNN's, with the same
  // result.
  const Attrs ceil_exclude = {{"kernel_shape", Shape{2}}, {"strides", Shape{2}}, {"ceil_mode", int64_t{1}}};
  avg = Pool(true, "AveragePool", x5, ceil_exclude, &made);
  ASSERT_TRUE(avg.ok()) << avg.status();
  EXPECT_EQ(made, 1);
  EXPECT_EQ(testing::Values<float>((*avg)[0]), (std::vector<float>{1.5f, 3.5f, 5.0f}));
  // The switch off.
  absl::StatusOr<std::vector<Tensor>> off = Pool(false, "MaxPool", x, k2s2, &made);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(made, 0);
}

// A window wholly in the padding has no element: the reference kernel gives
// MaxPool's lowest value and AveragePool's 0 there, and keeps the step.
TEST(OneDnnPoolTest, WindowsWhollyInThePaddingKeepTheReferenceKernel) {
  const Tensor x = MakeTensor<float>(DType::kF32, {1, 1, 3}, {1, -2, 3});
  // Kernel 2 with a begin pad of 2: the first window covers -2 and -1.
  const Attrs pad2 = {{"kernel_shape", Shape{2}}, {"pads", Shape{2, 0}}};
  // Dilation 3 over length 1 with pads 1 and 3: the one window taps -1 and 2.
  const Tensor x1 = MakeTensor<float>(DType::kF32, {1, 1, 1}, {4});
  const Attrs dilated = {{"kernel_shape", Shape{2}}, {"dilations", Shape{3}}, {"pads", Shape{1, 3}}};
  for (const std::string type : {"MaxPool", "AveragePool"}) {
    for (const auto& [input, attrs] : {std::pair{&x, &pad2}, std::pair{&x1, &dilated}}) {
      int64_t made = -1;
      absl::StatusOr<std::vector<Tensor>> fast = Pool(true, type, *input, *attrs, &made);
      ASSERT_TRUE(fast.ok()) << type << ": " << fast.status();
      absl::StatusOr<std::vector<Tensor>> ref = Pool(false, type, *input, *attrs);
      ASSERT_TRUE(ref.ok()) << type << ": " << ref.status();
      EXPECT_EQ(made, 0) << type;
      ExpectClose((*fast)[0], (*ref)[0], 0, type);
      const float empty_window = type == "MaxPool" ? std::numeric_limits<float>::lowest() : 0.0f;
      EXPECT_EQ(testing::Values<float>((*fast)[0])[0], empty_window) << type;
    }
  }
}

}  // namespace
}  // namespace grove
