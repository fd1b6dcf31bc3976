// Runs the demo MLP (x f32[batch,16] -> y f32[batch,4], softmax rows) through
// the C++ API at two batch sizes, prints y and checks every row sums to 1.
//
//   example_cpp mlp.grove
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "grove/grove.h"

namespace {

constexpr int kFeatures = 16;
constexpr int kClasses = 4;

// Runs one batch and checks the softmax rows; false on any failure.
bool RunBatch(grove::Session& session, int batch) {
  // Deterministic inputs, so every run of this example prints the same.
  std::vector<float> x(batch * kFeatures);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));

  // A view borrows our buffer; the session reads it during Run only.
  grove::TensorView input(grove::DType::kF32, {batch, kFeatures}, x.data());
  absl::StatusOr<std::vector<grove::TensorView>> outputs = session.Run({input});
  if (!outputs.ok()) {
    std::fprintf(stderr, "run at batch %d failed: %s\n", batch, outputs.status().ToString().c_str());
    return false;
  }
  // The outputs point into the session: read (or copy) them before the next Run.
  const grove::TensorView& y = (*outputs)[0];
  if (y.dtype != grove::DType::kF32 || y.shape != std::vector<int64_t>{batch, kClasses}) {
    std::fprintf(stderr, "unexpected output at batch %d\n", batch);
    return false;
  }
  bool ok = true;
  std::printf("batch %d:\n", batch);
  for (int r = 0; r < batch; ++r) {
    const float* row = y.as<float>() + r * kClasses;
    float sum = 0;
    std::printf("  y[%d] =", r);
    for (int c = 0; c < kClasses; ++c) {
      std::printf(" %.5f", row[c]);
      sum += row[c];
    }
    std::printf("   (sum %.5f)\n", sum);
    if (std::fabs(sum - 1.0f) > 1e-4f) ok = false;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.grove\n", argv[0]);
    return 2;
  }
  // The model is immutable and shared; each thread would get its own Session.
  absl::StatusOr<std::shared_ptr<const grove::Model>> model = grove::Model::LoadFromFile(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], model.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<grove::Session>> session = grove::Session::Create(*model, {});
  if (!session.ok()) {
    std::fprintf(stderr, "cannot create a session: %s\n", session.status().ToString().c_str());
    return 1;
  }

  // One session serves every batch size the model's "batch" symbol allows.
  bool ok = true;
  for (int batch : {1, 3}) ok = RunBatch(**session, batch) && ok;

  const grove::SessionStats stats = (*session)->stats();
  std::printf("runs %lld, plans created %lld\n", static_cast<long long>(stats.runs),
              static_cast<long long>(stats.plans_created));
  if (!ok) {
    std::fprintf(stderr, "FAILED: a softmax row does not sum to 1\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
