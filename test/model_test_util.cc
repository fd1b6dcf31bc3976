#include "test/model_test_util.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>

#include "lib/runtime/model_impl.h"

namespace grove::testing {

std::shared_ptr<const Model> LoadOrDie(absl::StatusOr<std::vector<uint8_t>> bytes) {
  if (!bytes.ok()) {
    std::fprintf(stderr, "building the model failed: %s\n", bytes.status().ToString().c_str());
    std::abort();
  }
  auto model = Model::LoadFromBuffer(*bytes);
  if (!model.ok()) {
    std::fprintf(stderr, "loading the model failed: %s\n", model.status().ToString().c_str());
    std::abort();
  }
  return *model;
}

std::unique_ptr<Session> CpuSession(std::shared_ptr<const Model> model) {
  SessionOptions options;
  options.device = Device::kCpu;
  auto session = Session::Create(std::move(model), options);
  if (!session.ok()) {
    std::fprintf(stderr, "creating a CPU session failed: %s\n", session.status().ToString().c_str());
    std::abort();
  }
  return *std::move(session);
}

std::vector<float> WeightF32(const Model& model, const std::string& name) {
  for (const ir::TensorDecl& t : model.impl().graph().tensors) {
    if (t.name == name && t.is_weight && t.dtype == DType::kF32) {
      const float* p = reinterpret_cast<const float*>(t.data);
      return std::vector<float>(p, p + t.bytes / sizeof(float));
    }
  }
  return {};
}

std::vector<float> RandomF32(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 747796405u + 2891336453u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return v;
}

std::vector<float> MatMulRef(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t k,
                             int64_t n) {
  std::vector<float> c(m * n, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + p] * b[p * n + j];
    }
  }
  return c;
}

std::vector<float> ToVector(const TensorView& v) {
  const float* p = v.as<const float>();
  return std::vector<float>(p, p + v.num_elements());
}

absl::StatusOr<std::vector<uint8_t>> BuildSequenceLoop() {
  ModelBuilder b;
  b.AddInput("m", DType::kI64, {});
  b.AddInput("x", DType::kF32, {2});
  const int body = b.AddSubgraph("body");
  b.AddInput("iter", DType::kI64, {});
  b.AddInput("cond_in", DType::kBool, {});
  b.AddInput("acc", ValueKind::kSequence, DType::kF32);
  b.AddOp("Cast", {"iter"}, {"iter_f"}, {{"to", int64_t{static_cast<int64_t>(DType::kF32)}}});
  b.AddOp("Mul", {"x", "iter_f"}, {"row"});
  b.AddOp("SequenceInsert", {"acc", "row"}, {"acc_out"});
  b.AddOp("Identity", {"cond_in"}, {"cond_out"});
  b.AddOutput("cond_out");
  b.AddOutput("acc_out");
  b.SetSubgraph(0);
  b.AddOp("SequenceEmpty", {}, {"empty"}, {{"dtype", int64_t{static_cast<int64_t>(DType::kF32)}}});
  b.AddOp("Loop", {"m", "", "empty"}, {"list"}, {{"body", SubgraphRef{body}}});
  b.AddOp("ConcatFromSequence", {"list"}, {"stacked"}, {{"axis", int64_t{0}}, {"new_axis", int64_t{1}}});
  b.AddOutput("stacked");
  b.AddOutput("list");
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildSwapLoop() {
  ModelBuilder b;
  b.AddInput("m", DType::kI64, {});
  b.AddInput("a", DType::kF32, {2});
  b.AddInput("b", DType::kF32, {2});
  const int body = b.AddSubgraph("swap");
  b.AddInput("iter", DType::kI64, {});
  b.AddInput("cond_in", DType::kBool, {});
  b.AddInput("x", DType::kF32, {2});
  b.AddInput("y", DType::kF32, {2});
  b.AddOutput("cond_in");
  b.AddOutput("y");
  b.AddOutput("x");
  b.SetSubgraph(0);
  b.AddOp("Loop", {"m", "", "a", "b"}, {"a_out", "b_out"}, {{"body", SubgraphRef{body}}});
  b.AddOutput("a_out");
  b.AddOutput("b_out");
  return b.Finish();
}

Tensor ScalarI64(int64_t v) {
  Tensor t = Tensor::Create(DType::kI64, {}).value();
  *t.as<int64_t>() = v;
  return t;
}

Tensor TensorF32(std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t = Tensor::Create(DType::kF32, std::move(shape)).value();
  std::copy(values.begin(), values.end(), t.as<float>());
  return t;
}

}  // namespace grove::testing
