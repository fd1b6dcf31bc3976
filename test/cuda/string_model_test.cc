// The string models of test/string_test_models.h on the CUDA executor (the
// emulated device in CI, the GPU under `ctest -L gpu`): string inputs are fed
// to a CUDA session, every step with a string input or output runs its CPU
// kernel with copies, and the results equal the CPU session's and the naive
// references, run after run.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"
#include "test/op_test_util.h"
#include "test/string_test_models.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using testing::LoadOrDie;
using testing::MakeStrings;
using testing::ScalarI64;
using testing::Strings;
using testing::Strs;
using testing::StringsOf;

struct Sessions {
  std::unique_ptr<Session> cpu, cuda;
};

Sessions MakeSessions(absl::StatusOr<std::vector<uint8_t>> bytes) {
  std::shared_ptr<const Model> model = LoadOrDie(std::move(bytes));
  Sessions s;
  SessionOptions cpu_options;
  cpu_options.device = Device::kCpu;
  s.cpu = Session::Create(model, cpu_options).value();
  absl::StatusOr<std::unique_ptr<Session>> cuda = internal::CreateSessionOnDevice(model, {}, testing::TestDevice());
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (cuda.ok()) s.cuda = *std::move(cuda);
  return s;
}

// A copy of a run's outputs: strings as text, anything else as bytes.
struct Output {
  DType dtype;
  std::vector<int64_t> shape;
  Strs strings;
  std::vector<uint8_t> bytes;
  bool operator==(const Output& o) const {
    return dtype == o.dtype && shape == o.shape && strings == o.strings && bytes == o.bytes;
  }
};
std::vector<Output> Keep(const std::vector<TensorView>& views) {
  std::vector<Output> out;
  for (const TensorView& v : views) {
    Output o{v.dtype, v.shape, {}, {}};
    if (v.dtype == DType::kString) {
      o.strings = StringsOf(v);
    } else {
      const uint8_t* p = v.as<const uint8_t>();
      o.bytes.assign(p, p + v.byte_size());
    }
    out.push_back(std::move(o));
  }
  return out;
}

// Runs both sessions; expects the same outputs and returns the CUDA one's.
std::vector<Output> RunBoth(Sessions& s, const std::vector<TensorView>& inputs) {
  absl::StatusOr<std::vector<TensorView>> want = s.cpu->Run(inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<TensorView>> got = s.cuda->Run(inputs);
  EXPECT_TRUE(got.ok()) << s.cuda->device_description() << ": " << got.status();
  if (!want.ok() || !got.ok()) return {};
  std::vector<Output> w = Keep(*want), g = Keep(*got);
  EXPECT_EQ(w.size(), g.size());
  for (size_t i = 0; i < w.size() && i < g.size(); ++i) EXPECT_TRUE(w[i] == g[i]) << "output " << i;
  return g;
}

Tensor I64s(const std::vector<int64_t>& v) {
  Tensor t = Tensor::Create(DType::kI64, {static_cast<int64_t>(v.size())}).value();
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

TEST(CudaStringModelTest, LookupTwiceMatchesTheCpuAndTheReference) {
  Sessions s = MakeSessions(testing::BuildStringLookup());
  ASSERT_NE(s.cuda, nullptr);
  const struct {
    Strs words;
    std::vector<int64_t> ids;
  } runs[] = {{{"a", "日本", "", "ü🙂"}, {2, 0, -3, 3}}, {{"日本", "naïve"}, {1}}, {{"z"}, {2, 2, 2}}};
  std::vector<Output> first;
  for (const auto& r : runs) {
    SCOPED_TRACE(r.words.size());
    Tensor words = MakeStrings({static_cast<int64_t>(r.words.size())}, r.words);
    Tensor ids = I64s(r.ids);
    std::vector<Output> got = RunBoth(s, {words.view(), ids.view()});
    ASSERT_EQ(got.size(), 4u);
    const testing::LookupResult want = testing::LookupReference(r.words, r.ids);
    EXPECT_EQ(got[0].strings, want.picked);
    EXPECT_EQ(got[1].strings, want.joined);
    EXPECT_EQ(got[2].bytes, want.hit);
    EXPECT_EQ(got[3].strings, want.column);
    if (first.empty()) first = got;
  }
  EXPECT_EQ(first[3].strings, testing::LookupReference(runs[0].words, runs[0].ids).column);
  // The string steps ran on the host.
  EXPECT_GT(s.cuda->stats().cpu_fallback_steps, 0);
}

TEST(CudaStringModelTest, RunIntoHostBuffersOfStringRefs) {
  Sessions s = MakeSessions(testing::BuildStringLookup());
  ASSERT_NE(s.cuda, nullptr);
  std::vector<StringRef> picked(2), joined(3), column(3);
  std::vector<uint8_t> hit(3);
  const std::vector<TensorView> into = {TensorView(DType::kString, {2}, picked.data()),
                                        TensorView(DType::kString, {3}, joined.data()),
                                        TensorView(DType::kBool, {3}, hit.data()),
                                        TensorView(DType::kString, {3, 1}, column.data())};
  {
    Tensor words = MakeStrings({1}, {"日本"});
    Tensor ids = I64s({1, 2});
    absl::Status st = s.cuda->RunInto({words.view(), ids.view()}, into);
    ASSERT_TRUE(st.ok()) << st;
  }
  const testing::LookupResult want = testing::LookupReference({"日本"}, {1, 2});
  EXPECT_EQ(StringsOf(into[0]), want.picked);
  EXPECT_EQ(StringsOf(into[1]), want.joined);
  EXPECT_EQ(hit, want.hit);
  EXPECT_EQ(StringsOf(into[3]), want.column);
}

TEST(CudaStringModelTest, LoopsCarryingStrings) {
  Sessions s = MakeSessions(testing::BuildStringLoop());
  ASSERT_NE(s.cuda, nullptr);
  for (int64_t m : {3, 1, 6, 3}) {
    SCOPED_TRACE(m);
    Tensor seed = MakeStrings({2}, {"начало", ""});
    Tensor trips = ScalarI64(m);
    std::vector<Output> got = RunBoth(s, {trips.view(), seed.view()});
    ASSERT_EQ(got.size(), 5u);
    const Strs digits(testing::LoopDigits().begin(), testing::LoopDigits().begin() + m);
    Strs grown = {"начало", ""};
    grown.insert(grown.end(), digits.begin(), digits.end());
    EXPECT_EQ(got[0].strings, grown);
    EXPECT_EQ(got[1].strings, digits);
    EXPECT_EQ(got[2].shape, (std::vector<int64_t>{m, 1}));
    EXPECT_EQ(got[2].strings, digits);
    EXPECT_EQ(got[3].strings, Strs{m >= 2 ? digits[m - 2] : "—"});
    EXPECT_EQ(got[4].strings, Strs{digits[m - 1]});
  }
}

TEST(CudaStringModelTest, IfAndScanWithStrings) {
  Sessions branch = MakeSessions(testing::BuildStringIf());
  ASSERT_NE(branch.cuda, nullptr);
  const Strs words = {"début", "", "中"};
  for (bool flag : {true, false}) {
    Tensor f = Tensor::Create(DType::kBool, {}).value();
    *f.as<uint8_t>() = flag ? 1 : 0;
    Tensor w = MakeStrings({3}, words);
    std::vector<Output> got = RunBoth(branch, {f.view(), w.view()});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].strings, testing::IfReference(flag, words));
  }
  Sessions scan = MakeSessions(testing::BuildStringScan());
  ASSERT_NE(scan.cuda, nullptr);
  const Strs xs = {"α", "", "🙂"};
  Tensor s0 = MakeStrings({1}, {"start"});
  Tensor x = MakeStrings({3}, xs);
  std::vector<Output> got = RunBoth(scan, {s0.view(), x.view()});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].strings, Strs{"🙂"});
  EXPECT_EQ(got[1].strings, testing::ScanPairsReference("start", xs));
}

TEST(CudaStringModelTest, SequencesOfStringsThroughRunValues) {
  Sessions s = MakeSessions(testing::BuildStringSequence());
  ASSERT_NE(s.cuda, nullptr);
  const Strs a = {"α", "β"}, words = {"w0", "ш"};
  const std::vector<Value> inputs = {Value::Sequence(DType::kString, {MakeStrings({2}, a)}),
                                     Value(MakeStrings({2}, words))};
  absl::StatusOr<std::vector<Value>> want = s.cpu->RunValues(inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<Value>> got = s.cuda->RunValues(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 4u);
  EXPECT_THAT(Strings((*got)[0].tensor()), ElementsAre("w0", "ш", "α", "β"));
  EXPECT_EQ(Strings((*got)[0].tensor()), Strings((*want)[0].tensor()));
  EXPECT_EQ(Strings((*got)[1].tensor()), a);
  ASSERT_EQ((*got)[2].items().size(), 2u);
  EXPECT_EQ(Strings((*got)[2].items()[0]), words);
  ASSERT_EQ((*got)[3].items().size(), 4u);
  EXPECT_THAT(Strings((*got)[3].items()[3]), ElementsAre("β"));
}

}  // namespace
}  // namespace grove
