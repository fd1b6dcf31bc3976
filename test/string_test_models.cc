#include "test/string_test_models.h"

namespace grove::testing {

const Strs& LookupVocab() {
  static const Strs* vocab = new Strs{"<unk>", "héllo", "日本", ""};
  return *vocab;
}

absl::StatusOr<std::vector<uint8_t>> BuildStringLookup() {
  ModelBuilder b;
  b.AddSymbol("n", 1, 8);
  b.AddSymbol("m", 1, 8);
  b.AddInput("words", DType::kString, {"n"});
  b.AddInput("ids", DType::kI64, {"m"});
  b.AddStringWeight("vocab", {static_cast<int64_t>(LookupVocab().size())}, LookupVocab());
  b.AddStringWeight("target", {}, Strs{"日本"});
  b.AddStringWeight("star", {}, Strs{"★"});
  b.AddWeight("column_shape", DType::kI64, {2}, std::vector<int64_t>{-1, 1});
  b.AddOp("Gather", {"vocab", "ids"}, {"picked"});
  b.AddOp("Concat", {"words", "picked"}, {"joined"}, {{"axis", int64_t{0}}});
  b.AddOp("Equal", {"joined", "target"}, {"hit"});
  b.AddOp("Where", {"hit", "star", "joined"}, {"marked"});
  b.AddOp("Reshape", {"marked", "column_shape"}, {"column"});
  for (const char* out : {"picked", "joined", "hit", "column"}) b.AddOutput(out);
  return b.Finish();
}

LookupResult LookupReference(const Strs& words, const std::vector<int64_t>& ids) {
  LookupResult r;
  const int64_t v = static_cast<int64_t>(LookupVocab().size());
  for (int64_t i : ids) r.picked.push_back(LookupVocab()[i < 0 ? i + v : i]);
  r.joined = words;
  r.joined.insert(r.joined.end(), r.picked.begin(), r.picked.end());
  for (const std::string& s : r.joined) {
    r.hit.push_back(s == "日本" ? 1 : 0);
    r.column.push_back(s == "日本" ? "★" : s);
  }
  return r;
}

const Strs& LoopDigits() {
  static const Strs* digits = new Strs{"零", "一", "二", "三", "四", "五", "六", "七", "八", "九"};
  return *digits;
}

absl::StatusOr<std::vector<uint8_t>> BuildStringLoop() {
  ModelBuilder b;
  b.AddSymbol("k", 1, 4);
  b.AddInput("m", DType::kI64, {});
  b.AddInput("seed", DType::kString, {"k"});
  b.AddStringWeight("digits", {static_cast<int64_t>(LoopDigits().size())}, LoopDigits());
  b.AddStringWeight("dash", {1}, Strs{"—"});
  b.AddWeight("axis0", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddWeight("newest_at", DType::kI64, {}, std::vector<int64_t>{-1});

  const int grow = b.AddSubgraph("grow");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("go", DType::kBool, {});
  b.AddInput("acc", DType::kString, {});
  b.AddInput("list", ValueKind::kSequence, DType::kString);
  b.AddOp("Gather", {"digits", "i"}, {"digit"});
  b.AddOp("Unsqueeze", {"digit", "axis0"}, {"digit1"});
  b.AddOp("Concat", {"acc", "digit1"}, {"acc_next"}, {{"axis", int64_t{0}}});
  b.AddOp("SequenceInsert", {"list", "digit1"}, {"list_next"});
  b.AddOp("SequenceAt", {"list_next", "newest_at"}, {"newest"});
  b.AddOutput("go");
  b.AddOutput("acc_next");
  b.AddOutput("list_next");
  b.AddOutput("newest");

  // Every trip has the same shapes, so the same plan: the one-item list made
  // this trip replaces the last trip's, while `older` still holds the string
  // taken out of that one.
  const int shift = b.AddSubgraph("shift");
  b.AddInput("j", DType::kI64, {});
  b.AddInput("go2", DType::kBool, {});
  b.AddInput("older", DType::kString, {1});
  b.AddInput("held", DType::kString, {1});
  b.AddOp("Gather", {"digits", "j"}, {"digit_j"});
  b.AddOp("Unsqueeze", {"digit_j", "axis0"}, {"digit_j1"});
  b.AddOp("SequenceConstruct", {"digit_j1"}, {"fresh"});
  b.AddOp("SequenceAt", {"fresh", "newest_at"}, {"held_next"});
  b.AddOp("Identity", {"held"}, {"older_next"});
  b.AddOutput("go2");
  b.AddOutput("older_next");
  b.AddOutput("held_next");

  b.SetSubgraph(0);
  b.AddOp("SequenceEmpty", {}, {"empty"}, {{"dtype", int64_t{static_cast<int64_t>(DType::kString)}}});
  b.AddOp("Loop", {"m", "", "seed", "empty"}, {"grown", "list_out", "newest_all"}, {{"body", SubgraphRef{grow}}});
  b.AddOp("ConcatFromSequence", {"list_out"}, {"listed"}, {{"axis", int64_t{0}}});
  b.AddOp("Loop", {"m", "", "dash", "dash"}, {"older_out", "held_out"}, {{"body", SubgraphRef{shift}}});
  for (const char* out : {"grown", "listed", "newest_all", "older_out", "held_out"}) b.AddOutput(out);
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildStringIf() {
  ModelBuilder b;
  b.AddSymbol("n", 1, 8);
  b.AddInput("flag", DType::kBool, {});
  b.AddInput("words", DType::kString, {"n"});
  b.AddStringWeight("tail", {2}, Strs{"end", "终"});
  b.AddWeight("second", DType::kI64, {1}, std::vector<int64_t>{1});
  const int then_branch = b.AddSubgraph("append");
  b.AddOp("Concat", {"words", "tail"}, {"appended"}, {{"axis", int64_t{0}}});
  b.AddOutput("appended");
  const int else_branch = b.AddSubgraph("pick");
  b.AddOp("Gather", {"tail", "second"}, {"picked"});
  b.AddOutput("picked");
  b.SetSubgraph(0);
  b.AddOp("If", {"flag"}, {"y"},
          {{"then_branch", SubgraphRef{then_branch}}, {"else_branch", SubgraphRef{else_branch}}});
  b.AddOutput("y");
  return b.Finish();
}

Strs IfReference(bool flag, const Strs& words) {
  if (!flag) return {"终"};
  Strs out = words;
  out.push_back("end");
  out.push_back("终");
  return out;
}

absl::StatusOr<std::vector<uint8_t>> BuildStringSequence() {
  ModelBuilder b;
  b.AddSymbol("r", 0, 8);
  b.AddSymbol("n", 1, 8);
  b.AddInput("parts", ValueKind::kSequence, DType::kString, std::vector<Dim>{"r"});
  b.AddInput("words", DType::kString, {"n"});
  b.AddWeight("first", DType::kI64, {}, std::vector<int64_t>{0});
  b.AddWeight("last_at", DType::kI64, {}, std::vector<int64_t>{-1});
  b.AddOp("SequenceInsert", {"parts", "words", "first"}, {"s2"});
  b.AddOp("ConcatFromSequence", {"s2"}, {"cat"}, {{"axis", int64_t{0}}});
  b.AddOp("SequenceAt", {"s2", "last_at"}, {"last"});
  b.AddOp("SplitToSequence", {"cat"}, {"pieces"}, {{"axis", int64_t{0}}, {"keepdims", int64_t{0}}});
  for (const char* out : {"cat", "last", "s2", "pieces"}) b.AddOutput(out);
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildStringScan() {
  ModelBuilder b;
  b.AddSymbol("t", 1, 16);
  b.AddInput("s0", DType::kString, {1});
  b.AddInput("xs", DType::kString, {"t"});
  b.AddWeight("axis0", DType::kI64, {1}, std::vector<int64_t>{0});
  const int body = b.AddSubgraph("pair");
  b.AddInput("prev", DType::kString, {1});
  b.AddInput("x", DType::kString, {});
  b.AddOp("Unsqueeze", {"x", "axis0"}, {"x1"});
  b.AddOp("Concat", {"prev", "x1"}, {"pair"}, {{"axis", int64_t{0}}});
  b.AddOutput("x1");
  b.AddOutput("pair");
  b.SetSubgraph(0);
  b.AddOp("Scan", {"s0", "xs"}, {"last", "pairs"}, {{"body", SubgraphRef{body}}, {"num_scan_inputs", int64_t{1}}});
  b.AddOutput("last");
  b.AddOutput("pairs");
  return b.Finish();
}

Strs ScanPairsReference(const std::string& s0, const Strs& xs) {
  Strs pairs;
  std::string prev = s0;
  for (const std::string& x : xs) {
    pairs.push_back(prev);
    pairs.push_back(x);
    prev = x;
  }
  return pairs;
}

Strs StringsOf(const TensorView& view) {
  Strs out;
  const StringRef* p = view.as<const StringRef>();
  for (int64_t i = 0; i < view.num_elements(); ++i) out.emplace_back(p[i].view());
  return out;
}

}  // namespace grove::testing
