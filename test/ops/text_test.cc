// TfIdfVectorizer against a naive reference written here (every pool n-gram
// compared with every window of the row), the ONNX examples, the attribute
// checks, and shape inference on symbolic inputs.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;

struct TfIdf {
  int64_t min_gram = 1, max_gram = 2, max_skip = 0;
  std::string mode = "TF";
  Ints counts, indexes, pool;
  std::vector<double> weights;

  Attrs ToAttrs() const {
    Attrs a = {{"min_gram_length", min_gram}, {"max_gram_length", max_gram}, {"max_skip_count", max_skip},
               {"mode", mode},           {"ngram_counts", counts},      {"ngram_indexes", indexes},
               {"pool_int64s", pool}};
    if (!weights.empty()) a.push_back({"weights", weights});
    return a;
  }
};

// Naive reference: for each pool n-gram (last listing wins) and each window of
// the row with a skip distance allowed for its length, compare token by token.
Floats Reference(const TfIdf& t, const Ints& x, int64_t rows, int64_t c) {
  const int64_t out_size = *std::max_element(t.indexes.begin(), t.indexes.end()) + 1;
  struct Gram {
    Ints tokens;
    int64_t index;
  };
  std::vector<Gram> grams;
  int64_t id = 0;
  for (size_t s = 0; s < t.counts.size(); ++s) {
    const int64_t n = static_cast<int64_t>(s) + 1;
    const int64_t end = s + 1 < t.counts.size() ? t.counts[s + 1] : static_cast<int64_t>(t.pool.size());
    for (int64_t at = t.counts[s]; at < end; at += n, ++id) {
      if (n < t.min_gram || n > t.max_gram) continue;
      Ints tokens(t.pool.begin() + at, t.pool.begin() + at + n);
      // A later listing of the same n-gram replaces the earlier one.
      for (Gram& g : grams) {
        if (g.tokens == tokens) g.tokens.clear();
      }
      grams.push_back({tokens, t.indexes[id]});
    }
  }
  Floats out(rows * out_size, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> count(out_size, 0);
    for (const Gram& g : grams) {
      const int64_t n = static_cast<int64_t>(g.tokens.size());
      if (n == 0) continue;
      const int64_t max_d = n == 1 ? 1 : t.max_skip + 1;
      for (int64_t d = 1; d <= max_d; ++d) {
        for (int64_t i = 0; i + (n - 1) * d < c; ++i) {
          bool match = true;
          for (int64_t k = 0; k < n; ++k) match = match && x[r * c + i + k * d] == g.tokens[k];
          if (match) ++count[g.index];
        }
      }
    }
    for (int64_t j = 0; j < out_size; ++j) {
      const double w = t.weights.empty() ? 1.0 : t.weights[j];
      float v = static_cast<float>(count[j]);
      if (t.mode == "IDF") v = count[j] > 0 ? static_cast<float>(w) : 0.0f;
      if (t.mode == "TFIDF") v = static_cast<float>(count[j] * w);
      out[r * out_size + j] = v;
    }
  }
  return out;
}

template <typename T>
Floats RunTfIdf(const TfIdf& t, DType dtype, const Shape& shape, const Ints& x, Shape* out_shape = nullptr) {
  std::vector<T> typed(x.begin(), x.end());
  Tensor in = MakeTensor<T>(dtype, shape, typed);
  auto out = RunOp("TfIdfVectorizer", {&in}, t.ToAttrs());
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  if (out_shape != nullptr) *out_shape = (*out)[0].shape();
  EXPECT_EQ((*out)[0].dtype(), DType::kF32);
  return Values<float>((*out)[0]);
}

absl::Status RunStatus(const TfIdf& t, const Tensor& in) {
  auto out = RunOp("TfIdfVectorizer", {&in}, t.ToAttrs());
  return out.status();
}

// The ONNX example pool: unigrams 2 3 5 4, bigrams (5 6) (7 8) (6 7).
TfIdf OnnxExample() {
  TfIdf t;
  t.counts = {0, 4};
  t.indexes = {0, 1, 2, 3, 4, 5, 6};
  t.pool = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
  return t;
}

const Ints kRow = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

TEST(TfIdfVectorizer, OnnxUniAndBigramsSkip5) {
  TfIdf t = OnnxExample();
  t.max_skip = 5;
  Shape shape;
  EXPECT_THAT(RunTfIdf<int32_t>(t, DType::kI32, {12}, kRow, &shape), ElementsAre(0, 3, 1, 0, 1, 3, 1));
  EXPECT_EQ(shape, Shape({7}));
}

TEST(TfIdfVectorizer, OnnxOnlyBigrams) {
  TfIdf t = OnnxExample();
  t.min_gram = 2;
  EXPECT_THAT(RunTfIdf<int32_t>(t, DType::kI32, {12}, kRow), ElementsAre(0, 0, 0, 0, 1, 1, 1));
  t.max_skip = 5;
  EXPECT_THAT(RunTfIdf<int64_t>(t, DType::kI64, {12}, kRow), ElementsAre(0, 0, 0, 0, 1, 3, 1));
}

TEST(TfIdfVectorizer, OnnxBatch) {
  TfIdf t = OnnxExample();
  t.max_skip = 5;
  Shape shape;
  EXPECT_THAT(RunTfIdf<int32_t>(t, DType::kI32, {2, 6}, kRow, &shape),
              ElementsAre(0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1));
  EXPECT_EQ(shape, Shape({2, 7}));
}

TEST(TfIdfVectorizer, EmptyUnigramLevel) {
  TfIdf t;
  t.min_gram = 2;
  t.counts = {0, 0};
  t.indexes = {0, 1, 2};
  t.pool = {5, 6, 7, 8, 6, 7};
  EXPECT_THAT(RunTfIdf<int64_t>(t, DType::kI64, {12}, kRow), ElementsAre(1, 1, 1));
}

TEST(TfIdfVectorizer, ModesAndWeightsMatchReference) {
  const Ints x = {4, 1, 2, 4, 1, 2, 2, 9, 4, 1, 7, 4, 4, 1, 2, 2, 0, 1};
  for (const std::string mode : {"TF", "IDF", "TFIDF"}) {
    for (bool weighted : {false, true}) {
      for (int64_t skip : {0, 1, 3}) {
        TfIdf t;
        t.mode = mode;
        t.max_skip = skip;
        t.max_gram = 3;
        t.counts = {0, 3, 7};
        t.pool = {4, 1, 2, 4, 1, 1, 2, 4, 1, 2};
        // Outputs permuted and one coordinate (5) shared by two n-grams.
        t.indexes = {2, 0, 5, 1, 3, 5};
        if (weighted) t.weights = {0.5, 2.0, 0.25, 3.0, 1.5, -1.0};
        SCOPED_TRACE(mode + (weighted ? " weighted" : "") + " skip " + std::to_string(skip));
        EXPECT_EQ(RunTfIdf<int32_t>(t, DType::kI32, {3, 6}, x), Reference(t, x, 3, 6));
        EXPECT_EQ(RunTfIdf<int64_t>(t, DType::kI64, {18}, x), Reference(t, x, 1, 18));
      }
    }
  }
}

TEST(TfIdfVectorizer, GramLengthsSelectPoolLevels) {
  const Ints x = {1, 2, 3, 1, 2, 3, 3, 2, 1};
  TfIdf t;
  t.counts = {0, 3, 5};
  t.pool = {1, 2, 3, 1, 2, 1, 2, 3};
  t.indexes = {0, 1, 2, 3, 4};
  for (int64_t lo = 1; lo <= 3; ++lo) {
    for (int64_t hi = lo; hi <= 4; ++hi) {
      t.min_gram = lo;
      t.max_gram = hi;
      t.max_skip = 1;
      SCOPED_TRACE(std::to_string(lo) + ".." + std::to_string(hi));
      EXPECT_EQ(RunTfIdf<int64_t>(t, DType::kI64, {9}, x), Reference(t, x, 1, 9));
    }
  }
}

TEST(TfIdfVectorizer, DuplicatePoolNgramCountsOnceAtItsLastIndex) {
  TfIdf t;
  t.counts = {0};
  t.pool = {7, 7};
  t.indexes = {0, 1};
  t.min_gram = t.max_gram = 1;
  EXPECT_THAT(RunTfIdf<int64_t>(t, DType::kI64, {3}, {7, 1, 7}), ElementsAre(0, 2));
}

TEST(TfIdfVectorizer, ShortAndEmptyRows) {
  TfIdf t = OnnxExample();
  t.max_skip = 2;
  EXPECT_THAT(RunTfIdf<int64_t>(t, DType::kI64, {1}, {5}), ElementsAre(0, 0, 1, 0, 0, 0, 0));
  EXPECT_THAT(RunTfIdf<int64_t>(t, DType::kI64, {0}, {}), ElementsAre(0, 0, 0, 0, 0, 0, 0));
  Shape shape;
  EXPECT_TRUE(RunTfIdf<int32_t>(t, DType::kI32, {0, 4}, {}, &shape).empty());
  EXPECT_EQ(shape, Shape({0, 7}));
  EXPECT_THAT(RunTfIdf<int32_t>(t, DType::kI32, {3, 0}, {}), ::testing::Each(0.0f));
}

TEST(TfIdfVectorizer, HugeLengthsAndSkipsStayBounded) {
  TfIdf t = OnnxExample();
  t.max_gram = int64_t{1} << 60;
  t.max_skip = int64_t{1} << 62;
  EXPECT_EQ(RunTfIdf<int64_t>(t, DType::kI64, {12}, kRow), Reference([&] {
              TfIdf r = t;
              r.max_gram = 2;
              r.max_skip = 11;
              return r;
            }(), kRow, 1, 12));
}

void ExpectError(const TfIdf& t, const std::string& text) {
  Tensor in = MakeTensor<int64_t>(DType::kI64, {3}, {1, 2, 3});
  absl::Status s = RunStatus(t, in);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
}

TEST(TfIdfVectorizer, AttributeErrors) {
  TfIdf t = OnnxExample();
  {
    TfIdf b = t;
    b.min_gram = 0;
    ExpectError(b, "'min_gram_length' is 0");
  }
  {
    TfIdf b = t;
    b.min_gram = 2;
    b.max_gram = 1;
    ExpectError(b, "'max_gram_length' is 1");
  }
  {
    TfIdf b = t;
    b.max_skip = -1;
    ExpectError(b, "'max_skip_count' is -1");
  }
  {
    TfIdf b = t;
    b.mode = "BM25";
    ExpectError(b, "'mode' is 'BM25'");
  }
  {
    TfIdf b = t;
    b.counts = {};
    ExpectError(b, "'ngram_counts' is empty");
  }
  {
    TfIdf b = t;
    b.counts = {0, 11};
    ExpectError(b, "'ngram_counts'[1] is 11");
  }
  {
    TfIdf b = t;
    b.counts = {4, 0};
    ExpectError(b, "not non-decreasing");
  }
  {
    TfIdf b = t;
    b.counts = {0, 5};
    ExpectError(b, "expected a multiple of 2");
  }
  {
    TfIdf b = t;
    b.indexes = {0, 1, 2};
    ExpectError(b, "'ngram_indexes' has 3 entries but the pool and ngram_counts give 7");
  }
  {
    TfIdf b = t;
    b.indexes = {0, 1, 2, 3, 4, -1, 6};
    ExpectError(b, "'ngram_indexes'[5] is -1");
  }
  {
    TfIdf b = t;
    b.indexes = {0, 1, 2, 3, 4, int64_t{1} << 40, 6};
    ExpectError(b, "'ngram_indexes'[5] is");
  }
  {
    TfIdf b = t;
    b.weights = {1.0, 2.0};
    ExpectError(b, "'weights' has 2 entries");
  }
  {
    TfIdf b;
    b.counts = {0};
    b.indexes = {};
    ExpectError(b, "'ngram_indexes' is empty");
  }
}

TEST(TfIdfVectorizer, MissingAndStringAttributes) {
  Tensor in = MakeTensor<int64_t>(DType::kI64, {3}, {1, 2, 3});
  Attrs a = OnnxExample().ToAttrs();
  a.erase(a.begin() + 4);  // ngram_counts
  auto out = RunOp("TfIdfVectorizer", {&in}, a);
  ASSERT_FALSE(out.ok());
  a = OnnxExample().ToAttrs();
  a.pop_back();  // pool_int64s
  out = RunOp("TfIdfVectorizer", {&in}, a);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("exactly one of the attributes 'pool_int64s' and 'pool_strings'"));
  a.push_back({"pool_strings", std::vector<std::string>{"a", "b", "c", "d", "a", "b", "c", "d", "a", "b"}});
  out = RunOp("TfIdfVectorizer", {&in}, a);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("expected string"));
  a.push_back({"pool_int64s", Ints{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}});
  out = RunOp("TfIdfVectorizer", {&in}, a);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("exactly one of"));
}

// A string pool counts as the integer pool whose tokens are the strings' ids:
// the ONNX example with token k spelled "w<k>" (and "Wörter" for 8) against
// the reference over the integers, every mode and skip.
TEST(TfIdfVectorizer, StringPoolMatchesTheIntegerPool) {
  auto word = [](int64_t k) { return k == 8 ? std::string("Wörter") : "w" + std::to_string(k); };
  for (const std::string mode : {"TF", "IDF", "TFIDF"}) {
    for (int64_t skip : {0, 5}) {
      TfIdf t = OnnxExample();
      t.mode = mode;
      t.max_skip = skip;
      t.weights = {1, 2, 3, 4, 5, 6, 7};
      Attrs a = t.ToAttrs();
      std::vector<std::string> pool;
      for (int64_t k : t.pool) pool.push_back(word(k));
      a.erase(std::find_if(a.begin(), a.end(), [](const auto& kv) { return kv.first == "pool_int64s"; }));
      a.push_back({"pool_strings", pool});
      std::vector<std::string> row;
      for (int64_t k : kRow) row.push_back(word(k));
      row[0] = "not in the pool";
      Ints ints = kRow;
      ints[0] = -1;
      const Tensor x = ::grove::testing::MakeStrings({2, 6}, row);
      auto out = RunOp("TfIdfVectorizer", {&x}, a);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), Shape({2, 7}));
      EXPECT_EQ(Values<float>((*out)[0]), Reference(t, ints, 2, 6)) << mode << " skip " << skip;
    }
  }
}

TEST(TfIdfVectorizer, InputErrors) {
  const TfIdf t = OnnxExample();
  Tensor f = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  absl::Status s = RunStatus(t, f);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("has dtype f32"));
  Tensor r3 = MakeTensor<int64_t>(DType::kI64, {1, 1, 3}, {1, 2, 3});
  s = RunStatus(t, r3);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("[C] or [N, C]"));
  Tensor r0 = MakeTensor<int64_t>(DType::kI64, {}, {1});
  EXPECT_FALSE(RunStatus(t, r0).ok());
}

TEST(TfIdfVectorizer, SymbolicShapes) {
  const TfIdf t = OnnxExample();
  auto out = InferSymbolic("TfIdfVectorizer", {{DType::kI64, {ir::SymDim::Symbol(0), ir::SymDim::Symbol(1)}}},
                           t.ToAttrs());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype, DType::kF32);
  ASSERT_EQ(out->shape.size(), 2u);
  EXPECT_FALSE(out->shape[0].is_const());
  EXPECT_EQ(out->shape[1], ir::SymDim(7));
}

TEST(TfIdfVectorizer, KernelChecksItsInputsAndPlannedOutput) {
  const TfIdf t = OnnxExample();
  Tensor f = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("TfIdfVectorizer", {&f}, DType::kF32, {7}, t.ToAttrs()).status(),
                            "has dtype f32"));
  Tensor r3 = MakeTensor<int64_t>(DType::kI64, {1, 1, 3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("TfIdfVectorizer", {&r3}, DType::kF32, {7}, t.ToAttrs()).status(),
                            "[C] or [N, C]"));
  Tensor x = MakeTensor<int64_t>(DType::kI64, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(RunKernelPlanned("TfIdfVectorizer", {&x}, DType::kF32, {3, 7}, t.ToAttrs()).ok());
  TfIdf bad = t;
  bad.mode = "X";
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("TfIdfVectorizer", {&x}, DType::kF32, {2, 7}, bad.ToAttrs()).status(),
                    "'mode' is 'X'"));
  auto ok = RunKernelPlanned("TfIdfVectorizer", {&x}, DType::kF32, {2, 7}, t.ToAttrs());
  ASSERT_TRUE(ok.ok()) << ok.status();
}

}  // namespace
}  // namespace grove::testing
