// One ONNX backend test case (a directory with model.onnx and
// test_data_set_*/{input,output}_*.pb) run through the importer and a CPU
// session, compared with ONNX's backend tolerances.
//
//   grove::conformance::CaseResult r = grove::conformance::RunCase("/usr/share/.../node/test_add");
//   if (r.outcome == grove::conformance::Outcome::kPassed) ...
//
// Every error is a value: a case that grove cannot import or run is reported,
// never thrown.
#ifndef GROVE_TEST_CONFORMANCE_ONNX_TEST_CASE_H_
#define GROVE_TEST_CONFORMANCE_ONNX_TEST_CASE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"

namespace grove::conformance {

// ONNX's backend test tolerances: |got - want| <= kAtol + kRtol * |want|.
inline constexpr double kRtol = 1e-3;
// bf16 outputs: one bf16 epsilon (2^-7). Below that, a result could differ
// from the reference only by how its one rounding to bf16 was done: ONNX's
// 1.12 data truncates (test_cast_FLOAT_to_BFLOAT16), ONNX since 1.14 and
// grove round to nearest even; opset 13's Cast leaves it open. (ONNX's own
// runner compares those stored uint16 bits as integers at rtol 1e-3.)
inline constexpr double kBf16Rtol = 1.0 / 128;
inline constexpr double kAtol = 1e-7;

enum class Outcome { kPassed, kFailed, kUnsupported };
absl::string_view OutcomeName(Outcome outcome);

struct CaseResult {
  Outcome outcome = Outcome::kFailed;
  std::string op;       // the op the case tests, for grouping
  std::string message;  // why it failed or is unsupported; empty when passed
};

struct CaseOptions {
  // When set, a model below opset 11 is first converted to this opset with
  // ONNX's own version converter (the importer refuses old opsets); the
  // results then measure the converter too.
  int upgrade_opset = 0;
};

// Runs the case in `case_dir` (every data set in it).
CaseResult RunCase(const std::string& case_dir, const CaseOptions& options = {});

// The op a case tests: the single op of its graph, else the ONNX op whose
// name starts the directory name (test_reduce_sum_... -> ReduceSum); an
// "_expanded" case takes its unexpanded sibling's op.
std::string CaseOp(const std::string& case_dir);

// Compares one output against the expected tensor: equal dtype and shape,
// then values within the tolerances (floats; NaN equals NaN) or exactly.
absl::Status CompareTensors(absl::string_view name, const TensorView& got, const TensorView& want);
// Same kind, presence and item count, then CompareTensors on each tensor.
absl::Status CompareValues(absl::string_view name, const Value& got, const Value& want);

}  // namespace grove::conformance

#endif  // GROVE_TEST_CONFORMANCE_ONNX_TEST_CASE_H_
