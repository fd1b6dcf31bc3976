// Fuzzes load-then-run of small models: the bytes choose 1 to 3 ops from the
// registry, their attributes (kinds as the registry declares them, values
// from small, edge and extreme ones), their inputs (model inputs of rank 0 to
// 4 with dims 0 to 5, or weights holding fuzzed small integers, as shapes,
// axes and indices are), and the input data; the model is built with
// ModelBuilder, loaded and run on the CPU. Every input is at most 5^4
// elements and the memory plan is bounded (fuzz_run.h), so runs stay fast.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fuzz/byte_choices.h"
#include "fuzz/fuzz_run.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"

namespace {

using grove::AttrValue;
using grove::DType;
using FuzzedDataProvider = grove::fuzz::ByteChoices;

constexpr DType kDTypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool, DType::kF16,
                             DType::kU8,  DType::kI8,  DType::kF64, DType::kBF16, DType::kString};

int64_t FuzzInt(FuzzedDataProvider& in) {
  static constexpr int64_t kEdges[] = {0, 1, 2, 3, -1, -2, 4, 5, 8, 16, std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(), int64_t{1} << 32, int64_t{1} << 62,
                                       -(int64_t{1} << 31), 65536};
  if (in.ConsumeIntegralInRange(0, 7) != 0) return in.ConsumeIntegralInRange<int64_t>(-3, 6);
  return in.PickValueInArray(kEdges);
}

double FuzzFloat(FuzzedDataProvider& in) {
  static constexpr double kValues[] = {0.0, 1.0, -1.0, 0.5, 2.0, 1e-5, 1e30, -1e30,
                                       std::numeric_limits<double>::quiet_NaN(),
                                       std::numeric_limits<double>::infinity(), 1e-45};
  return in.PickValueInArray(kValues);
}

std::string FuzzString(FuzzedDataProvider& in) {
  // Values ONNX attributes take (auto_pad, mode, direction, ...).
  static const char* const kStrings[] = {
      "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect", "edge", "wrap", "linear",
      "nearest", "cubic", "half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
      "tf_crop_and_resize", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "sum", "mean",
      "max", "min", "none", "add", "mul", "Tanh", "Sigmoid", "Relu", "forward", "reverse",
      "bidirectional", "DCR", "CRD", "LOWER", "UPPER", "tanh", "exact", "", "\xff"};
  if (in.ConsumeIntegralInRange(0, 7) == 0) return in.ConsumeRandomLengthString(8);
  return in.PickValueInArray(kStrings);
}

AttrValue FuzzAttr(FuzzedDataProvider& in, grove::ir::AttrKind kind) {
  using grove::ir::AttrKind;
  switch (kind) {
    case AttrKind::kInt:
      return FuzzInt(in);
    case AttrKind::kFloat:
      return FuzzFloat(in);
    case AttrKind::kString:
      return FuzzString(in);
    case AttrKind::kInts: {
      std::vector<int64_t> v(in.ConsumeIntegralInRange(0, 6));
      for (int64_t& x : v) x = FuzzInt(in);
      return v;
    }
    case AttrKind::kFloats: {
      std::vector<double> v(in.ConsumeIntegralInRange(0, 6));
      for (double& x : v) x = FuzzFloat(in);
      return v;
    }
    case AttrKind::kStrings: {
      std::vector<std::string> v(in.ConsumeIntegralInRange(0, 4));
      for (std::string& x : v) x = FuzzString(in);
      return v;
    }
    case AttrKind::kSubgraph:
      break;
  }
  return int64_t{0};
}

// Weight bytes: small integers (shapes, axes, indices) or arbitrary bytes.
std::vector<uint8_t> WeightBytes(FuzzedDataProvider& in, DType dtype, int64_t elements) {
  const size_t size = grove::DTypeSize(dtype);
  std::vector<uint8_t> bytes(size * static_cast<size_t>(elements));
  const bool small_ints = in.ConsumeBool();
  for (int64_t i = 0; i < elements; ++i) {
    uint8_t* p = bytes.data() + i * size;
    if (small_ints && dtype == DType::kI64) {
      int64_t v = FuzzInt(in);
      std::memcpy(p, &v, 8);
    } else if (small_ints && dtype == DType::kI32) {
      int32_t v = static_cast<int32_t>(FuzzInt(in));
      std::memcpy(p, &v, 4);
    } else if (small_ints && dtype == DType::kF32) {
      float v = static_cast<float>(FuzzFloat(in));
      std::memcpy(p, &v, 4);
    } else {
      for (size_t b = 0; b < size; ++b) p[b] = in.ConsumeIntegral<uint8_t>();
    }
    if (dtype == DType::kBool) *p &= 1;
  }
  return bytes;
}

std::string AttrText(int64_t v) { return absl::StrCat(v); }
std::string AttrText(double v) { return absl::StrCat(v); }
std::string AttrText(const std::string& v) { return absl::StrCat("'", v, "'"); }
std::string AttrText(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }
std::string AttrText(const std::vector<double>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }
std::string AttrText(const std::vector<std::string>& v) { return absl::StrCat("['", absl::StrJoin(v, "','"), "']"); }
std::string AttrText(const grove::SubgraphRef& v) { return absl::StrCat("subgraph ", v.index); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const grove::ir::OpRegistry& registry = grove::runtime::GlobalOpRegistry();
  static const std::vector<std::string> types = [] {
    std::vector<std::string> usable;
    for (const std::string& t : registry.Types()) {
      const grove::ir::OpDef* def = registry.Find(t);
      bool needs_subgraph = false;
      for (const auto& a : def->attrs) needs_subgraph |= a.required && a.kind == grove::ir::AttrKind::kSubgraph;
      if (!needs_subgraph && def->kernels[static_cast<int>(grove::ir::Backend::kCpu)] != nullptr) {
        usable.push_back(t);
      }
    }
    return usable;
  }();
  // GROVE_FUZZ_VERBOSE=1: print the model an input makes (to describe a finding).
  static const bool verbose = std::getenv("GROVE_FUZZ_VERBOSE") != nullptr;
  FuzzedDataProvider in(data, size);
  grove::ModelBuilder b;
  std::vector<std::string> values;
  const int num_values = in.ConsumeIntegralInRange(1, 3);
  for (int v = 0; v < num_values; ++v) {
    const std::string name = absl::StrCat("v", v);
    const DType dtype = in.ConsumeIntegralInRange(0, 3) != 0 ? in.PickValueInArray({DType::kF32, DType::kI64})
                                                             : in.PickValueInArray(kDTypes);
    const int rank = in.ConsumeIntegralInRange(0, 4);
    const bool weight = dtype != DType::kString && in.ConsumeIntegralInRange(0, 2) == 0;
    std::vector<int64_t> dims;
    std::vector<grove::Dim> input_dims;
    int64_t elements = 1;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = in.ConsumeIntegralInRange(0, 5);
      dims.push_back(dim);
      elements *= dim;
      if (!weight && in.ConsumeIntegralInRange(0, 5) == 0) {
        const std::string symbol = absl::StrCat("s", v, "_", d);
        b.AddSymbol(symbol, dim, dim + in.ConsumeIntegralInRange(0, 3));
        input_dims.emplace_back(symbol);
      } else {
        input_dims.emplace_back(dim);
      }
    }
    if (verbose) {
      std::fprintf(stderr, "%s %s %s[%s]\n", weight ? "weight" : "input", name.c_str(),
                   std::string(grove::DTypeName(dtype)).c_str(), absl::StrJoin(dims, ",").c_str());
    }
    if (weight) {
      b.AddWeight(name, dtype, dims, WeightBytes(in, dtype, elements));
    } else {
      b.AddInput(name, dtype, input_dims);
    }
    values.push_back(name);
  }

  const int num_ops = in.ConsumeIntegralInRange(1, 3);
  std::vector<std::string> last_outputs;
  for (int op = 0; op < num_ops; ++op) {
    const std::string& type = types[in.ConsumeIntegralInRange<size_t>(0, types.size() - 1)];
    const grove::ir::OpDef* def = registry.Find(type);
    const int max_inputs = def->max_inputs < 0 ? def->min_inputs + 3 : def->max_inputs;
    const int num_inputs = in.ConsumeIntegralInRange(def->min_inputs, std::min(max_inputs, def->min_inputs + 3));
    std::vector<std::string> inputs;
    for (int i = 0; i < num_inputs; ++i) {
      const bool omit = i >= def->min_inputs && in.ConsumeIntegralInRange(0, 3) == 0;
      inputs.push_back(omit ? "" : values[in.ConsumeIntegralInRange<size_t>(0, values.size() - 1)]);
    }
    const int num_outputs =
        in.ConsumeIntegralInRange(def->min_outputs, std::min(def->max_outputs < 0 ? 3 : def->max_outputs, 3));
    std::vector<std::string> outputs;
    for (int o = 0; o < num_outputs; ++o) outputs.push_back(absl::StrCat("op", op, "_", o));
    std::vector<std::pair<std::string, AttrValue>> attrs;
    for (const grove::ir::AttrSpec& spec : def->attrs) {
      if (spec.kind == grove::ir::AttrKind::kSubgraph) continue;
      if (spec.required || in.ConsumeIntegralInRange(0, 2) == 0) attrs.emplace_back(spec.name, FuzzAttr(in, spec.kind));
    }
    if (verbose) {
      std::string a;
      for (const auto& [name, value] : attrs) {
        absl::StrAppend(&a, " ", name, "=");
        std::visit([&](const auto& v) { absl::StrAppend(&a, AttrText(v)); }, value);
      }
      std::fprintf(stderr, "op %d: %s(%s) -> %s%s\n", op, type.c_str(), absl::StrJoin(inputs, ", ").c_str(),
                   absl::StrJoin(outputs, ", ").c_str(), a.c_str());
    }
    b.AddOp(type, inputs, outputs, std::move(attrs));
    values.insert(values.end(), outputs.begin(), outputs.end());
    last_outputs = outputs;
  }
  for (const std::string& o : last_outputs) b.AddOutput(o);

  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return 0;
  absl::StatusOr<std::shared_ptr<const grove::Model>> model = grove::Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return 0;
  const std::vector<uint8_t> fill = in.ConsumeRemainingBytes();
  grove::fuzz::RunSmall(*model, fill);
  return 0;
}
