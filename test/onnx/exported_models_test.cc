// Real ONNX models end to end: each PyTorch export under test/models/ and the
// trained Silero VAD under models/silero_vad/ is imported with the ONNX
// importer and run, every case in one session, against the references that
// PyTorch (or, for Silero, onnxruntime) computed. A second pass over the same
// cases must be served from the plan cache alone.
//
// Tolerance: f32 outputs agree elementwise within |got - ref| <= 1e-4 * (1 + |ref|)
// (relative for magnitudes above 1, absolute below); integer and bool
// outputs exactly. Data files: see test/models/README.md and
// models/silero_vad/README.md; cases.txt has a line per case:
// `NAME IN.npy,... OUT.npy,...` in model input and output order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grove/grove.h"
#include "grove/npy.h"
#include "gtest/gtest.h"
#include "test/onnx/exported_models.h"
#include "tools/onnx/onnx_importer.h"


namespace grove {
namespace {

namespace fs = std::filesystem;
using testing::Case;
using testing::Compare;
using testing::Import;
using testing::ModelsUnderTest;
using testing::ModelUnderTest;
using testing::ReadCases;
using testing::SourceDir;
using testing::kTolerance;

absl::StatusOr<std::unique_ptr<Session>> CpuSession(std::shared_ptr<const Model> model) {
  SessionOptions options;
  options.device = Device::kCpu;
  options.max_cached_plans = 0;  // keep every plan: the second pass must hit them all
  return Session::Create(std::move(model), options);
}

class ExportedModelTest : public ::testing::TestWithParam<ModelUnderTest> {};

// Runs every case twice in one session: the first pass plans each new input
// signature (and each control-flow path it takes); the second pass must find
// every plan in the cache.
TEST_P(ExportedModelTest, MatchesReferenceAndReusesPlans) {
  const ModelUnderTest& m = GetParam();
  onnx_import::ImportReport report;
  absl::StatusOr<std::shared_ptr<const Model>> model = Import(m.onnx, &report);
  ASSERT_TRUE(model.ok()) << m.name << ": " << model.status();
  absl::StatusOr<std::vector<Case>> cases = ReadCases(m.testdata);
  ASSERT_TRUE(cases.ok()) << cases.status();
  absl::StatusOr<std::unique_ptr<Session>> session = CpuSession(*model);
  ASSERT_TRUE(session.ok()) << session.status();
  Session& s = **session;
  ASSERT_EQ((*model)->inputs().size(), cases->front().inputs.size());
  ASSERT_EQ((*model)->outputs().size(), cases->front().outputs.size());

  const int n = static_cast<int>(cases->size());
  double worst_error = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const SessionStats before_pass = s.stats();
    for (const Case& c : *cases) {
      SCOPED_TRACE(absl::StrCat(m.name, "/", c.name, pass == 0 ? " (first pass)" : " (second pass)"));
      std::vector<TensorView> inputs;
      for (const Tensor& t : c.inputs) inputs.push_back(t.view());
      const SessionStats before = s.stats();
      absl::StatusOr<std::vector<TensorView>> outputs = s.Run(inputs);
      ASSERT_TRUE(outputs.ok()) << outputs.status();
      ASSERT_EQ(outputs->size(), c.outputs.size());
      for (size_t k = 0; k < c.outputs.size(); ++k) {
        EXPECT_EQ(Compare((*outputs)[k], c.outputs[k].view(), &worst_error), "")
            << "output " << (*model)->outputs()[k].name << " (" << c.output_files[k] << ")";
      }
      // An `_again` case repeats an earlier case's shapes with new data, on the
      // same path: the session has every plan it needs.
      if (absl::EndsWith(c.name, "_again")) {
        EXPECT_EQ(s.stats().plans_created, before.plans_created) << "a repeated shape made a new plan";
        EXPECT_GT(s.stats().plan_cache_hits, before.plan_cache_hits);
      }
    }
    const SessionStats after = s.stats();
    EXPECT_EQ(after.runs - before_pass.runs, n);
    if (pass == 0) {
      EXPECT_GT(after.plans_created, 0);
    } else {
      EXPECT_EQ(after.plans_created, before_pass.plans_created) << "the second pass made new plans";
      EXPECT_GE(after.plan_cache_hits - before_pass.plan_cache_hits, n);
      EXPECT_EQ(after.plans_evicted, 0);
    }
    RecordProperty(
        pass == 0 ? "plans_created" : "plan_cache_hits_second_pass",
        static_cast<int>(pass == 0 ? after.plans_created : after.plan_cache_hits - before_pass.plan_cache_hits));
  }
  std::printf("%s: %d cases x 2 in one session: %lld plans made, %lld cache hits; largest error %.2g\n",
              m.name.c_str(), n, static_cast<long long>(s.stats().plans_created),
              static_cast<long long>(s.stats().plan_cache_hits), worst_error);
}

INSTANTIATE_TEST_SUITE_P(Models, ExportedModelTest, ::testing::ValuesIn(ModelsUnderTest()),
                         [](const ::testing::TestParamInfo<ModelUnderTest>& info) { return info.param.name; });

TEST(ExportedModelsTest, AllModelsArePresent) {
  std::set<std::string> names;
  for (const ModelUnderTest& m : ModelsUnderTest()) {
    names.insert(m.name);
    EXPECT_TRUE(fs::exists(m.onnx)) << m.onnx;
    EXPECT_TRUE(fs::exists(m.testdata / "cases.txt")) << m.testdata;
  }
  for (const char* want :
       {"cnn", "early_exit", "gpt_block", "list_decoder", "loop_decoder", "lstm", "silero_vad", "transformer_encoder"}) {
    EXPECT_TRUE(names.contains(want)) << want;
  }
}

// Silero VAD streamed the way its Python package does it: chunks of 512 new
// samples at 16 kHz (256 at 8 kHz) with the previous chunk's last 64 (32)
// samples in front, the state carried from stateN to the next call, both
// rates in one session. The probabilities must follow onnxruntime's through
// the whole phrase, even though each call feeds grove's own state back.
TEST(SileroVadTest, StreamsBothRatesInOneSession) {
  const fs::path dir = SourceDir() / "models" / "silero_vad";
  absl::StatusOr<std::shared_ptr<const Model>> model = Import(dir / "silero_vad.onnx", nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Session>> session = CpuSession(*model);
  ASSERT_TRUE(session.ok()) << session.status();
  Session& s = **session;

  struct Stream {
    int64_t rate;
    int64_t chunk;
    int64_t context;
    const char* signal;
    const char* probs;
  };
  for (const Stream& st : {Stream{16000, 512, 64, "signal_16k.npy", "stream_16k_512_probs.npy"},
                           Stream{8000, 256, 32, "signal_8k.npy", "stream_8k_256_probs.npy"}}) {
    SCOPED_TRACE(absl::StrCat(st.rate, " Hz"));
    absl::StatusOr<Tensor> signal = ReadNpy((dir / "testdata" / st.signal).string());
    absl::StatusOr<Tensor> want = ReadNpy((dir / "testdata" / st.probs).string());
    ASSERT_TRUE(signal.ok()) << signal.status();
    ASSERT_TRUE(want.ok()) << want.status();
    const float* samples = signal->as<float>();
    const int64_t chunks = signal->shape()[0] / st.chunk;
    ASSERT_EQ(want->shape(), std::vector<int64_t>{chunks});

    std::vector<float> x(st.context + st.chunk, 0.0f);
    std::vector<float> state(2 * 128, 0.0f);
    const int64_t rate = st.rate;
    int64_t speech_chunks = 0;
    for (int64_t i = 0; i < chunks; ++i) {
      SCOPED_TRACE(absl::StrCat("chunk ", i));
      std::copy(x.end() - st.context, x.end(), x.begin());  // the previous chunk's tail
      std::copy(samples + i * st.chunk, samples + (i + 1) * st.chunk, x.begin() + st.context);
      const SessionStats before = s.stats();
      absl::StatusOr<std::vector<TensorView>> out =
          s.Run({TensorView(DType::kF32, {1, st.context + st.chunk}, x.data()),
                 TensorView(DType::kF32, {2, 1, 128}, state.data()), TensorView(DType::kI64, {}, &rate)});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), 2u);
      ASSERT_EQ((*out)[1].num_elements(), 256);
      const float prob = (*out)[0].as<float>()[0];
      const float ref = want->as<float>()[i];
      EXPECT_NEAR(prob, ref, kTolerance * (1 + std::fabs(ref)));
      if (ref > 0.5f) ++speech_chunks;
      std::copy((*out)[1].as<float>(), (*out)[1].as<float>() + 256, state.begin());
      if (i > 0) EXPECT_EQ(s.stats().plans_created, before.plans_created) << "a repeated chunk made a plan";
    }
    EXPECT_GT(speech_chunks, chunks / 4) << "the phrase should read as speech";
  }
}

}  // namespace
}  // namespace grove
