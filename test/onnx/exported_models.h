// The exported models under test/models/ and the trained Silero VAD under
// models/silero_vad/, with their reference cases (cases.txt) and the
// comparison every test of them uses. Shared by exported_models_test.cc (CPU)
// and capture_safe_test.cc (the emulated CUDA device).
//
// Tolerance: f32 outputs agree elementwise within |got - ref| <= 1e-4 * (1 + |ref|)
// (relative for magnitudes above 1, absolute below); integer and bool
// outputs exactly.
#ifndef GROVE_TEST_ONNX_EXPORTED_MODELS_H_
#define GROVE_TEST_ONNX_EXPORTED_MODELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grove/grove.h"
#include "grove/npy.h"
#include "tools/onnx/onnx_importer.h"

#ifndef GROVE_SOURCE_DIR
#error "GROVE_SOURCE_DIR must name the source tree (test/CMakeLists.txt defines it)"
#endif

namespace grove::testing {

namespace fs = std::filesystem;

inline constexpr double kTolerance = 1e-4;

inline fs::path SourceDir() { return fs::path(GROVE_SOURCE_DIR); }

struct ModelUnderTest {
  std::string name;
  fs::path onnx;      // the ONNX file
  fs::path testdata;  // cases.txt and the .npy files
};

inline void PrintTo(const ModelUnderTest& m, std::ostream* os) { *os << m.name << " (" << m.onnx.string() << ")"; }

// The models of `dir` (each DIR/NAME/model.onnx with its cases), by name.
inline std::vector<ModelUnderTest> ModelsIn(const fs::path& dir) {
  std::vector<ModelUnderTest> models;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) {
      models.push_back({e.path().filename().string(), e.path() / "model.onnx", e.path()});
    }
  }
  std::sort(models.begin(), models.end(),
            [](const ModelUnderTest& a, const ModelUnderTest& b) { return a.name < b.name; });
  return models;
}

// test/models (PyTorch's exports), then the Silero VAD.
inline std::vector<ModelUnderTest> ModelsUnderTest() {
  std::vector<ModelUnderTest> models = ModelsIn(SourceDir() / "test" / "models");
  const fs::path silero = SourceDir() / "models" / "silero_vad";
  models.push_back({"silero_vad", silero / "silero_vad.onnx", silero / "testdata"});
  return models;
}

// The attention fixtures (test/onnx/attention_models: onnxruntime's outputs
// for small exports of SDPA, grouped-query heads and a KV-cache step).
inline std::vector<ModelUnderTest> AttentionFixtures() {
  return ModelsIn(SourceDir() / "test" / "onnx" / "attention_models");
}

struct Case {
  std::string name;
  std::vector<Tensor> inputs;
  std::vector<std::string> output_files;
  std::vector<Tensor> outputs;
};

inline absl::StatusOr<std::vector<Case>> ReadCases(const fs::path& dir) {
  std::ifstream file(dir / "cases.txt");
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", (dir / "cases.txt").string()));
  std::vector<Case> cases;
  std::string line;
  for (int line_no = 1; std::getline(file, line); ++line_no) {
    line = std::string(absl::StripAsciiWhitespace(line));
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat((dir / "cases.txt").string(), ":", line_no, ": want NAME INPUTS OUTPUTS"));
    }
    Case c;
    c.name = fields[0];
    for (absl::string_view f : absl::StrSplit(fields[1], ',')) {
      absl::StatusOr<Tensor> t = ReadNpy((dir / std::string(f)).string());
      if (!t.ok()) return t.status();
      c.inputs.push_back(*std::move(t));
    }
    for (absl::string_view f : absl::StrSplit(fields[2], ',')) {
      absl::StatusOr<Tensor> t = ReadNpy((dir / std::string(f)).string());
      if (!t.ok()) return t.status();
      c.output_files.emplace_back(f);
      c.outputs.push_back(*std::move(t));
    }
    cases.push_back(std::move(c));
  }
  if (cases.empty()) return absl::InvalidArgumentError(absl::StrCat((dir / "cases.txt").string(), ": no cases"));
  return cases;
}

inline std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

inline double ElementAsDouble(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32:
      return t.as<const float>()[i];
    case DType::kF64:
      return t.as<const double>()[i];
    case DType::kI64:
      return static_cast<double>(t.as<const int64_t>()[i]);
    case DType::kI32:
      return t.as<const int32_t>()[i];
    case DType::kI8:
      return t.as<const int8_t>()[i];
    case DType::kU8:
      return t.as<const uint8_t>()[i];
    case DType::kBool:
      return t.as<const uint8_t>()[i] != 0 ? 1.0 : 0.0;
    default:
      return std::nan("");
  }
}

// Empty when `got` matches `want`; otherwise what differs, with the worst
// element. `worst_error` grows to the largest |got - want| / (1 + |want|).
inline std::string Compare(const TensorView& got, const TensorView& want, double* worst_error) {
  if (got.dtype != want.dtype) {
    return absl::StrCat("dtype ", DTypeName(got.dtype), ", want ", DTypeName(want.dtype));
  }
  if (got.shape != want.shape)
    return absl::StrCat("shape ", ShapeString(got.shape), ", want ", ShapeString(want.shape));
  const bool exact = !(got.dtype == DType::kF32 || got.dtype == DType::kF64);
  int64_t worst = -1;
  double worst_excess = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = ElementAsDouble(got, i);
    const double w = ElementAsDouble(want, i);
    const double allowed = exact ? 0.0 : kTolerance * (1.0 + std::fabs(w));
    const double err = std::fabs(g - w);
    *worst_error = std::max(*worst_error, err / (1.0 + std::fabs(w)));
    if (!(err <= allowed)) {  // NaN fails too
      ++bad;
      const double excess = std::isnan(err) ? INFINITY : err / std::max(allowed, 1e-30);
      if (worst < 0 || excess > worst_excess) {
        worst = i;
        worst_excess = excess;
      }
    }
  }
  if (bad == 0) return "";
  return absl::StrFormat("%d of %d elements off; worst at flat index %d: got %.9g, want %.9g", bad,
                         want.num_elements(), worst, ElementAsDouble(got, worst), ElementAsDouble(want, worst));
}

inline absl::StatusOr<std::shared_ptr<const Model>> Import(const fs::path& onnx, onnx_import::ImportReport* report) {
  absl::StatusOr<std::vector<uint8_t>> bytes = onnx_import::ImportOnnxFile(onnx.string(), {}, report);
  if (!bytes.ok()) return bytes.status();
  return Model::LoadFromBuffer(*bytes);
}

}  // namespace grove::testing

#endif  // GROVE_TEST_ONNX_EXPORTED_MODELS_H_
