#include "fuzz/fuzz_run.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace grove::fuzz {
namespace {

// Small values of every dtype, so integer inputs stay plausible indices.
void Fill(Tensor& t, absl::Span<const uint8_t> fill) {
  if (fill.empty() || t.dtype() == DType::kString || t.dtype() == DType::kUnknown) return;
  const size_t bytes = t.view().byte_size();
  auto* out = static_cast<uint8_t*>(t.data());
  if (t.dtype() == DType::kF32) {
    float* f = t.as<float>();
    for (size_t i = 0; i < bytes / 4; ++i) f[i] = (static_cast<int>(fill[i % fill.size()]) - 128) / 16.0f;
    return;
  }
  // Integers in [-7, 7] (unsigned: [0, 7]): an input that is a size (a
  // window's length, Range's limit) asks for a small output, not gigabytes.
  auto small = [&](size_t i) { return static_cast<int8_t>(fill[i % fill.size()]) % 8; };
  const int64_t n = t.view().num_elements();
  switch (t.dtype()) {
    case DType::kI64: for (int64_t i = 0; i < n; ++i) t.as<int64_t>()[i] = small(i); return;
    case DType::kI32: for (int64_t i = 0; i < n; ++i) t.as<int32_t>()[i] = small(i); return;
    case DType::kI16: for (int64_t i = 0; i < n; ++i) t.as<int16_t>()[i] = static_cast<int16_t>(small(i)); return;
    case DType::kI8: for (int64_t i = 0; i < n; ++i) t.as<int8_t>()[i] = static_cast<int8_t>(small(i)); return;
    case DType::kU64: for (int64_t i = 0; i < n; ++i) t.as<uint64_t>()[i] = fill[i % fill.size()] % 8; return;
    case DType::kU32: for (int64_t i = 0; i < n; ++i) t.as<uint32_t>()[i] = fill[i % fill.size()] % 8; return;
    case DType::kU16: for (int64_t i = 0; i < n; ++i) t.as<uint16_t>()[i] = fill[i % fill.size()] % 8; return;
    case DType::kU8: for (int64_t i = 0; i < n; ++i) out[i] = fill[i % fill.size()] % 8; return;
    case DType::kBool: for (int64_t i = 0; i < n; ++i) out[i] = fill[i % fill.size()] & 1; return;
    default: break;
  }
  for (size_t i = 0; i < bytes; ++i) out[i] = fill[i % fill.size()];  // f16, bf16, f64: any bits
}

}  // namespace

void RunSmall(const std::shared_ptr<const Model>& model, absl::Span<const uint8_t> fill) {
  (void)model->Summary();
  SessionOptions options;
  options.device = Device::kCpu;
  options.run_deadline_ms = kRunDeadlineMs;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(model, options);
  if (!session.ok()) return;

  absl::flat_hash_map<std::string, int64_t> symbol_values;
  for (const SymbolInfo& s : model->symbols()) symbol_values[s.name] = std::clamp<int64_t>(s.min, 0, 4);

  std::vector<std::vector<int64_t>> shapes;
  std::vector<Value> inputs;
  for (const TensorInfo& info : model->inputs()) {
    std::vector<int64_t> shape;
    int64_t elements = 1;
    for (const DimInfo& d : info.shape) {
      int64_t v = d.value;
      if (d.is_symbolic()) {
        auto it = symbol_values.find(d.symbol);
        v = it == symbol_values.end() ? 1 : it->second;
      }
      if (v < 0 || v > kMaxInputElements) return;
      elements *= std::max<int64_t>(v, 1);
      if (elements > kMaxInputElements) return;
      shape.push_back(v);
    }
    shapes.push_back(shape);
    if (info.kind == ValueKind::kSequence) {
      inputs.push_back(Value::Sequence(info.dtype));
      continue;
    }
    if (info.kind != ValueKind::kTensor) {
      inputs.push_back(Value::None(info.kind, info.dtype));
      continue;
    }
    absl::StatusOr<Tensor> t = Tensor::Create(info.dtype, shape);
    if (!t.ok()) return;
    Fill(*t, fill);
    inputs.emplace_back(std::move(*t));
  }
  // Plan first: a model may ask for more memory than a fuzz run should take.
  absl::StatusOr<MemoryReport> plan = (*session)->Reshape(shapes);
  if (plan.ok() && plan->arena_bytes > kMaxArenaBytes) return;
  (void)(*session)->RunValues(inputs);
  // A second run hits the plan cache: the steady state is fuzzed too.
  (void)(*session)->RunValues(inputs);
}

}  // namespace grove::fuzz
