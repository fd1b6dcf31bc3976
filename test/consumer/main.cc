// Builds a model with the public API, runs it, checks the answer.
#include <cstdio>

#include "grove/grove.h"

int main() {
  grove::ModelBuilder b;
  b.AddSymbol("n", 1, 16);
  b.AddInput("x", grove::DType::kF32, {"n"});
  b.AddWeight("two", grove::DType::kF32, {}, std::vector<float>{2.0f});
  b.AddOp("Mul", {"x", "two"}, {"y"});
  b.AddOutput("y");
  auto bytes = b.Finish();
  if (!bytes.ok()) return 1;
  auto model = grove::Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return 2;
  auto session = grove::Session::Create(*model, {});
  if (!session.ok()) return 3;
  float x[3] = {1, 2, 3};
  auto out = (*session)->Run({grove::TensorView(grove::DType::kF32, {3}, x)});
  if (!out.ok() || (*out)[0].as<float>()[2] != 6.0f) return 4;
  std::printf("consumer: grove %s ok\n", std::string(grove::Version()).c_str());
  return 0;
}
