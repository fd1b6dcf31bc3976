// Strings through the C++ API: builds (with ModelBuilder) a small text
// front end, runs it on sentences of different lengths in one session, and
// reads the string outputs. A string input is a TensorView over an array of
// grove::StringRef; the strings of Run's outputs belong to the session until
// its next run (Tensor::CopyOf keeps a copy).
//
//   words string[n] -> StringNormalizer (lower case, stopwords dropped) -> tokens string[m]
//   tokens -> TfIdfVectorizer (counts of a string vocabulary)          -> counts f32[3]
//   counts -> Cast to string                                           -> text string[3]
//
//   example_text
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "grove/grove.h"

namespace {

const std::vector<std::string> kVocabulary = {"graph", "kernel", "grove"};

absl::StatusOr<std::shared_ptr<const grove::Model>> BuildModel() {
  using grove::DType;
  grove::ModelBuilder b;
  b.AddSymbol("n", 1, 1024);
  b.AddInput("words", DType::kString, {"n"});
  b.AddOp("StringNormalizer", {"words"}, {"tokens"},
          {{"case_change_action", std::string("LOWER")},
           {"stopwords", std::vector<std::string>{"the", "a", "of"}}});
  b.AddOp("TfIdfVectorizer", {"tokens"}, {"counts"},
          {{"mode", std::string("TF")},
           {"min_gram_length", int64_t{1}},
           {"max_gram_length", int64_t{1}},
           {"max_skip_count", int64_t{0}},
           {"ngram_counts", std::vector<int64_t>{0}},
           {"ngram_indexes", std::vector<int64_t>{0, 1, 2}},
           {"pool_strings", kVocabulary}});
  b.AddOp("Cast", {"counts"}, {"text"}, {{"to", int64_t{static_cast<int64_t>(DType::kString)}}});
  b.AddOutput("tokens");
  b.AddOutput("counts");
  b.AddOutput("text");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  return grove::Model::LoadFromBuffer(*bytes);
}

std::string Join(const grove::TensorView& strings) {
  std::string out;
  for (int64_t i = 0; i < strings.num_elements(); ++i) {
    if (i > 0) out += ' ';
    out += std::string(strings.as<const grove::StringRef>()[i].view());
  }
  return out;
}

}  // namespace

int main() {
  absl::StatusOr<std::shared_ptr<const grove::Model>> model = BuildModel();
  if (!model.ok()) {
    std::fprintf(stderr, "cannot build the model: %s\n", model.status().ToString().c_str());
    return 1;
  }
  grove::SessionOptions options;
  options.device = grove::Device::kCpu;
  absl::StatusOr<std::unique_ptr<grove::Session>> session = grove::Session::Create(*model, options);
  if (!session.ok()) {
    std::fprintf(stderr, "cannot create a session: %s\n", session.status().ToString().c_str());
    return 1;
  }
  const std::vector<std::vector<std::string>> sentences = {
      {"The", "Grove", "of", "a", "Graph"},
      {"Kernel", "GRAPH", "graph", "the", "Grove", "Kernel", "kernel"},
  };
  grove::Tensor first_tokens;
  for (const std::vector<std::string>& sentence : sentences) {
    // The input refers to the caller's strings; the run copies what it keeps.
    std::vector<grove::StringRef> words(sentence.begin(), sentence.end());
    grove::TensorView in(grove::DType::kString, {static_cast<int64_t>(words.size())}, words.data());
    absl::StatusOr<std::vector<grove::TensorView>> out = (*session)->Run({in});
    if (!out.ok()) {
      std::fprintf(stderr, "run failed: %s\n", out.status().ToString().c_str());
      return 1;
    }
    const grove::TensorView& tokens = (*out)[0];
    const float* counts = (*out)[1].as<const float>();
    std::printf("%zu words -> %lld tokens: %s\n", sentence.size(), static_cast<long long>(tokens.num_elements()),
                Join(tokens).c_str());
    for (size_t k = 0; k < kVocabulary.size(); ++k) {
      std::printf("  %-6s %g (as text \"%s\")\n", kVocabulary[k].c_str(), counts[k],
                  std::string((*out)[2].as<const grove::StringRef>()[k].view()).c_str());
    }
    // An owned copy outlives the next run; the views do not.
    if (first_tokens.dtype() == grove::DType::kUnknown) first_tokens = grove::Tensor::CopyOf(tokens).value();
  }
  std::printf("first sentence's tokens, kept: %s\n", Join(first_tokens.view()).c_str());
  const grove::SessionStats stats = (*session)->stats();
  std::printf("plans created %lld, plan cache hits %lld\nOK\n", static_cast<long long>(stats.plans_created),
              static_cast<long long>(stats.plan_cache_hits));
  return 0;
}
