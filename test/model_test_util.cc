#include "test/model_test_util.h"

#include <cstdio>
#include <cstdlib>

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

}  // namespace grove::testing
