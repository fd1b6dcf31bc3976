// Choosing among oneDNN's implementations by timing (lib/backends/cpu/
// onednn_tactics.h): with a fake clock, which candidates are timed, which one
// is kept (the fastest, oneDNN's first unless another beats it by the
// margin), that a problem is timed once per process, what is never timed
// (timing off, a large problem), and a Conv through the chosen implementation
// against the reference kernel.
#include "lib/backends/cpu/onednn_tactics.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/onednn.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Shape = std::vector<int64_t>;

// A fake clock: records the implementations it is asked about; each takes
// `seconds(i)` for the i-th asked (0-based) of the problem being timed.
class FakeClock {
 public:
  explicit FakeClock(std::function<std::optional<double>(size_t)> seconds) : seconds_(std::move(seconds)) {
    cpu::SetOneDnnTimerForTest([this](const std::string& impl) {
      asked_.push_back(impl);
      return seconds_(asked_.size() - 1 - first_of_problem_);
    });
  }
  ~FakeClock() { cpu::SetOneDnnTimerForTest(nullptr); }
  // The next implementations asked about belong to a new problem.
  void NextProblem() { first_of_problem_ = asked_.size(); }
  const std::vector<std::string>& asked() const { return asked_; }

 private:
  std::function<std::optional<double>(size_t)> seconds_;
  std::vector<std::string> asked_;
  size_t first_of_problem_ = 0;
};

class OneDnnTactics : public ::testing::Test {
 protected:
  void SetUp() override {
    was_enabled_ = cpu::OneDnnTimingEnabled();
    cpu::SetOneDnnTimingEnabled(true);
    cpu::ForgetOneDnnChoicesForTest();
  }
  void TearDown() override {
    cpu::SetOneDnnTimingEnabled(was_enabled_);
    cpu::ForgetOneDnnChoicesForTest();
  }

 private:
  bool was_enabled_ = true;
};

// A channels-last 3x3 Conv ([n, c, h, h] -> m channels, pad 1), the
// descriptor a grove step makes for one; `group` > 1: grouped.
dnnl::convolution_forward::primitive_desc ConvPd(int64_t n, int64_t c, int64_t m, int64_t h, int64_t group = 1) {
  const memory::dims src = {n, c, h, h}, dst = {n, m, h, h};
  const memory::dims weights =
      group == 1 ? memory::dims{m, c, 3, 3} : memory::dims{group, m / group, c / group, 3, 3};
  const auto f32 = memory::data_type::f32;
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, memory::desc(src, f32, tag::nhwc),
      memory::desc(weights, f32, tag::any), memory::desc({m}, f32, tag::a), memory::desc(dst, f32, tag::nhwc),
      {1, 1}, {1, 1}, {1, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::convolution_forward::primitive_desc(desc, attr, dnnl::engine(dnnl::engine::kind::cpu, 0));
}

TEST_F(OneDnnTactics, KeepsTheFastestOnceAProblemAndOnlyInterchangeableOnes) {
  // The last candidate asked is the fastest.
  FakeClock clock([](size_t i) { return 1.0 / static_cast<double>(i + 1); });
  dnnl::convolution_forward::primitive_desc pd = ConvPd(4, 16, 32, 16);
  const std::string first = pd.impl_info_str();
  const memory::desc src = pd.src_desc(), dst = pd.dst_desc();
  const int64_t timed = cpu::OneDnnProblemsTimed();
  cpu::ChooseFastestImpl(pd, 4.0 * 32 * 256 * 16 * 9, "conv 3x3 pad 1");
  if (clock.asked().size() < 2) GTEST_SKIP() << "oneDNN has one implementation here (" << first << ")";
  EXPECT_EQ(clock.asked().front(), first);
  EXPECT_LE(clock.asked().size(), static_cast<size_t>(cpu::kMaxTimedImpls));
  for (const std::string& impl : clock.asked()) {
    EXPECT_FALSE(absl::StartsWith(impl, "ref:")) << impl;
    EXPECT_FALSE(absl::StrContains(impl, "gemm")) << impl;
  }
  EXPECT_EQ(pd.impl_info_str(), clock.asked().back());
  EXPECT_EQ(pd.src_desc(), src);  // the step's layouts stay
  EXPECT_EQ(pd.dst_desc(), dst);
  EXPECT_EQ(cpu::OneDnnProblemsTimed(), timed + 1);

  // The same problem again: the kept choice, nothing timed.
  const size_t asked = clock.asked().size();
  dnnl::convolution_forward::primitive_desc again = ConvPd(4, 16, 32, 16);
  cpu::ChooseFastestImpl(again, 4.0 * 32 * 256 * 16 * 9, "conv 3x3 pad 1");
  EXPECT_EQ(clock.asked().size(), asked);
  EXPECT_EQ(again.impl_info_str(), clock.asked().back());
  EXPECT_EQ(cpu::OneDnnProblemsTimed(), timed + 1);

  // What the descriptors do not say makes another problem.
  clock.NextProblem();
  dnnl::convolution_forward::primitive_desc other = ConvPd(4, 16, 32, 16);
  cpu::ChooseFastestImpl(other, 4.0 * 32 * 256 * 16 * 9, "conv 3x3 pad 1 (another)");
  EXPECT_EQ(clock.asked().size(), 2 * asked);
  EXPECT_EQ(cpu::OneDnnProblemsTimed(), timed + 2);
}

TEST_F(OneDnnTactics, OneDnnsFirstStaysUnlessBeatenByTheMargin) {
  // 2% faster is noise: oneDNN's order stands.
  {
    FakeClock clock([](size_t i) { return i == 0 ? 1.0 : 0.98; });
    dnnl::convolution_forward::primitive_desc pd = ConvPd(2, 16, 32, 12);
    const std::string first = pd.impl_info_str();
    cpu::ChooseFastestImpl(pd, 1e6, "a");
    if (clock.asked().size() < 2) GTEST_SKIP() << "oneDNN has one implementation here (" << first << ")";
    EXPECT_EQ(pd.impl_info_str(), first);
  }
  // 10% faster replaces it; among the challengers the fastest wins.
  {
    FakeClock clock([](size_t i) { return i == 0 ? 1.0 : (i == 1 ? 0.9 : 0.95); });
    dnnl::convolution_forward::primitive_desc pd = ConvPd(2, 16, 32, 12);
    cpu::ChooseFastestImpl(pd, 1e6, "b");
    EXPECT_EQ(pd.impl_info_str(), clock.asked()[1]);
  }
  // The first cannot run: the next that can is taken.
  {
    FakeClock clock([](size_t i) -> std::optional<double> {
      if (i == 0) return std::nullopt;
      return 1.0;
    });
    dnnl::convolution_forward::primitive_desc pd = ConvPd(2, 16, 32, 12);
    cpu::ChooseFastestImpl(pd, 1e6, "c");
    EXPECT_EQ(pd.impl_info_str(), clock.asked()[1]);
  }
}

TEST_F(OneDnnTactics, NothingIsTimedWhenOffOrLarge) {
  FakeClock clock([](size_t i) { return 1.0 / static_cast<double>(i + 1); });
  dnnl::convolution_forward::primitive_desc pd = ConvPd(1, 16, 32, 8);
  const std::string first = pd.impl_info_str();
  cpu::ChooseFastestImpl(pd, cpu::kMaxTimedMacs * 1.01, "large");
  EXPECT_TRUE(clock.asked().empty());
  EXPECT_EQ(pd.impl_info_str(), first);
  cpu::SetOneDnnTimingEnabled(false);
  cpu::ChooseFastestImpl(pd, 1e5, "off");
  EXPECT_TRUE(clock.asked().empty());
  EXPECT_EQ(pd.impl_info_str(), first);
}

Tensor Random(const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(testing::Count(shape)));
  for (float& x : v) x = dist(rng);
  return testing::MakeTensor<float>(DType::kF32, shape, v);
}

// A Conv through the implementation the clock makes fastest (the last
// asked) equals the reference kernel's within float rounding of its sums.
void CheckConvThroughTheChoice(const Shape& x_shape, const Shape& w_shape, const Attrs& attrs, int64_t terms) {
  std::mt19937 rng(7);
  const Tensor x = Random(x_shape, rng), w = Random(w_shape, rng), b = Random({w_shape[0]}, rng);
  absl::StatusOr<std::vector<Tensor>> want;
  {
    cpu::ScopedOneDnn off(false);
    want = testing::RunOp("Conv", {&x, &w, &b}, attrs);
  }
  ASSERT_TRUE(want.ok()) << want.status();
  FakeClock clock([](size_t i) { return 1.0 / static_cast<double>(i + 1); });
  cpu::ScopedOneDnn on(true);
  const int64_t made = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<Tensor>> got = testing::RunOp("Conv", {&x, &w, &b}, attrs);
  ASSERT_TRUE(got.ok()) << got.status();
  if (cpu::OneDnnStepsMade() == made) GTEST_SKIP() << "oneDNN did not take the Conv here";
  if (clock.asked().size() < 2) GTEST_SKIP() << "oneDNN has one implementation here";
  const Tensor& y = (*got)[0];
  const Tensor& r = (*want)[0];
  ASSERT_EQ(y.shape(), r.shape());
  // Inputs in [-1, 1]: each output sums `terms` products of magnitude <= 1
  // and a bias; two orders of the sum differ by at most 2 * terms^2 * 2^-24.
  const float tol = 2.0f * static_cast<float>(terms * terms) * std::ldexp(1.0f, -24) + 1e-6f;
  for (int64_t i = 0; i < y.view().num_elements(); ++i) {
    ASSERT_NEAR(y.as<float>()[i], r.as<float>()[i], tol) << "element " << i << " through " << clock.asked().back();
  }
}

TEST_F(OneDnnTactics, DepthwiseConvThroughTheChoiceMatchesTheReference) {
  CheckConvThroughTheChoice({2, 16, 12, 12}, {16, 1, 3, 3},
                            {{"group", int64_t{16}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, 9);
}

TEST_F(OneDnnTactics, ConvThroughTheChoiceMatchesTheReference) {
  CheckConvThroughTheChoice({2, 16, 10, 10}, {32, 16, 3, 3},
                            {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{1, 1}}},
                            16 * 9);
}

}  // namespace
}  // namespace grove
