// Running one ONNX backend test case: import in memory, run every data set
// on a CPU session, compare. Unimplemented statuses (an op, attribute, dtype
// or opset grove lacks) make a case "unsupported"; anything else that goes
// wrong makes it "failed".
#include "test/conformance/onnx_test_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx-data_pb.h"
#include "onnx/version_converter/convert.h"
#include "tools/onnx/onnx_importer.h"
#include "tools/onnx/onnx_tensor.h"

namespace grove::conformance {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `want` is the dtype the model declares there (kUnknown if not known).
absl::StatusOr<Tensor> ReadTensorFile(const fs::path& path, DType want = DType::kUnknown) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  ::onnx::TensorProto proto;
  if (!proto.ParseFromString(*bytes)) {
    // Sequence, map and optional data are other messages; grove has none.
    return absl::UnimplementedError(absl::StrCat(path.filename().string(), " is not a TensorProto"));
  }
  // NumPy has no bfloat16, so the test generators store bf16 data as its
  // bits in a UINT16 tensor.
  if (want == DType::kBF16 && proto.data_type() == ::onnx::TensorProto::UINT16) {
    proto.set_data_type(::onnx::TensorProto::BFLOAT16);
  }
  absl::StatusOr<Tensor> t = onnx_import::DecodeTensor(proto, path.parent_path().string());
  if (!t.ok())
    return absl::Status(t.status().code(), absl::StrCat(path.filename().string(), ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::vector<Tensor>> DecodeTensors(const google::protobuf::RepeatedPtrField<::onnx::TensorProto>& protos,
                                                  const fs::path& path) {
  std::vector<Tensor> items;
  for (const ::onnx::TensorProto& t : protos) {
    absl::StatusOr<Tensor> item = onnx_import::DecodeTensor(t, path.parent_path().string());
    if (!item.ok()) {
      return absl::Status(item.status().code(), absl::StrCat(path.filename().string(), ": ", item.status().message()));
    }
    items.push_back(*std::move(item));
  }
  return items;
}

// A data file of a value of `kind`: a TensorProto, a SequenceProto or an
// OptionalProto. `want` is the declared dtype (of the tensors).
absl::StatusOr<Value> ReadValueFile(const fs::path& path, ValueKind kind, DType want) {
  if (kind == ValueKind::kTensor) {
    absl::StatusOr<Tensor> t = ReadTensorFile(path, want);
    if (!t.ok()) return t.status();
    return Value(*std::move(t));
  }
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  auto sequence_of = [&](const ::onnx::SequenceProto& seq) -> absl::StatusOr<Value> {
    if (seq.elem_type() != ::onnx::SequenceProto::TENSOR && seq.elem_type() != ::onnx::SequenceProto::UNDEFINED) {
      return absl::UnimplementedError(absl::StrCat(path.filename().string(), ": a sequence of non-tensors"));
    }
    absl::StatusOr<std::vector<Tensor>> items = DecodeTensors(seq.tensor_values(), path);
    if (!items.ok()) return items.status();
    const DType dtype = !items->empty() ? (*items)[0].dtype() : want;
    return Value::Sequence(dtype, *std::move(items));
  };
  if (kind == ValueKind::kSequence) {
    ::onnx::SequenceProto seq;
    if (!seq.ParseFromString(*bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(path.filename().string(), " is not a SequenceProto"));
    }
    return sequence_of(seq);
  }
  ::onnx::OptionalProto opt;
  if (!opt.ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path.filename().string(), " is not an OptionalProto"));
  }
  if (opt.has_tensor_value()) {
    absl::StatusOr<Tensor> t = onnx_import::DecodeTensor(opt.tensor_value(), path.parent_path().string());
    if (!t.ok()) return t.status();
    return Value::Some(Value(*std::move(t)));
  }
  if (opt.has_sequence_value()) {
    absl::StatusOr<Value> seq = sequence_of(opt.sequence_value());
    if (!seq.ok()) return seq.status();
    return Value::Some(*std::move(seq));
  }
  return Value::None(kind, want);
}

// input_0.pb, input_1.pb, ... in index order (input_10 after input_9).
std::vector<fs::path> NumberedFiles(const fs::path& dir, absl::string_view prefix) {
  std::vector<std::pair<int, fs::path>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, ".pb")) continue;
    int index = 0;
    if (!absl::SimpleAtoi(name.substr(prefix.size(), name.size() - prefix.size() - 3), &index)) continue;
    found.emplace_back(index, e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [i, p] : found) out.push_back(std::move(p));
  return out;
}

std::vector<fs::path> DataSets(const fs::path& case_dir) {
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(case_dir, ec)) {
    if (e.is_directory() && absl::StartsWith(e.path().filename().string(), "test_data_set_"))
      sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  return sets;
}

double HalfToDouble(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) {
    v = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 31) {
    v = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<double>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  }
  return sign ? -v : v;
}

double Bf16ToDouble(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

double FloatAt(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32:
      return t.as<const float>()[i];
    case DType::kF64:
      return t.as<const double>()[i];
    case DType::kF16:
      return HalfToDouble(t.as<const uint16_t>()[i]);
    case DType::kBF16:
      return Bf16ToDouble(t.as<const uint16_t>()[i]);
    default:
      return 0;
  }
}

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

CaseResult Result(Outcome outcome, std::string op, std::string message) {
  return CaseResult{outcome, std::move(op), std::move(message)};
}

Outcome OutcomeOf(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnimplemented ? Outcome::kUnsupported : Outcome::kFailed;
}

// Op types of a model's main graph, Constant left out (tests feed constants
// to the op they test).
std::set<std::string> GraphOps(const fs::path& model_path) {
  std::set<std::string> ops;
  absl::StatusOr<std::string> bytes = ReadFile(model_path);
  if (!bytes.ok()) return ops;
  ::onnx::ModelProto model;
  if (!model.ParseFromString(*bytes)) return ops;
  for (const ::onnx::NodeProto& n : model.graph().node()) {
    if (n.op_type() != "Constant") ops.insert(n.op_type());
  }
  return ops;
}

// ONNX op names keyed by their lower-case spelling without underscores.
const std::vector<std::pair<std::string, std::string>>& OpNamesByKey() {
  static const auto* names = [] {
    std::set<std::string> seen;
    auto* out = new std::vector<std::pair<std::string, std::string>>;
    for (const ::onnx::OpSchema& s : ::onnx::OpSchemaRegistry::get_all_schemas()) {
      if (!seen.insert(s.Name()).second) continue;
      out->emplace_back(absl::AsciiStrToLower(s.Name()), s.Name());
    }
    return out;
  }();
  return *names;
}

std::string OpFromName(const std::string& case_name) {
  std::string stem = case_name;
  for (absl::string_view prefix : {"test_operator_", "test_"}) {
    if (absl::StartsWith(stem, prefix)) {
      stem = stem.substr(prefix.size());
      break;
    }
  }
  const std::string key = absl::AsciiStrToLower(absl::StrReplaceAll(stem, {{"_", ""}}));
  std::string best;
  size_t best_len = 0;
  for (const auto& [lower, name] : OpNamesByKey()) {
    if (lower.size() > best_len && absl::StartsWith(key, lower)) {
      best = name;
      best_len = lower.size();
    }
  }
  if (!best.empty()) return best;
  // Abbreviations the ONNX test generators use.
  if (absl::StartsWith(stem, "nllloss")) return "NegativeLogLikelihoodLoss";
  if (absl::StartsWith(stem, "sce")) return "SoftmaxCrossEntropyLoss";
  return stem.substr(0, stem.find('_'));
}

}  // namespace

absl::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPassed:
      return "passed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kUnsupported:
      return "unsupported";
  }
  return "?";
}

std::string CaseOp(const std::string& case_dir) {
  fs::path dir(case_dir);
  std::string name = dir.filename().string();
  constexpr absl::string_view kExpanded = "_expanded";
  if (absl::EndsWith(name, kExpanded)) {
    const fs::path sibling = dir.parent_path() / name.substr(0, name.size() - kExpanded.size());
    std::error_code ec;
    if (fs::exists(sibling / "model.onnx", ec)) {
      dir = sibling;
      name = sibling.filename().string();
    }
  }
  const std::set<std::string> ops = GraphOps(dir / "model.onnx");
  if (ops.size() == 1) return *ops.begin();
  return OpFromName(name);
}

absl::Status CompareValues(absl::string_view name, const Value& got, const Value& want) {
  if (got.kind() != want.kind() || got.has_value() != want.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output '", name, "' is ", got.DebugString(), ", expected ", want.DebugString()));
  }
  if (!got.has_value()) return absl::OkStatus();
  if (!got.is_sequence()) return CompareTensors(name, got.tensor().view(), want.tensor().view());
  if (got.items().size() != want.items().size()) {
    return absl::InvalidArgumentError(absl::StrCat("output '", name, "' has ", got.items().size(),
                                                   " items, expected ", want.items().size()));
  }
  for (size_t k = 0; k < got.items().size(); ++k) {
    if (absl::Status s = CompareTensors(absl::StrCat(name, "[", k, "]"), got.items()[k].view(), want.items()[k].view());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CompareTensors(absl::string_view name, const TensorView& got, const TensorView& want) {
  if (got.dtype != want.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("output '", name, "' is ", DTypeName(got.dtype), ", expected ", DTypeName(want.dtype)));
  }
  if (got.shape != want.shape) {
    return absl::InvalidArgumentError(absl::StrCat("output '", name, "' has shape ", ShapeText(got.shape),
                                                   ", expected ", ShapeText(want.shape)));
  }
  const int64_t n = want.num_elements();
  int64_t mismatches = 0, first = -1;
  double first_got = 0, first_want = 0, max_diff = 0;
  const double rtol = want.dtype == DType::kBF16 ? kBf16Rtol : kRtol;
  if (IsFloat(want.dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      const double g = FloatAt(got, i), w = FloatAt(want, i);
      bool ok;
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (std::isinf(w) || std::isinf(g)) {
        ok = g == w;
      } else {
        const double diff = std::fabs(g - w);
        ok = diff <= kAtol + rtol * std::fabs(w);
        if (!ok) max_diff = std::max(max_diff, diff);
      }
      if (!ok && mismatches++ == 0) {
        first = i;
        first_got = g;
        first_want = w;
      }
    }
    if (mismatches == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "output '%s': %d of %d values differ beyond rtol %g atol %g (max |diff| %g); first at flat index %d: got "
        "%.9g, expected %.9g",
        std::string(name), mismatches, n, rtol, kAtol, max_diff, first, first_got, first_want));
  }
  if (want.dtype == DType::kString) {
    const StringRef* gs = got.as<const StringRef>();
    const StringRef* ws = want.as<const StringRef>();
    for (int64_t i = 0; i < n; ++i) {
      if (gs[i].view() != ws[i].view() && mismatches++ == 0) first = i;
    }
    if (mismatches == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "output '", name, "': ", mismatches, " of ", n, " strings differ (exact compare); first at flat index ",
        first, ": got \"", absl::Utf8SafeCHexEscape(gs[first].view()), "\", expected \"",
        absl::Utf8SafeCHexEscape(ws[first].view()), "\""));
  }
  const size_t size = DTypeSize(want.dtype);
  const auto* g = static_cast<const uint8_t*>(got.data);
  const auto* w = static_cast<const uint8_t*>(want.data);
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(g + i * size, w + i * size, size) != 0 && mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return absl::OkStatus();
  auto as_int = [&](const uint8_t* p) -> int64_t {
    switch (want.dtype) {
      case DType::kI64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        return v;
      }
      case DType::kI32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      case DType::kI8:
        return static_cast<int8_t>(*p);
      default:
        return *p;
    }
  };
  return absl::InvalidArgumentError(absl::StrCat(
      "output '", name, "': ", mismatches, " of ", n, " values differ (exact compare); first at flat index ",
      first, ": got ", as_int(g + first * size), ", expected ", as_int(w + first * size)));
}

CaseResult RunCase(const std::string& case_dir, const CaseOptions& case_options) {
  const fs::path dir(case_dir);
  std::string op = CaseOp(case_dir);
  absl::StatusOr<std::string> bytes = ReadFile(dir / "model.onnx");
  if (!bytes.ok()) return Result(Outcome::kFailed, op, std::string(bytes.status().message()));
  absl::StatusOr<::onnx::ModelProto> model = onnx_import::ParseOnnxModel(*bytes, "model.onnx");
  if (!model.ok()) return Result(Outcome::kFailed, op, std::string(model.status().message()));

  if (case_options.upgrade_opset > 0) {
    int opset = -1;
    for (const auto& o : model->opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
    }
    if (opset >= 0 && opset < onnx_import::kMinOpset) {
      try {
        *model = ::onnx::version_conversion::ConvertVersion(*model, case_options.upgrade_opset);
      } catch (const std::exception& e) {
        return Result(Outcome::kUnsupported, op,
                      absl::StrCat("converting opset ", opset, " to ", case_options.upgrade_opset,
                                   " with ONNX's version converter failed: ", e.what()));
      }
    }
  }

  const std::vector<fs::path> sets = DataSets(dir);
  if (sets.empty()) return Result(Outcome::kFailed, op, "no test_data_set_* directories");

  // Inputs the model declares without a shape take their rank from the
  // first data set; their dims become symbols wide enough for any test.
  onnx_import::ImportOptions options;
  options.default_dim_min = 0;
  options.default_dim_max = int64_t{1} << 31;
  absl::flat_hash_set<std::string> initializers;
  for (const auto& t : model->graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> input_names;
  for (const auto& in : model->graph().input()) {
    if (!initializers.contains(in.name())) input_names.push_back(in.name());
  }
  const std::vector<fs::path> first_inputs = NumberedFiles(sets[0], "input_");
  for (size_t i = 0; i < input_names.size() && i < first_inputs.size(); ++i) {
    const auto& in = model->graph().input();
    auto it = std::find_if(in.begin(), in.end(), [&](const auto& v) { return v.name() == input_names[i]; });
    if (it->type().has_tensor_type() && !it->type().tensor_type().has_shape()) {
      absl::StatusOr<Tensor> t = ReadTensorFile(first_inputs[i]);
      if (t.ok()) options.input_ranks[input_names[i]] = static_cast<int>(t->shape().size());
    }
  }

  absl::StatusOr<std::vector<uint8_t>> grove_model =
      onnx_import::ImportOnnxModel(*model, dir.string(), options, nullptr);
  if (!grove_model.ok()) {
    return Result(OutcomeOf(grove_model.status()), op, absl::StrCat("import: ", grove_model.status().message()));
  }
  absl::StatusOr<std::shared_ptr<const Model>> loaded = Model::LoadFromBuffer(*grove_model);
  if (!loaded.ok())
    return Result(OutcomeOf(loaded.status()), op, absl::StrCat("load: ", loaded.status().message()));
  SessionOptions so;
  so.device = Device::kCpu;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*loaded, so);
  if (!session.ok()) return Result(Outcome::kFailed, op, absl::StrCat("session: ", session.status().message()));

  for (const fs::path& set : sets) {
    const std::string where = set.filename().string();
    std::vector<Value> inputs;
    const std::vector<fs::path> input_files = NumberedFiles(set, "input_");
    for (size_t i = 0; i < input_files.size(); ++i) {
      const std::vector<TensorInfo>& declared = (*loaded)->inputs();
      absl::StatusOr<Value> v =
          i < declared.size() ? ReadValueFile(input_files[i], declared[i].kind, declared[i].dtype)
                              : ReadValueFile(input_files[i], ValueKind::kTensor, DType::kUnknown);
      if (!v.ok()) return Result(OutcomeOf(v.status()), op, absl::StrCat(where, ": ", v.status().message()));
      inputs.push_back(*std::move(v));
    }
    if (inputs.size() != (*loaded)->inputs().size()) {
      return Result(
          Outcome::kFailed, op,
          absl::StrCat(where, ": gives ", inputs.size(), " inputs, the model takes ", (*loaded)->inputs().size()));
    }
    absl::StatusOr<std::vector<Value>> outs = (*session)->RunValues(inputs);
    if (!outs.ok())
      return Result(OutcomeOf(outs.status()), op, absl::StrCat(where, ": run: ", outs.status().message()));
    const std::vector<fs::path> expected = NumberedFiles(set, "output_");
    if (expected.size() != outs->size()) {
      return Result(
          Outcome::kFailed, op,
          absl::StrCat(where, ": the model gives ", outs->size(), " outputs, the test expects ", expected.size()));
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      const Value& got = (*outs)[i];
      absl::StatusOr<Value> want = ReadValueFile(expected[i], got.kind(), got.dtype());
      if (!want.ok())
        return Result(OutcomeOf(want.status()), op, absl::StrCat(where, ": ", want.status().message()));
      const std::string& name = (*loaded)->outputs()[i].name;
      if (absl::Status s = CompareValues(name, got, *want); !s.ok()) {
        return Result(Outcome::kFailed, op, absl::StrCat(where, ": ", s.message()));
      }
    }
  }
  return Result(Outcome::kPassed, op, "");
}

}  // namespace grove::conformance
