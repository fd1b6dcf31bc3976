// Op definitions of the text group: TfIdfVectorizer (ONNX opset 9, its only
// version) over integer tokens. The input is [C] or [N, C] of i32/i64; the
// output is f32 [max(ngram_indexes) + 1] or [N, max(ngram_indexes) + 1].
// String pools are refused (grove has no string dtype); the attributes are
// checked by tfidf_params.h, which the CPU kernel shares.
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/tfidf_params.h"

namespace grove::ir {
namespace {

constexpr DType kTokenDTypes[] = {DType::kI32, DType::kI64};

absl::Status InferTfIdfVectorizer(ShapeContext& ctx) {
  absl::StatusOr<TfIdfParams> params = ReadTfIdfParams(ctx.attrs());
  if (!params.ok()) return ctx.Error(params.status().message());
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kTokenDTypes); !s.ok()) return s;
  const SymShape& x = ctx.input_shape(0);
  if (x.size() != 1 && x.size() != 2) {
    return ctx.Error(absl::StrCat(InputName(0, "X"), " has shape ", ShapeString(ctx, x),
                                  "; TfIdfVectorizer needs [C] or [N, C]"));
  }
  SymShape out;
  if (x.size() == 2) out.push_back(x[0]);
  out.push_back(SymDim(params->output_size));
  ctx.SetOutput(0, DType::kF32, std::move(out));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterTextOps(OpRegistry& registry) {
  using K = AttrKind;
  return registry.Register(MakeOpDef("TfIdfVectorizer", 1, 1,
                                     {{"max_gram_length", K::kInt, true},
                                      {"min_gram_length", K::kInt, true},
                                      {"max_skip_count", K::kInt, true},
                                      {"mode", K::kString, true},
                                      {"ngram_counts", K::kInts, true},
                                      {"ngram_indexes", K::kInts, true},
                                      {"pool_int64s", K::kInts},
                                      {"pool_strings", K::kStrings},
                                      {"weights", K::kFloats}},
                                     &InferTfIdfVectorizer));
}

}  // namespace grove::ir
