// Op definitions of the text group: StringNormalizer (opset 10) and
// TfIdfVectorizer (ONNX opset 9, its only version) over integer tokens. The input is [C] or [N, C] of i32/i64; the
// output is f32 [max(ngram_indexes) + 1] or [N, max(ngram_indexes) + 1].
// The attributes are checked by tfidf_params.h, which the CPU kernel shares.
#include <string>
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
  static constexpr DType kStringTokens[] = {DType::kString};
  if (absl::Status s = CheckInputDType(ctx, 0, "X", params->string_pool ? absl::Span<const DType>(kStringTokens)
                                                                        : absl::Span<const DType>(kTokenDTypes));
      !s.ok()) {
    return s;
  }
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

// StringNormalizer (opset 10): [C] or [1, C] strings in, the same rank out
// with the stopwords removed, so the last dim is known only when run.
absl::Status InferStringNormalizer(ShapeContext& ctx) {
  static constexpr DType kStrings[] = {DType::kString};
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kStrings); !s.ok()) return s;
  const std::string action = ctx.attrs().GetString("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER") {
    return ctx.Error(absl::StrCat("attribute case_change_action is '", action, "'; expected NONE, LOWER or UPPER"));
  }
  bool case_sensitive;
  if (absl::Status s = ReadBoolAttr(ctx, "is_case_sensitive", 0, &case_sensitive); !s.ok()) return s;
  const SymShape& x = ctx.input_shape(0);
  if (x.size() == 1) {
    ctx.SetOutput(0, DType::kString, {SymDim::Unknown()});
    return absl::OkStatus();
  }
  if (x.size() != 2 || (x[0].is_const() && x[0].value() != 1)) {
    return ctx.Error(absl::StrCat(InputName(0, "X"), " has shape ", ShapeString(ctx, x),
                                  "; StringNormalizer needs [C] or [1, C]"));
  }
  ctx.SetOutput(0, DType::kString, {SymDim(1), SymDim::Unknown()});
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterTextOps(OpRegistry& registry) {
  using K = AttrKind;
  OpDef normalizer = MakeOpDef("StringNormalizer", 1, 1,
                               {{"case_change_action", K::kString},
                                {"is_case_sensitive", K::kInt},
                                {"locale", K::kString},
                                {"stopwords", K::kStrings}},
                               &InferStringNormalizer);
  normalizer.kernel_allocates_outputs = true;  // how many stopwords go is data
  if (absl::Status s = registry.Register(std::move(normalizer)); !s.ok()) return s;
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
