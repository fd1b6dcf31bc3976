// MatMul and Gemm against naive references: every dtype, 1-D promotion,
// batch broadcasting, zero-size dims, all Gemm transposes and C broadcasts,
// every error the shape functions and kernels return, and shape functions on
// symbolic dims.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ir::SymDim;
using ir::SymShape;

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Small integers so that every dtype, f16 included, computes them exactly.
std::vector<double> Ramp(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(((i * 5 + seed * 3) % 7) - 3);
  return v;
}

// numpy.matmul on doubles, written from the definition.
std::vector<double> RefMatMul(const std::vector<double>& a, std::vector<int64_t> sa, const std::vector<double>& b,
                              std::vector<int64_t> sb, std::vector<int64_t>* out_shape) {
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  const size_t nb = std::max(sa.size(), sb.size()) - 2;
  while (sa.size() < nb + 2) sa.insert(sa.begin(), 1);
  while (sb.size() < nb + 2) sb.insert(sb.begin(), 1);
  const int64_t m = sa[nb], k = sa[nb + 1], n = sb[nb + 1];
  std::vector<int64_t> batch(nb);
  for (size_t i = 0; i < nb; ++i) batch[i] = sa[i] == 1 ? sb[i] : sa[i];
  const int64_t count = Count(batch);
  std::vector<double> out(static_cast<size_t>(count * m * n), 0.0);
  for (int64_t bi = 0; bi < count; ++bi) {
    int64_t rem = bi, ia = 0, ib = 0, stride_a = 1, stride_b = 1;
    for (int d = static_cast<int>(nb) - 1; d >= 0; --d) {
      const int64_t idx = rem % batch[d];
      rem /= batch[d];
      ia += (sa[d] == 1 ? 0 : idx) * stride_a;
      ib += (sb[d] == 1 ? 0 : idx) * stride_b;
      stride_a *= sa[d];
      stride_b *= sb[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += a[ia * m * k + i * k + p] * b[ib * k * n + p * n + j];
        out[bi * m * n + i * n + j] = acc;
      }
  }
  *out_shape = batch;
  if (!a1) out_shape->push_back(m);
  if (!b1) out_shape->push_back(n);
  return out;
}

// Gemm from its definition: alpha * op(A) op(B) + beta * C.
std::vector<double> RefGemm(const std::vector<double>& a, const std::vector<int64_t>& sa,
                            const std::vector<double>& b, const std::vector<int64_t>& sb,
                            const std::vector<double>* c, std::vector<int64_t> sc, bool ta, bool tb, double alpha,
                            double beta) {
  const int64_t m = ta ? sa[1] : sa[0], k = ta ? sa[0] : sa[1], n = tb ? sb[0] : sb[1];
  while (sc.size() < 2) sc.insert(sc.begin(), 1);
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? a[p * m + i] : a[i * k + p];
        const double w = tb ? b[j * k + p] : b[p * n + j];
        acc += x * w;
      }
      double r = alpha * acc;
      if (c != nullptr) r += beta * (*c)[(sc[0] == 1 ? 0 : i) * sc[1] + (sc[1] == 1 ? 0 : j)];
      y[i * n + j] = r;
    }
  return y;
}

// f16 / bf16 decoding written independently of the library's.
double HalfBitsToDouble(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(1024 + m, e - 25);
}

double Bf16BitsToDouble(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t EncodeExact(DType t, double v) {
  static const std::map<double, uint16_t>* half = [] {
    auto* m = new std::map<double, uint16_t>;
    for (uint32_t b = 0; b < 0x7c00; ++b) {
      m->emplace(HalfBitsToDouble(static_cast<uint16_t>(b)), static_cast<uint16_t>(b));
      m->emplace(-HalfBitsToDouble(static_cast<uint16_t>(b)), static_cast<uint16_t>(b | 0x8000));
    }
    return m;
  }();
  if (t == DType::kBF16) {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return static_cast<uint16_t>(bits >> 16);
  }
  return half->at(v == 0 ? 0.0 : v);
}

Tensor Make(DType t, const std::vector<int64_t>& shape, const std::vector<double>& v) {
  Tensor out = Tensor::Create(t, shape).value();
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t) {
      case DType::kF32: out.as<float>()[i] = static_cast<float>(v[i]); break;
      case DType::kF64: out.as<double>()[i] = v[i]; break;
      case DType::kI32: out.as<int32_t>()[i] = static_cast<int32_t>(v[i]); break;
      case DType::kI64: out.as<int64_t>()[i] = static_cast<int64_t>(v[i]); break;
      case DType::kF16: case DType::kBF16: out.as<uint16_t>()[i] = EncodeExact(t, v[i]); break;
      // Through int64: a negative double cast straight to u8 is UB; this wraps.
      case DType::kU8: out.as<uint8_t>()[i] = static_cast<uint8_t>(static_cast<int64_t>(v[i])); break;
      default: break;
    }
  }
  return out;
}

std::vector<double> Read(const Tensor& t) {
  const int64_t n = t.view().num_elements();
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::kF32: v[i] = t.as<float>()[i]; break;
      case DType::kF64: v[i] = t.as<double>()[i]; break;
      case DType::kI32: v[i] = t.as<int32_t>()[i]; break;
      case DType::kI64: v[i] = static_cast<double>(t.as<int64_t>()[i]); break;
      case DType::kF16: v[i] = HalfBitsToDouble(t.as<uint16_t>()[i]); break;
      case DType::kBF16: v[i] = Bf16BitsToDouble(t.as<uint16_t>()[i]); break;
      default: break;
    }
  }
  return v;
}

const DType kMatMulTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

struct MatMulCase {
  std::vector<int64_t> a, b;
};

void CheckMatMul(DType t, const MatMulCase& c) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " " << ::testing::PrintToString(c.a) << " x "
                                    << ::testing::PrintToString(c.b));
  const std::vector<double> va = Ramp(Count(c.a), 1), vb = Ramp(Count(c.b), 2);
  std::vector<int64_t> want_shape;
  const std::vector<double> want = RefMatMul(va, c.a, vb, c.b, &want_shape);
  const Tensor a = Make(t, c.a, va), b = Make(t, c.b, vb);
  auto out = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), t);
  EXPECT_EQ((*out)[0].shape(), want_shape);
  EXPECT_EQ(Read((*out)[0]), want);
}

TEST(MatMulTest, AllDTypesAndShapes) {
  const MatMulCase cases[] = {
      {{3, 4}, {4, 5}},           // plain
      {{4}, {4}},                 // 1-D x 1-D -> scalar
      {{4}, {4, 5}},              // 1-D left
      {{3, 4}, {4}},              // 1-D right
      {{4}, {2, 4, 5}},           // 1-D left, batched right
      {{2, 3, 4}, {4}},           // batched left, 1-D right
      {{2, 3, 4}, {4, 5}},        // one weight for the batch (single tall GEMM)
      {{3, 4}, {2, 4, 5}},        // batch only on the right
      {{2, 3, 4}, {2, 4, 5}},     // equal batches
      {{2, 1, 3, 4}, {5, 4, 2}},  // batch broadcast both ways
      {{1, 3, 4}, {2, 2, 4, 5}},  // rank broadcast with a 1
      {{0, 4}, {4, 5}},           // M = 0
      {{3, 4}, {4, 0}},           // N = 0
      {{3, 0}, {0, 5}},           // K = 0: zeros
      {{0, 3, 4}, {4, 5}},        // empty batch
      {{2, 3, 0}, {2, 0, 2}},     // batched K = 0
  };
  for (DType t : kMatMulTypes) {
    for (const MatMulCase& c : cases) CheckMatMul(t, c);
  }
}

TEST(MatMulTest, LargerF32MatchesReference) {
  const std::vector<int64_t> sa = {3, 37, 65}, sb = {65, 19};
  const std::vector<double> va = Ramp(Count(sa), 5), vb = Ramp(Count(sb), 6);
  std::vector<int64_t> ws;
  const std::vector<double> want = RefMatMul(va, sa, vb, sb, &ws);
  const Tensor a = Make(DType::kF32, sa, va), b = Make(DType::kF32, sb, vb);
  auto out = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read((*out)[0]), want);
}

TEST(MatMulTest, HalfPrecisionRoundsToNearestEven) {
  // f16: 2^-20 + 2^-24 is a subnormal (17 units of 2^-24); 1 + 2^-11 ties to 1.
  const Tensor a = Make(DType::kF16, {2, 2}, {std::ldexp(1, -10), std::ldexp(1, -12), 1, std::ldexp(1, -11)});
  const Tensor b = Make(DType::kF16, {2, 1}, {std::ldexp(1, -10), std::ldexp(1, -12)});
  const Tensor ones = Make(DType::kF16, {2, 1}, {1, 1});
  auto out = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].as<uint16_t>()[0], 17);
  out = RunOp("MatMul", {&a, &ones});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].as<uint16_t>()[1], 0x3c00);
  // bf16: 1 + 2^-8 ties to 1, 1 + 3 * 2^-8 ties up to 1 + 2^-6.
  const Tensor c = Make(DType::kBF16, {2, 2}, {1, std::ldexp(1, -8), 1, std::ldexp(3, -8)});
  const Tensor bones = Make(DType::kBF16, {2, 1}, {1, 1});
  out = RunOp("MatMul", {&c, &bones});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Read((*out)[0]), (std::vector<double>{1.0, 1.0 + std::ldexp(1, -6)}));
}

TEST(MatMulTest, IntegerOverflowWraps) {
  const Tensor a = MakeTensor<int32_t>(DType::kI32, {1, 2}, {INT32_MAX, 2});
  const Tensor b = MakeTensor<int32_t>(DType::kI32, {2, 1}, {2, 1});
  auto out = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), std::vector<int32_t>{0});  // 2^32 wraps to 0
}

TEST(MatMulTest, Errors) {
  const Tensor a34 = Make(DType::kF32, {3, 4}, Ramp(12, 0));
  const Tensor b54 = Make(DType::kF32, {5, 4}, Ramp(20, 0));
  const Tensor s = Make(DType::kF32, {}, {1});
  const Tensor d45 = Make(DType::kF64, {4, 5}, Ramp(20, 0));
  const Tensor u = Make(DType::kU8, {4, 5}, Ramp(20, 0));
  const Tensor u34 = Make(DType::kU8, {3, 4}, Ramp(12, 0));
  const Tensor a234 = Make(DType::kF32, {2, 3, 4}, Ramp(24, 0));
  const Tensor b345 = Make(DType::kF32, {3, 4, 5}, Ramp(60, 0));

  auto r = RunOp("MatMul", {&a34, &b54});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ErrorContains(r.status(), "inner dims differ"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMul", {&s, &a34}).status(), "rank 0"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMul", {&a34, &s}).status(), "input 1 is a scalar"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMul", {&a34, &d45}).status(), "input 1 has dtype f64 but input 0 has f32"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMul", {&u34, &u}).status(), "dtype u8"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMul", {&a234, &b345}).status(), "do not broadcast"));
  // The message names the node.
  EXPECT_TRUE(ErrorContains(r.status(), "(MatMul)"));
}

TEST(MatMulTest, SymbolicShapes) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  auto out = InferSymbolic("MatMul", {{DType::kF32, {b, s, 32}}, {DType::kF32, {32, 64}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s, 64}));
  EXPECT_EQ(out->dtype, DType::kF32);

  // Attention scores: [b,h,s,d] x [b,h,d,s] -> [b,h,s,s].
  out = InferSymbolic("MatMul", {{DType::kF32, {b, 4, s, 16}}, {DType::kF32, {b, 4, 16, s}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 4, s, s}));

  // Batch broadcasting of a symbol against 1.
  out = InferSymbolic("MatMul", {{DType::kF32, {1, s, 8}}, {DType::kF32, {b, 8, 2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s, 2}));

  // Different symbolic K: accepted now, checked when concrete.
  out = InferSymbolic("MatMul", {{DType::kF32, {b, s}}, {DType::kF32, {b, 3}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 3}));
  // ...but a constant mismatch is an error even with symbolic batch dims.
  EXPECT_FALSE(InferSymbolic("MatMul", {{DType::kF32, {b, 5}}, {DType::kF32, {4, 3}}}).ok());
}

TEST(MatMulTest, KernelChecksDimsAcceptedSymbolically) {
  const Tensor a = Make(DType::kF32, {2, 3}, Ramp(6, 0));
  const Tensor b = Make(DType::kF32, {4, 5}, Ramp(20, 0));
  auto r = RunKernelPlanned("MatMul", {&a, &b}, DType::kF32, {2, 5});
  EXPECT_TRUE(ErrorContains(r.status(), "inner dims differ at run time"));
  const Tensor a3 = Make(DType::kF32, {2, 3, 4}, Ramp(24, 0));
  const Tensor b3 = Make(DType::kF32, {3, 4, 5}, Ramp(60, 0));
  r = RunKernelPlanned("MatMul", {&a3, &b3}, DType::kF32, {2, 3, 5});
  EXPECT_TRUE(ErrorContains(r.status(), "do not broadcast at run time"));
  const Tensor b2 = Make(DType::kF32, {3, 5}, Ramp(15, 0));
  r = RunKernelPlanned("MatMul", {&a, &b2}, DType::kF32, {2, 6});
  EXPECT_TRUE(ErrorContains(r.status(), "planned output is [2, 6]"));
  r = RunKernelPlanned("MatMul", {&a, &b2}, DType::kF32, {2, 5});
  EXPECT_TRUE(r.ok()) << r.status();
}

// ---------------------------------------------------------------------------
// Gemm
// ---------------------------------------------------------------------------

struct GemmCase {
  bool ta, tb;
  std::vector<int64_t> c;  // {-1}: no C
  double alpha, beta;
};

void CheckGemm(DType t, int64_t m, int64_t n, int64_t k, const GemmCase& g) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " ta=" << g.ta << " tb=" << g.tb
                                    << " C=" << ::testing::PrintToString(g.c) << " alpha=" << g.alpha
                                    << " beta=" << g.beta << " m=" << m << " n=" << n << " k=" << k);
  const std::vector<int64_t> sa = g.ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
  const std::vector<int64_t> sb = g.tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  const std::vector<double> va = Ramp(Count(sa), 3), vb = Ramp(Count(sb), 4);
  const bool has_c = !(g.c.size() == 1 && g.c[0] == -1);
  const std::vector<double> vc = has_c ? Ramp(Count(g.c), 5) : std::vector<double>{};
  const std::vector<double> want = RefGemm(va, sa, vb, sb, has_c ? &vc : nullptr, g.c, g.ta, g.tb, g.alpha, g.beta);
  const Tensor a = Make(t, sa, va), b = Make(t, sb, vb);
  const Tensor c = has_c ? Make(t, g.c, vc) : Tensor();
  std::vector<std::pair<std::string, AttrValue>> attrs = {
      {"transA", int64_t{g.ta}}, {"transB", int64_t{g.tb}}, {"alpha", g.alpha}, {"beta", g.beta}};
  std::vector<const Tensor*> inputs = {&a, &b};
  if (has_c) inputs.push_back(&c);
  auto out = RunOp("Gemm", inputs, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{m, n}));
  EXPECT_EQ(Read((*out)[0]), want);
}

TEST(GemmTest, TransposesAndCBroadcasts) {
  const std::vector<std::vector<int64_t>> cs = {{-1}, {3, 5}, {5}, {1, 5}, {3, 1}, {1, 1}, {}, {1}};
  for (DType t : kMatMulTypes) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const auto& c : cs) CheckGemm(t, 3, 5, 4, {ta != 0, tb != 0, c, 1.0, 1.0});
    CheckGemm(t, 3, 5, 4, {false, true, {3, 5}, 2.0, 3.0});
    CheckGemm(t, 3, 5, 4, {true, false, {5}, -1.0, 0.0});
    // Fractional scales only where the result is representable.
    if (t != DType::kI32 && t != DType::kI64) CheckGemm(t, 3, 5, 4, {false, false, {3, 5}, 0.5, 0.25});
  }
}

TEST(GemmTest, Defaults) {
  const Tensor a = MakeTensor<float>(DType::kF32, {1, 2}, {1, 2});
  const Tensor b = MakeTensor<float>(DType::kF32, {2, 1}, {3, 4});
  const Tensor c = MakeTensor<float>(DType::kF32, {1}, {10});
  auto out = RunOp("Gemm", {&a, &b, &c});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{21});
  // An omitted optional C.
  out = RunOp("Gemm", {&a, &b, nullptr});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{11});
}

TEST(GemmTest, ZeroSizeDims) {
  for (DType t : {DType::kF32, DType::kI64}) {
    CheckGemm(t, 0, 5, 4, {false, false, {5}, 1.0, 1.0});
    CheckGemm(t, 3, 0, 4, {false, true, {-1}, 1.0, 1.0});
    CheckGemm(t, 3, 5, 0, {true, false, {3, 5}, 1.0, 2.0});  // K = 0: beta * C
    CheckGemm(t, 3, 5, 0, {false, false, {-1}, 1.0, 1.0});   // K = 0, no C: zeros
  }
}

TEST(GemmTest, Errors) {
  const Tensor a = Make(DType::kF32, {3, 4}, Ramp(12, 0));
  const Tensor b = Make(DType::kF32, {4, 5}, Ramp(20, 0));
  const Tensor b3 = Make(DType::kF32, {1, 4, 5}, Ramp(20, 0));
  const Tensor c_bad = Make(DType::kF32, {2, 5}, Ramp(10, 0));
  const Tensor c_rank3 = Make(DType::kF32, {1, 3, 5}, Ramp(15, 0));
  const Tensor c_f64 = Make(DType::kF64, {3, 5}, Ramp(15, 0));
  const Tensor u = Make(DType::kU8, {3, 4}, Ramp(12, 0));
  const Tensor ub = Make(DType::kU8, {4, 5}, Ramp(20, 0));
  EXPECT_TRUE(ErrorContains(RunOp("Gemm", {&a, &b3}).status(), "input 1 has shape [1, 4, 5]; expected rank 2"));
  EXPECT_TRUE(ErrorContains(RunOp("Gemm", {&a, &b}, {{"transA", int64_t{1}}}).status(), "inner dims differ"));
  EXPECT_TRUE(ErrorContains(RunOp("Gemm", {&a, &b, &c_bad}).status(), "does not broadcast to [M, N]"));
  EXPECT_TRUE(ErrorContains(RunOp("Gemm", {&a, &b, &c_rank3}).status(), "expected rank <= 2"));
  EXPECT_TRUE(ErrorContains(RunOp("Gemm", {&a, &b, &c_f64}).status(), "input 2 has dtype f64"));
  EXPECT_TRUE(ErrorContains(RunOp("Gemm", {&a, &b}, {{"transB", int64_t{2}}}).status(), "transB is 2; expected 0 or 1"));
  EXPECT_TRUE(ErrorContains(RunOp("Gemm", {&u, &ub}).status(), "dtype u8"));
}

TEST(GemmTest, SymbolicShapesAndRunTimeChecks) {
  const SymDim b = SymDim::Symbol(0), k = SymDim::Symbol(1);
  auto out = InferSymbolic("Gemm", {{DType::kF32, {b, 16}}, {DType::kF32, {8, 16}}, {DType::kF32, {8}}},
                           {{"transB", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 8}));
  // Symbolic K and a symbolic C row count: accepted, checked when run.
  out = InferSymbolic("Gemm", {{DType::kF32, {b, k}}, {DType::kF32, {4, 8}}, {DType::kF32, {k, 8}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 8}));

  const Tensor a = Make(DType::kF32, {2, 3}, Ramp(6, 0));
  const Tensor w = Make(DType::kF32, {4, 8}, Ramp(32, 0));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Gemm", {&a, &w}, DType::kF32, {2, 8}).status(), "inner dims differ at run time"));
  const Tensor a4 = Make(DType::kF32, {2, 4}, Ramp(8, 0));
  const Tensor c = Make(DType::kF32, {3, 8}, Ramp(24, 0));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Gemm", {&a4, &w, &c}, DType::kF32, {2, 8}).status(), "does not broadcast to [2, 8] at run time"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Gemm", {&a4, &w}, DType::kF32, {2, 9}).status(), "planned output is [2, 9]"));
}

}  // namespace
}  // namespace grove::testing
