// The demo models, written with ModelBuilder the way a user would.
#include "models/demo_models.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "grove/grove.h"

namespace grove::demo {
namespace {

// Deterministic weights in [-scale, scale): a small LCG, no global state.
std::vector<float> Weights(size_t n, uint32_t seed, float scale) {
  std::vector<float> w(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : w) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
  }
  return w;
}

void AddDense(ModelBuilder& b, const std::string& name, int64_t in, int64_t out, uint32_t seed) {
  b.AddWeight(name + ".w", DType::kF32, {in, out}, Weights(in * out, seed, 1.0f / std::sqrt(float(in))));
  b.AddWeight(name + ".b", DType::kF32, {out}, Weights(out, seed + 1, 0.1f));
}

// y = x W + b
void Dense(ModelBuilder& b, const std::string& layer, const std::string& x, const std::string& y) {
  b.AddOp("MatMul", {x, layer + ".w"}, {y + ".mm"}, {}, layer + ".matmul");
  b.AddOp("Add", {y + ".mm", layer + ".b"}, {y}, {}, layer + ".bias");
}

std::vector<uint8_t> I64Bytes(std::vector<int64_t> v) {
  std::vector<uint8_t> out(v.size() * 8);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildMlp() {
  ModelBuilder b;
  b.SetProducer("grove demo: mlp");
  b.AddSymbol("batch", 1, 1024);
  b.AddInput("x", DType::kF32, {"batch", 16});
  AddDense(b, "fc1", 16, 32, 1);
  AddDense(b, "fc2", 32, 4, 3);
  Dense(b, "fc1", "x", "h1");
  b.AddOp("Relu", {"h1"}, {"a1"});
  Dense(b, "fc2", "a1", "logits");
  b.AddOp("Softmax", {"logits"}, {"y"}, {{"axis", int64_t{-1}}});
  b.AddOutput("y");
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildTransformerBlock() {
  constexpr int64_t d = 32, ff = 64;
  ModelBuilder b;
  b.SetProducer("grove demo: transformer block");
  b.AddSymbol("batch", 1, 64);
  b.AddSymbol("seq", 1, 512);
  b.AddInput("x", DType::kF32, {"batch", "seq", d});
  for (const char* p : {"wq", "wk", "wv", "wo"}) {
    b.AddWeight(p, DType::kF32, {d, d}, Weights(d * d, p[1], 1.0f / std::sqrt(float(d))));
  }
  AddDense(b, "ff1", d, ff, 11);
  AddDense(b, "ff2", ff, d, 13);
  b.AddWeight("scale", DType::kF32, {}, std::vector<float>{1.0f / std::sqrt(float(d))});
  b.AddWeight("heads", DType::kI64, {2}, I64Bytes({4, 8}));
  b.AddWeight("flat", DType::kI64, {1}, I64Bytes({-1}));
  b.AddWeight("batch_seq_index", DType::kI64, {2}, I64Bytes({0, 1}));

  // Attention, one head.
  b.AddOp("MatMul", {"x", "wq"}, {"q"});
  b.AddOp("MatMul", {"x", "wk"}, {"k"});
  b.AddOp("MatMul", {"x", "wv"}, {"v"});
  b.AddOp("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  b.AddOp("MatMul", {"q", "kt"}, {"scores"});
  b.AddOp("Mul", {"scores", "scale"}, {"scaled"});
  b.AddOp("Softmax", {"scaled"}, {"attn"}, {{"axis", int64_t{-1}}});
  b.AddOp("MatMul", {"attn", "v"}, {"ctx"});
  b.AddOp("MatMul", {"ctx", "wo"}, {"proj"});
  b.AddOp("Add", {"x", "proj"}, {"res1"});
  // Centering (the mean half of a layer norm).
  b.AddOp("ReduceMean", {"res1"}, {"mean1"}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}});
  b.AddOp("Sub", {"res1", "mean1"}, {"norm1"});
  // Feed-forward.
  Dense(b, "ff1", "norm1", "h");
  b.AddOp("Relu", {"h"}, {"ha"});
  Dense(b, "ff2", "ha", "f");
  b.AddOp("Add", {"norm1", "f"}, {"res2"});
  // Split into heads and merge back with shapes computed in the graph, as
  // exporters write it: Shape -> Gather -> Concat -> Reshape (folded at plan time).
  b.AddOp("Shape", {"x"}, {"x_shape"});
  b.AddOp("Gather", {"x_shape", "batch_seq_index"}, {"bs"}, {{"axis", int64_t{0}}});
  b.AddOp("Concat", {"bs", "heads"}, {"split_shape"}, {{"axis", int64_t{0}}});
  b.AddOp("Concat", {"bs", "flat"}, {"merge_shape"}, {{"axis", int64_t{0}}});
  b.AddOp("Reshape", {"res2", "split_shape"}, {"split"});
  b.AddOp("Reshape", {"split", "merge_shape"}, {"y"});
  b.AddOutput("y");
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildEarlyExit() {
  ModelBuilder b;
  b.SetProducer("grove demo: early exit");
  b.AddSymbol("batch", 1, 256);
  b.AddInput("x", DType::kF32, {"batch", 8});
  b.AddWeight("zero", DType::kF32, {}, std::vector<float>{0.0f});
  b.AddWeight("deep1", DType::kF32, {8, 8}, Weights(64, 21, 0.35f));
  b.AddWeight("deep2", DType::kF32, {8, 8}, Weights(64, 22, 0.35f));
  b.AddWeight("shallow", DType::kF32, {8, 3}, Weights(24, 23, 0.35f));
  b.AddOp("ReduceMean", {"x"}, {"m"}, {{"keepdims", int64_t{0}}});
  b.AddOp("Greater", {"m", "zero"}, {"go_deep"});

  const int deep = b.AddSubgraph("deep");
  b.AddOp("MatMul", {"x", "deep1"}, {"d1"});
  b.AddOp("Relu", {"d1"}, {"d1a"});
  b.AddOp("MatMul", {"d1a", "deep2"}, {"d2"});
  b.AddOutput("d2");
  const int shallow = b.AddSubgraph("shallow");
  b.AddOp("MatMul", {"x", "shallow"}, {"s1"});
  b.AddOutput("s1");

  b.SetSubgraph(0);
  b.AddOp("If", {"go_deep"}, {"y"}, {{"then_branch", SubgraphRef{deep}}, {"else_branch", SubgraphRef{shallow}}},
          "exit");
  b.AddOutput("y");
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildLoop() {
  ModelBuilder b;
  b.SetProducer("grove demo: loop");
  b.AddSymbol("n", 1, 1024);
  b.AddInput("trip_count", DType::kI64, {});
  b.AddInput("x", DType::kF32, {"n"});
  b.AddInput("limit", DType::kF32, {});
  b.AddWeight("two", DType::kF32, {}, std::vector<float>{2.0f});

  const int body = b.AddSubgraph("body");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("cond_in", DType::kBool, {});
  b.AddInput("v", DType::kF32, {"n"});
  b.AddOp("Mul", {"v", "two"}, {"doubled"});
  b.AddOp("Cast", {"i"}, {"i_f"}, {{"to", int64_t(DType::kF32)}});
  b.AddOp("Add", {"doubled", "i_f"}, {"v_next"});
  b.AddOp("ReduceSum", {"v_next"}, {"sum"}, {{"keepdims", int64_t{0}}});
  b.AddOp("Less", {"sum", "limit"}, {"keep_going"});
  b.AddOutput("keep_going");
  b.AddOutput("v_next");
  b.AddOutput("sum");

  b.SetSubgraph(0);
  b.AddOp("Loop", {"trip_count", "", "x"}, {"final", "sums"}, {{"body", SubgraphRef{body}}}, "doubling");
  b.AddOutput("final");
  b.AddOutput("sums");
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildStepHistory(History history) {
  ModelBuilder b;
  b.SetProducer("grove demo: step history");
  b.AddSymbol("batch", 1, 4096);
  b.AddInput("steps", DType::kI64, {});
  b.AddInput("h0", DType::kF32, {"batch", 64});
  b.AddWeight("w", DType::kF32, {64, 64}, Weights(64 * 64, 41, 0.125f));
  b.AddWeight("bias", DType::kF32, {64}, Weights(64, 42, 0.1f));
  b.AddWeight("axis0", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddWeight("no_rows", DType::kF32, {0, 1, 64}, std::vector<float>{});

  const int body = b.AddSubgraph("step");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("go", DType::kBool, {});
  b.AddInput("h", DType::kF32, {"batch", 64});
  if (history == History::kList) b.AddInput("rows", ValueKind::kSequence, DType::kF32);
  if (history == History::kConcat) b.AddInput("rows", DType::kF32, {});
  b.AddOp("MatMul", {"h", "w"}, {"hw"});
  b.AddOp("Add", {"hw", "bias"}, {"pre"});
  b.AddOp("Tanh", {"pre"}, {"h_next"});
  b.AddOutput("go");
  b.AddOutput("h_next");
  if (history == History::kList) {
    b.AddOp("SequenceInsert", {"rows", "h_next"}, {"rows_next"});
    b.AddOutput("rows_next");
  } else if (history == History::kConcat) {
    b.AddOp("Unsqueeze", {"h_next", "axis0"}, {"row"});
    b.AddOp("Concat", {"rows", "row"}, {"rows_next"}, {{"axis", int64_t{0}}});
    b.AddOutput("rows_next");
  } else {
    b.AddOutput("h_next");  // the scan output
  }

  b.SetSubgraph(0);
  switch (history) {
    case History::kScan:
      b.AddOp("Loop", {"steps", "", "h0"}, {"h_last", "history"}, {{"body", SubgraphRef{body}}});
      break;
    case History::kList:
      b.AddOp("SequenceEmpty", {}, {"empty"}, {{"dtype", int64_t(DType::kF32)}});
      b.AddOp("Loop", {"steps", "", "h0", "empty"}, {"h_last", "list"}, {{"body", SubgraphRef{body}}});
      b.AddOp("ConcatFromSequence", {"list"}, {"history"}, {{"axis", int64_t{0}}, {"new_axis", int64_t{1}}});
      break;
    case History::kConcat:
      // [0, batch, 64] to start: an empty [0, 1, 64] broadcast to the batch.
      b.AddOp("Shape", {"h0"}, {"h0_shape"});
      b.AddOp("Concat", {"axis0", "h0_shape"}, {"start_shape"}, {{"axis", int64_t{0}}});
      b.AddOp("Expand", {"no_rows", "start_shape"}, {"start"});
      b.AddOp("Loop", {"steps", "", "h0", "start"}, {"h_last", "history"}, {{"body", SubgraphRef{body}}});
      break;
  }
  b.AddOutput("history");
  return b.Finish();
}

absl::StatusOr<std::vector<uint8_t>> BuildChain(int num_ops) {
  ModelBuilder b;
  b.SetProducer("grove demo: chain");
  b.AddSymbol("batch", 1, 4096);
  b.AddInput("x", DType::kF32, {"batch", 64});
  b.AddWeight("w", DType::kF32, {64, 64}, Weights(64 * 64, 31, 0.125f));
  b.AddWeight("bias", DType::kF32, {64}, Weights(64, 32, 0.1f));
  b.AddWeight("half", DType::kF32, {}, std::vector<float>{0.5f});
  std::string cur = "x";
  for (int i = 0; i < num_ops; ++i) {
    const std::string next = "t" + std::to_string(i);
    switch (i % 4) {
      case 0: b.AddOp("MatMul", {cur, "w"}, {next}); break;
      case 1: b.AddOp("Add", {cur, "bias"}, {next}); break;
      case 2: b.AddOp("Relu", {cur}, {next}); break;
      default: b.AddOp("Mul", {cur, "half"}, {next}); break;
    }
    cur = next;
  }
  b.AddOp("Identity", {cur}, {"y"});
  b.AddOutput("y");
  return b.Finish();
}

namespace {

// `x` (a normal number) as f16 or bf16 bits, rounded to nearest even.
uint16_t HalfBits(float x, DType dtype) {
  uint32_t f;
  std::memcpy(&f, &x, sizeof(f));
  if (dtype == DType::kBF16) return static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const int exp = static_cast<int>((f >> 23) & 0xffu) - 127 + 15;
  uint32_t man = f & 0x7fffffu;
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;
  return static_cast<uint16_t>(h);
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildAttention(int64_t sq, int64_t sk, int64_t heads, int64_t head_dim,
                                                    DType dtype, bool causal) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError("BuildAttention: the dtype is f32, f16 or bf16");
  }
  if (causal && (sq < 1 || sk < 1)) {
    return absl::InvalidArgumentError("BuildAttention: a causal mask needs both lengths fixed");
  }
  ModelBuilder b;
  b.SetProducer("grove demo: attention");
  b.AddSymbol("s", 1, 4096);
  auto dim = [](int64_t n) { return n < 1 ? Dim("s") : Dim(n); };
  b.AddInput("q", dtype, {1, heads, dim(sq), head_dim});
  for (const char* name : {"k", "v"}) b.AddInput(name, dtype, {1, heads, dim(sk), head_dim});
  const float scale = std::sqrt(static_cast<float>(head_dim));
  if (dtype == DType::kF32) {
    b.AddWeight("scale", dtype, {}, std::vector<float>{scale});
  } else {
    b.AddWeight("scale", dtype, {}, std::vector<uint16_t>{HalfBits(scale, dtype)});
  }
  b.AddOp("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  b.AddOp("MatMul", {"q", "kt"}, {"scores"});
  b.AddOp("Div", {"scores", "scale"}, {"scaled"});
  if (causal) {
    std::vector<uint8_t> keep(static_cast<size_t>(sq * sk));
    for (int64_t i = 0; i < sq; ++i) {
      for (int64_t j = 0; j < sk; ++j) keep[i * sk + j] = j <= i + sk - sq ? 1 : 0;
    }
    b.AddWeight("keep", DType::kBool, {sq, sk}, keep);
    if (dtype == DType::kF32) {
      b.AddWeight("ninf", dtype, {}, std::vector<float>{-std::numeric_limits<float>::infinity()});
    } else {  // -inf's bits (HalfBits takes normal numbers)
      b.AddWeight("ninf", dtype, {}, std::vector<uint16_t>{dtype == DType::kF16 ? uint16_t{0xfc00} : uint16_t{0xff80}});
    }
    b.AddOp("Where", {"keep", "scaled", "ninf"}, {"masked"});
  }
  b.AddOp("Softmax", {causal ? "masked" : "scaled"}, {"probs"}, {{"axis", int64_t{-1}}});
  b.AddOp("MatMul", {"probs", "v"}, {"y"});
  b.AddOutput("y");
  return b.Finish();
}

}  // namespace grove::demo
