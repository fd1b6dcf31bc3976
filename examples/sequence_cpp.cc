// Sequences through the C++ API: builds (with ModelBuilder) the shape of a
// PyTorch decoder that appends each step to a Python list — a Loop carrying a
// sequence, then ConcatFromSequence — and runs it with Session::RunValues,
// which also returns the list itself. A model imported from ONNX with
// sequence inputs or outputs runs the same way.
//
//   example_sequence
#include <cstdio>
#include <memory>
#include <vector>

#include "grove/grove.h"

namespace {

// steps (i64 scalar), x f32[2] -> stacked f32[steps, 2] (row i = x * i), list seq(f32).
absl::StatusOr<std::shared_ptr<const grove::Model>> BuildModel() {
  using grove::DType;
  grove::ModelBuilder b;
  b.AddInput("steps", DType::kI64, {});
  b.AddInput("x", DType::kF32, {2});
  const int body = b.AddSubgraph("step");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("go", DType::kBool, {});
  b.AddInput("rows", grove::ValueKind::kSequence, DType::kF32);  // the list so far
  b.AddOp("Cast", {"i"}, {"i_f"}, {{"to", int64_t{static_cast<int64_t>(DType::kF32)}}});
  b.AddOp("Mul", {"x", "i_f"}, {"row"});
  b.AddOp("SequenceInsert", {"rows", "row"}, {"rows_out"});  // rows.append(row)
  b.AddOutput("go");
  b.AddOutput("rows_out");
  b.SetSubgraph(0);
  b.AddOp("SequenceEmpty", {}, {"empty"}, {{"dtype", int64_t{static_cast<int64_t>(DType::kF32)}}});
  b.AddOp("Loop", {"steps", "", "empty"}, {"list"}, {{"body", grove::SubgraphRef{body}}});
  b.AddOp("ConcatFromSequence", {"list"}, {"stacked"}, {{"axis", int64_t{0}}, {"new_axis", int64_t{1}}});
  b.AddOutput("stacked");
  b.AddOutput("list");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  return grove::Model::LoadFromBuffer(*bytes);
}

}  // namespace

int main() {
  absl::StatusOr<std::shared_ptr<const grove::Model>> model = BuildModel();
  if (!model.ok()) {
    std::fprintf(stderr, "cannot build the model: %s\n", model.status().ToString().c_str());
    return 1;
  }
  for (const grove::TensorInfo& out : (*model)->outputs()) {
    std::printf("output %s: %s of %s\n", out.name.c_str(), std::string(grove::ValueKindName(out.kind)).c_str(),
                std::string(grove::DTypeName(out.dtype)).c_str());
  }
  grove::SessionOptions options;
  options.device = grove::Device::kCpu;
  absl::StatusOr<std::unique_ptr<grove::Session>> session = grove::Session::Create(*model, options);
  if (!session.ok()) {
    std::fprintf(stderr, "cannot create a session: %s\n", session.status().ToString().c_str());
    return 1;
  }
  for (int64_t steps : {3, 5}) {
    // Values own their tensors; a tensor input is a Value too.
    grove::Tensor n = grove::Tensor::Create(grove::DType::kI64, {}).value();
    *n.as<int64_t>() = steps;
    grove::Tensor x = grove::Tensor::Create(grove::DType::kF32, {2}).value();
    x.as<float>()[0] = 1.0f;
    x.as<float>()[1] = -0.5f;
    absl::StatusOr<std::vector<grove::Value>> outs = (*session)->RunValues({grove::Value(n), grove::Value(x)});
    if (!outs.ok()) {
      std::fprintf(stderr, "run with %lld steps failed: %s\n", static_cast<long long>(steps),
                   outs.status().ToString().c_str());
      return 1;
    }
    const grove::Tensor& stacked = (*outs)[0].tensor();
    const grove::Value& list = (*outs)[1];
    std::printf("%lld steps: stacked %s, list %s\n", static_cast<long long>(steps),
                (*outs)[0].DebugString().c_str(), list.DebugString().c_str());
    for (int64_t i = 0; i < steps; ++i) {
      const float* row = stacked.as<float>() + 2 * i;
      const float* item = list.items()[i].as<float>();
      if (row[0] != item[0] || row[1] != item[1] || row[0] != static_cast<float>(i)) {
        std::fprintf(stderr, "row %lld disagrees with the list\n", static_cast<long long>(i));
        return 1;
      }
      std::printf("  row %lld = [%g, %g]\n", static_cast<long long>(i), row[0], row[1]);
    }
  }
  // Bounded work: a run past its deadline stops with DEADLINE_EXCEEDED (a
  // grove::CancellationToken in options.cancellation stops runs from another
  // thread the same way), and the session runs on.
  grove::SessionOptions bounded = options;
  bounded.run_deadline_ms = 100;
  absl::StatusOr<std::unique_ptr<grove::Session>> bounded_session = grove::Session::Create(*model, bounded);
  if (!bounded_session.ok()) {
    std::fprintf(stderr, "cannot create a session: %s\n", bounded_session.status().ToString().c_str());
    return 1;
  }
  for (int64_t steps : {int64_t{1} << 40, int64_t{2}}) {
    grove::Tensor n = grove::Tensor::Create(grove::DType::kI64, {}).value();
    *n.as<int64_t>() = steps;
    grove::Tensor x = grove::Tensor::Create(grove::DType::kF32, {2}).value();
    absl::StatusOr<std::vector<grove::Value>> outs = (*bounded_session)->RunValues({grove::Value(n), grove::Value(x)});
    std::printf("%lld steps with a 100 ms deadline: %s\n", static_cast<long long>(steps),
                outs.ok() ? "done" : absl::StatusCodeToString(outs.status().code()).c_str());
  }

  const grove::SessionStats stats = (*session)->stats();
  std::printf("plans created %lld, plan cache hits %lld\nOK\n", static_cast<long long>(stats.plans_created),
              static_cast<long long>(stats.plan_cache_hits));
  return 0;
}
