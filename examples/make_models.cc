// Writes the demo models and sample inputs into a folder:
//
//   grove_make_models OUT_DIR
//
// mlp.grove          x[batch,16] -> y[batch,4]            inputs: mlp_x.npy
// transformer.grove  x[batch,seq,32] -> y                 inputs: transformer_x_1x8.npy, transformer_x_2x16.npy
// early_exit.grove   x[batch,8] -> y[batch,8 or 3] (If)   inputs: early_exit_pos.npy (deep), early_exit_neg.npy (shallow)
// loop.grove         trip_count, x[n], limit -> final, sums (Loop)
//                    inputs: loop_trip_count.npy, loop_x.npy, loop_limit.npy, loop_limit_small.npy
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "grove/npy.h"
#include "models/demo_models.h"

namespace {

bool Check(const absl::Status& s, const std::string& what) {
  if (!s.ok()) std::fprintf(stderr, "grove_make_models: %s: %s\n", what.c_str(), s.ToString().c_str());
  return s.ok();
}

bool SaveModel(const std::string& dir, const std::string& name,
               absl::StatusOr<std::vector<uint8_t>> (*build)()) {
  absl::StatusOr<std::vector<uint8_t>> bytes = build();
  if (!Check(bytes.status(), name)) return false;
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Check(absl::NotFoundError("cannot write " + path), name);
  const bool ok = std::fwrite(bytes->data(), 1, bytes->size(), f) == bytes->size();
  return (std::fclose(f) == 0 && ok) || Check(absl::DataLossError("short write"), path);
}

template <typename T>
bool SaveInput(const std::string& dir, const std::string& name, grove::DType dtype, std::vector<int64_t> shape,
               const std::vector<T>& values) {
  return Check(grove::WriteNpy(dir + "/" + name, grove::TensorView(dtype, std::move(shape), values.data())), name);
}

std::vector<float> Ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 17) - 0.03f * static_cast<float>(i % 5);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: grove_make_models OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  using grove::DType;
  bool ok = SaveModel(dir, "mlp.grove", grove::demo::BuildMlp) &&
            SaveModel(dir, "transformer.grove", grove::demo::BuildTransformerBlock) &&
            SaveModel(dir, "early_exit.grove", grove::demo::BuildEarlyExit) &&
            SaveModel(dir, "loop.grove", grove::demo::BuildLoop) &&
            SaveInput(dir, "mlp_x.npy", DType::kF32, {3, 16}, Ramp(48, -0.5f, 0.07f)) &&
            SaveInput(dir, "transformer_x_1x8.npy", DType::kF32, {1, 8, 32}, Ramp(256, -0.4f, 0.05f)) &&
            SaveInput(dir, "transformer_x_2x16.npy", DType::kF32, {2, 16, 32}, Ramp(1024, -0.3f, 0.04f)) &&
            SaveInput(dir, "early_exit_pos.npy", DType::kF32, {4, 8}, Ramp(32, 0.1f, 0.05f)) &&
            SaveInput(dir, "early_exit_neg.npy", DType::kF32, {4, 8}, Ramp(32, -0.9f, 0.05f)) &&
            SaveInput(dir, "loop_trip_count.npy", DType::kI64, {}, std::vector<int64_t>{6}) &&
            SaveInput(dir, "loop_x.npy", DType::kF32, {5}, std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f, 1.0f}) &&
            SaveInput(dir, "loop_limit.npy", DType::kF32, {}, std::vector<float>{1e6f}) &&
            SaveInput(dir, "loop_limit_small.npy", DType::kF32, {}, std::vector<float>{50.0f});
  if (!ok) return 1;
  std::printf("wrote the demo models and inputs to %s\n", dir.c_str());
  return 0;
}
