// The CUDA elementwise, Cast and CastLike kernels against the CPU backend
// (on the emulated device in CI): every op, odd sizes, broadcasting, rank 0,
// empty tensors, the dtypes the CPU supports, NaN/inf, and the error paths.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/cuda_op_test_util.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using testing::CudaRunOptions;
using testing::ExpectCudaMatchesCpu;
using testing::RunOpCuda;

const DType kFloats[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};
const DType kAll[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                      DType::kI32, DType::kI8,  DType::kU8,  DType::kBool};
const DType kNumeric[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                          DType::kI64, DType::kI32, DType::kI8,  DType::kU8};

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16; }

// Tolerance for results computed in f32/f64 on the GPU vs the CPU's libm.
double Tol(DType d) {
  switch (d) {
    case DType::kF16:
      return 2e-3;
    case DType::kBF16:
      return 1.6e-2;
    default:
      return 1e-5;
  }
}

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A tensor of `dtype` from doubles (converted as Cast converts).
Tensor FromDoubles(DType dtype, std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor f = testing::MakeTensor<double>(DType::kF64, shape, v);
  return Tensor::CastOf(f.view(), dtype).value();
}

// Deterministic values: floats in [lo, hi) with NaN, +-inf, 0 and -0
// sprinkled in when `specials`; integers in a small range (bool: 0/1).
Tensor Random(DType dtype, std::vector<int64_t> shape, uint32_t seed, bool specials = true, double lo = -4,
              double hi = 4) {
  const int64_t n = Count(shape);
  std::vector<double> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const double u = (s >> 8) / 16777216.0;
    if (dtype == DType::kBool) {
      v[i] = (s >> 20) & 1;
    } else if (IsFloat(dtype)) {
      v[i] = lo + (hi - lo) * u;
      if (specials && n >= 7) {
        switch (i % 23) {
          case 3: v[i] = NAN; break;
          case 5: v[i] = INFINITY; break;
          case 11: v[i] = -INFINITY; break;
          case 13: v[i] = 0.0; break;
          case 17: v[i] = -0.0; break;
          default: break;
        }
      }
    } else if (dtype == DType::kU8) {
      v[i] = std::floor(u * 256);
    } else {
      v[i] = std::floor(lo * 3 + (hi - lo) * 3 * u);
    }
  }
  return FromDoubles(dtype, std::move(shape), v);
}

class CudaElementwiseTest : public ::testing::Test {
 protected:
  void SetUp() override { dev_ = testing::TestDevice(); }
  cuda::Device& dev() { return *dev_; }
  std::shared_ptr<cuda::Device> dev_;
};

const std::vector<std::vector<int64_t>> kUnaryShapes = {{1}, {7}, {257}, {1000}, {}, {0}, {2, 0, 3}, {2, 3, 4}};

TEST_F(CudaElementwiseTest, FloatUnaryOps) {
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, AttrValue>>>> ops = {
      {"Neg", {}},        {"Abs", {}},
      {"Exp", {}},        {"Log", {}},
      {"Sqrt", {}},       {"Reciprocal", {}},
      {"Erf", {}},        {"Tanh", {}},
      {"Sigmoid", {}},    {"Relu", {}},
      {"LeakyRelu", {}},  {"LeakyRelu", {{"alpha", 0.3}}},
      {"Elu", {}},        {"Elu", {{"alpha", 0.5}}},
      {"Gelu", {}},       {"Gelu", {{"approximate", std::string("tanh")}}},
      {"HardSigmoid", {}}, {"HardSigmoid", {{"alpha", 0.3}, {"beta", 0.4}}},
      {"HardSwish", {}},  {"Softplus", {}},
  };
  for (const auto& [op, attrs] : ops) {
    for (DType dt : kFloats) {
      for (size_t s = 0; s < kUnaryShapes.size(); ++s) {
        SCOPED_TRACE(op + " " + std::string(DTypeName(dt)) + " shape #" + std::to_string(s));
        Tensor x = Random(dt, kUnaryShapes[s], 1 + s, true, -6, 6);
        ExpectCudaMatchesCpu(dev(), op, {&x}, attrs, 1, Tol(dt));
      }
    }
  }
}

TEST_F(CudaElementwiseTest, TrigonometricAndOtherActivations) {
  // Each op on inputs inside its domain (and away from Tan's poles).
  const struct {
    const char* op;
    std::vector<std::pair<std::string, AttrValue>> attrs;
    double lo, hi;
  } cases[] = {
      {"Sin", {}, -6, 6},          {"Cos", {}, -6, 6},       {"Tan", {}, -1.2, 1.2},
      {"Asin", {}, -0.99, 0.99},   {"Acos", {}, -0.99, 0.99}, {"Atan", {}, -6, 6},
      {"Sinh", {}, -4, 4},         {"Cosh", {}, -4, 4},      {"Asinh", {}, -6, 6},
      {"Acosh", {}, 1.01, 6},      {"Atanh", {}, -0.95, 0.95}, {"Softsign", {}, -6, 6},
      {"Selu", {}, -4, 4},         {"Selu", {{"alpha", 2.0}, {"gamma", 0.5}}, -4, 4},
      {"Celu", {}, -4, 4},         {"Celu", {{"alpha", 0.5}}, -4, 4},
      {"ThresholdedRelu", {}, -3, 3}, {"ThresholdedRelu", {{"alpha", -0.5}}, -3, 3},
  };
  for (const auto& c : cases) {
    for (DType dt : kFloats) {
      for (size_t s = 0; s < kUnaryShapes.size(); ++s) {
        SCOPED_TRACE(std::string(c.op) + " " + std::string(DTypeName(dt)) + " shape #" + std::to_string(s));
        Tensor x = Random(dt, kUnaryShapes[s], 3 + s, true, c.lo, c.hi);
        ExpectCudaMatchesCpu(dev(), c.op, {&x}, c.attrs, 1, Tol(dt));
      }
    }
  }
}

TEST_F(CudaElementwiseTest, LargeMagnitudes) {
  // Sigmoid, Softplus, Gelu, Elu where a naive formula overflows or cancels.
  std::vector<double> v = {-1000, -100, -30, -10, -1e-7, 0, 1e-7, 10, 30, 100, 1000, 88.5, -88.5};
  for (DType dt : kFloats) {
    Tensor x = FromDoubles(dt, {static_cast<int64_t>(v.size())}, v);
    for (const char* op : {"Sigmoid", "Softplus", "Gelu", "Elu", "Exp", "Tanh", "HardSwish", "Erf", "Softsign", "Selu",
                           "Celu", "Atan", "Asinh"}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)));
      ExpectCudaMatchesCpu(dev(), op, {&x}, {}, 1, Tol(dt));
    }
  }
}

TEST_F(CudaElementwiseTest, IntegerUnaryOps) {
  for (DType dt : {DType::kI64, DType::kI32, DType::kI8, DType::kU8}) {
    for (size_t s = 0; s < kUnaryShapes.size(); ++s) {
      Tensor x = Random(dt, kUnaryShapes[s], 7 + s);
      for (const char* op : {"Neg", "Abs", "Erf"}) {
        SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)));
        ExpectCudaMatchesCpu(dev(), op, {&x});
      }
    }
  }
  // Wrapping at the minimum.
  Tensor i64 = testing::MakeTensor<int64_t>(DType::kI64, {3}, {std::numeric_limits<int64_t>::min(), -5, 9});
  Tensor i32 = testing::MakeTensor<int32_t>(DType::kI32, {3}, {std::numeric_limits<int32_t>::min(), -5, 9});
  Tensor i8 = testing::MakeTensor<int8_t>(DType::kI8, {3}, {-128, -5, 127});
  for (const Tensor* t : {&i64, &i32, &i8}) {
    ExpectCudaMatchesCpu(dev(), "Neg", {t});
    ExpectCudaMatchesCpu(dev(), "Abs", {t});
  }
  // Float-only ops refuse integers on both backends; Neg refuses u8, Not non-bool.
  Tensor u8 = Random(DType::kU8, {5}, 3);
  ExpectCudaMatchesCpu(dev(), "Exp", {&i32});
  ExpectCudaMatchesCpu(dev(), "Neg", {&u8});
  ExpectCudaMatchesCpu(dev(), "Not", {&i32});
  EXPECT_FALSE(RunOpCuda(dev(), "Relu", {&i64}).ok());
}

TEST_F(CudaElementwiseTest, NotAndLogicalOps) {
  for (size_t s = 0; s < kUnaryShapes.size(); ++s) {
    Tensor x = Random(DType::kBool, kUnaryShapes[s], 11 + s);
    ExpectCudaMatchesCpu(dev(), "Not", {&x});
  }
  // Bytes other than 0/1 are true.
  Tensor odd = testing::MakeTensor<uint8_t>(DType::kBool, {4}, {0, 1, 2, 255});
  ExpectCudaMatchesCpu(dev(), "Not", {&odd});
  ExpectCudaMatchesCpu(dev(), "And", {&odd, &odd});
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{7}, {7}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{}, {5}}, {{0, 3}, {3}}, {{257}, {}}};
  for (const char* op : {"And", "Or", "Xor"}) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      Tensor a = Random(DType::kBool, shapes[s].first, 20 + s);
      Tensor b = Random(DType::kBool, shapes[s].second, 40 + s);
      ExpectCudaMatchesCpu(dev(), op, {&a, &b});
    }
  }
  Tensor f = Random(DType::kF32, {4}, 1);
  ExpectCudaMatchesCpu(dev(), "And", {&odd, &f});
}

const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> kBinaryShapes = {
    {{1}, {1}},          {{7}, {7}},          {{257}, {257}},  {{1000}, {1000}}, {{2, 3, 4}, {4}},
    {{4}, {2, 3, 4}},    {{2, 1, 4}, {3, 1}}, {{}, {5}},       {{7}, {}},        {{}, {}},
    {{257}, {1}},        {{0, 3}, {3}},       {{2, 3, 4}, {2, 1, 1}}, {{3, 1, 5}, {1, 4, 1}},
    {{2, 3, 4, 5}, {3, 1, 5}}, {{1, 5}, {0, 1}},
};

TEST_F(CudaElementwiseTest, Arithmetic) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Min", "Max"}) {
    for (DType dt : kNumeric) {
      for (size_t s = 0; s < kBinaryShapes.size(); ++s) {
        SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)) + " shapes #" + std::to_string(s));
        Tensor a = Random(dt, kBinaryShapes[s].first, 100 + s);
        Tensor b = Random(dt, kBinaryShapes[s].second, 200 + s);
        if (std::string(op) == "Div" && !IsFloat(dt)) {
          // Non-zero divisors, -1 included (MIN / -1 wraps).
          std::vector<double> v(Count(kBinaryShapes[s].second));
          for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 5 == 0) ? -1.0 : static_cast<double>(i % 7 + 1);
          if (dt == DType::kU8) {
            for (double& x : v) x = std::fabs(x);
          }
          b = FromDoubles(dt, kBinaryShapes[s].second, v);
        }
        ExpectCudaMatchesCpu(dev(), op, {&a, &b}, {}, 1, Tol(dt));
      }
    }
  }
}

TEST_F(CudaElementwiseTest, IntegerWrapAndDivision) {
  const int64_t mn = std::numeric_limits<int64_t>::min(), mx = std::numeric_limits<int64_t>::max();
  Tensor a = testing::MakeTensor<int64_t>(DType::kI64, {6}, {mn, mx, -7, 7, -7, mn});
  Tensor b = testing::MakeTensor<int64_t>(DType::kI64, {6}, {-1, 2, 2, -2, 3, 1});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) ExpectCudaMatchesCpu(dev(), op, {&a, &b});
  Tensor a8 = testing::MakeTensor<int8_t>(DType::kI8, {4}, {-128, 127, -7, 100});
  Tensor b8 = testing::MakeTensor<int8_t>(DType::kI8, {4}, {-1, 2, 2, 3});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) ExpectCudaMatchesCpu(dev(), op, {&a8, &b8});
  // Division by zero fails on both, with or without host copies of B.
  Tensor z = testing::MakeTensor<int32_t>(DType::kI32, {3}, {1, 0, 2});
  Tensor x = testing::MakeTensor<int32_t>(DType::kI32, {3}, {4, 5, 6});
  for (bool host : {true, false}) {
    CudaRunOptions o;
    o.host_values = host;
    ExpectCudaMatchesCpu(dev(), "Div", {&x, &z}, {}, 1, 0, o);
    absl::StatusOr<std::vector<Tensor>> r = RunOpCuda(dev(), "Div", {&x, &z}, {}, 1, o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("division by zero"), std::string::npos) << r.status();
  }
  // Float division by zero is inf/NaN, not an error.
  Tensor fz = testing::MakeTensor<float>(DType::kF32, {3}, {1, 0, -1});
  Tensor fx = testing::MakeTensor<float>(DType::kF32, {3}, {0, 0, 2});
  ExpectCudaMatchesCpu(dev(), "Div", {&fx, &fz});
}

TEST_F(CudaElementwiseTest, BinaryErrors) {
  Tensor a = Random(DType::kF32, {2, 3}, 1);
  Tensor b = Random(DType::kF32, {4}, 2);
  Tensor h = Random(DType::kF16, {2, 3}, 3);
  for (const char* op : {"Add", "Mul", "Pow", "Equal", "Min", "Sum"}) {
    ExpectCudaMatchesCpu(dev(), op, {&a, &b});
    EXPECT_FALSE(RunOpCuda(dev(), op, {&a, &b}).ok()) << op;
  }
  for (const char* op : {"Add", "Greater", "Max"}) {
    ExpectCudaMatchesCpu(dev(), op, {&a, &h});
    EXPECT_FALSE(RunOpCuda(dev(), op, {&a, &h}).ok()) << op;
  }
  Tensor bl = Random(DType::kBool, {2, 3}, 4);
  ExpectCudaMatchesCpu(dev(), "Add", {&bl, &bl});
  ExpectCudaMatchesCpu(dev(), "GreaterOrEqual", {&bl, &bl});
  ExpectCudaMatchesCpu(dev(), "Sum", {&bl, &bl});
}

TEST_F(CudaElementwiseTest, Comparisons) {
  for (const char* op : {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}) {
    for (DType dt : kAll) {
      for (size_t s = 0; s < kBinaryShapes.size(); ++s) {
        SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)) + " shapes #" + std::to_string(s));
        // Few distinct values, so that Equal is sometimes true.
        Tensor a = Random(dt, kBinaryShapes[s].first, 300 + s, true, -2, 2);
        Tensor b = Random(dt, kBinaryShapes[s].second, 400 + s, true, -2, 2);
        if (IsFloat(dt)) {
          a = Tensor::CastOf(Tensor::CastOf(a.view(), DType::kI8).value().view(), dt).value();
        }
        ExpectCudaMatchesCpu(dev(), op, {&a, &b});
      }
    }
  }
  std::vector<double> v = {NAN, 1, INFINITY, -INFINITY, 0, -0.0};
  std::vector<double> w = {NAN, NAN, INFINITY, 0, -0.0, 0};
  for (DType dt : kFloats) {
    Tensor a = FromDoubles(dt, {6}, v), b = FromDoubles(dt, {6}, w);
    for (const char* op : {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}) {
      ExpectCudaMatchesCpu(dev(), op, {&a, &b});
    }
  }
}

TEST_F(CudaElementwiseTest, Pow) {
  const DType bases[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};
  for (DType bt : bases) {
    for (DType et : kNumeric) {
      for (size_t s : {0, 2, 4, 6, 7, 11, 12}) {
        SCOPED_TRACE(std::string(DTypeName(bt)) + "^" + std::string(DTypeName(et)) + " shapes #" +
                     std::to_string(s));
        Tensor a = Random(bt, kBinaryShapes[s].first, 500 + s, true, -3, 3);
        Tensor b = Random(et, kBinaryShapes[s].second, 600 + s, true, -3, 3);
        if (!IsFloat(et)) {
          // Small exponents, some negative (when signed).
          std::vector<double> v(Count(kBinaryShapes[s].second));
          for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 6) - (et == DType::kU8 ? 0 : 2);
          b = FromDoubles(et, kBinaryShapes[s].second, v);
        }
        ExpectCudaMatchesCpu(dev(), "Pow", {&a, &b}, {}, 1, IsFloat(bt) ? Tol(bt) * 10 : 0);
      }
    }
  }
  // x^2 with a scalar exponent, integer wrapping, 0 to negative powers.
  Tensor two = testing::MakeTensor<float>(DType::kF32, {}, {2.0f});
  Tensor x = Random(DType::kF32, {257}, 9);
  ExpectCudaMatchesCpu(dev(), "Pow", {&x, &two});
  Tensor ib = testing::MakeTensor<int64_t>(DType::kI64, {5}, {3, -2, 0, 1, -1});
  Tensor ie = testing::MakeTensor<int64_t>(DType::kI64, {5}, {41, 63, -1, -5, -3});
  ExpectCudaMatchesCpu(dev(), "Pow", {&ib, &ie});
  Tensor fe = testing::MakeTensor<float>(DType::kF32, {5}, {2.5f, 0.5f, -1.0f, 3.0f, NAN});
  ExpectCudaMatchesCpu(dev(), "Pow", {&ib, &fe});
  // Unsupported base dtypes.
  Tensor u = Random(DType::kU8, {3}, 1);
  ExpectCudaMatchesCpu(dev(), "Pow", {&u, &u});
}

TEST_F(CudaElementwiseTest, Clip) {
  for (DType dt : kNumeric) {
    for (size_t s = 0; s < kUnaryShapes.size(); ++s) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " shape #" + std::to_string(s));
      Tensor x = Random(dt, kUnaryShapes[s], 700 + s);
      Tensor lo = FromDoubles(dt, {}, {dt == DType::kU8 ? 20.0 : -1.5});
      Tensor hi = FromDoubles(dt, {1}, {dt == DType::kU8 ? 200.0 : 2.5});
      for (bool host : {true, false}) {
        CudaRunOptions o;
        o.host_values = host;
        ExpectCudaMatchesCpu(dev(), "Clip", {&x, &lo, &hi}, {}, 1, Tol(dt), o);
        ExpectCudaMatchesCpu(dev(), "Clip", {&x, &lo}, {}, 1, Tol(dt), o);
        ExpectCudaMatchesCpu(dev(), "Clip", {&x, nullptr, &hi}, {}, 1, Tol(dt), o);
        ExpectCudaMatchesCpu(dev(), "Clip", {&x, &hi, &lo}, {}, 1, Tol(dt), o);  // min > max: all max
      }
      ExpectCudaMatchesCpu(dev(), "Clip", {&x}, {}, 1, Tol(dt));
      ExpectCudaMatchesCpu(dev(), "Clip", {&x}, {{"min", -0.7}, {"max", 1.3}}, 1, Tol(dt));
      ExpectCudaMatchesCpu(dev(), "Clip", {&x}, {{"max", 2.9}}, 1, Tol(dt));
    }
  }
  // Bound errors: two elements, another dtype.
  Tensor x = Random(DType::kF32, {7}, 1);
  Tensor two = testing::MakeTensor<float>(DType::kF32, {2}, {0, 1});
  Tensor other = testing::MakeTensor<double>(DType::kF64, {}, {0});
  ExpectCudaMatchesCpu(dev(), "Clip", {&x, &two});
  ExpectCudaMatchesCpu(dev(), "Clip", {&x, &other});
  EXPECT_FALSE(RunOpCuda(dev(), "Clip", {&x, &two}).ok());
}

TEST_F(CudaElementwiseTest, Variadic) {
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{7}},
      {{257}, {257}},
      {{2, 3, 4}, {4}, {3, 1}},
      {{}, {5}, {1}},
      {{0, 3}, {3}},
      // More inputs than one launch reads.
      {{7}, {7}, {1}, {7}, {}, {7}, {7}, {1}, {7}, {7}, {7}},
      {{2, 3}, {3}, {2, 1}, {2, 3}, {1}, {3}, {2, 3}, {2, 3}, {2, 3}, {3}, {2, 1}, {2, 3}, {2, 3},
       {2, 3}, {2, 3}, {2, 3}, {2, 3}, {2, 3}},
  };
  for (const char* op : {"Min", "Max", "Sum", "Mean"}) {
    const bool float_only = std::string(op) == "Sum" || std::string(op) == "Mean";
    for (DType dt : kNumeric) {
      for (size_t c = 0; c < cases.size(); ++c) {
        SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)) + " case #" + std::to_string(c));
        std::vector<Tensor> ts;
        for (size_t k = 0; k < cases[c].size(); ++k) ts.push_back(Random(dt, cases[c][k], 800 + 10 * c + k));
        std::vector<const Tensor*> ins;
        for (const Tensor& t : ts) ins.push_back(&t);
        ExpectCudaMatchesCpu(dev(), op, ins, {}, 1, Tol(dt));
        if (float_only && !IsFloat(dt)) EXPECT_FALSE(RunOpCuda(dev(), op, ins).ok());
      }
    }
  }
}

TEST_F(CudaElementwiseTest, Where) {
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{7}, {7}, {7}},       {{1000}, {1000}, {}},     {{2, 3, 4}, {4}, {3, 1}}, {{2, 1, 4}, {3, 1}, {1}},
      {{}, {5}, {5}},        {{}, {}, {}},             {{0, 3}, {3}, {1}},       {{3, 1, 5}, {1, 4, 1}, {5}},
  };
  for (DType dt : kAll) {
    for (size_t c = 0; c < cases.size(); ++c) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " case #" + std::to_string(c));
      Tensor cond = Random(DType::kBool, cases[c][0], 900 + c);
      Tensor x = Random(dt, cases[c][1], 910 + c);
      Tensor y = Random(dt, cases[c][2], 920 + c);
      ExpectCudaMatchesCpu(dev(), "Where", {&cond, &x, &y}, {}, 1, 0);
    }
  }
  Tensor c = Random(DType::kF32, {3}, 1), x = Random(DType::kF32, {3}, 2), y = Random(DType::kF16, {3}, 3);
  Tensor b = Random(DType::kBool, {3}, 4), w = Random(DType::kF32, {2}, 5);
  ExpectCudaMatchesCpu(dev(), "Where", {&c, &x, &x});
  ExpectCudaMatchesCpu(dev(), "Where", {&b, &x, &y});
  ExpectCudaMatchesCpu(dev(), "Where", {&b, &x, &w});
  EXPECT_FALSE(RunOpCuda(dev(), "Where", {&b, &x, &w}).ok());
}

// Values that exercise every conversion rule: fractions (truncation), NaN,
// +-inf, values past each integer range, -0, halfway cases of f16/bf16.
std::vector<double> CastValues() {
  return {0.0,    -0.0,       0.5,        -0.5,      1.5,          -1.5,        2.5,          127.9,
          -128.9, 255.5,      256.0,      -1.0,      1e10,         -1e10,       3e9,          -3e9,
          NAN,    INFINITY,   -INFINITY,  65504.0,   65520.0,      1e-8,        6.1e-5,       1.0009765625,
          1.00048828125,      3.0000001,  9.2233720368547758e18,   -9.2233720368547758e18,    1e19,
          16777217.0,         9007199254740993.0,    -7.0,         100.0,       1.0 + 1.0 / 256 + 1.0 / 65536};
}

TEST_F(CudaElementwiseTest, CastEveryPair) {
  const std::vector<double> v = CastValues();
  const int64_t n = static_cast<int64_t>(v.size());
  for (DType from : kAll) {
    Tensor src = FromDoubles(from, {n}, v);
    if (from == DType::kI64) {
      // Integers past 2^53 and at the ends of the range.
      std::vector<int64_t> iv(n);
      for (int64_t i = 0; i < n; ++i) iv[i] = src.as<int64_t>()[i];
      iv[0] = std::numeric_limits<int64_t>::max();
      iv[1] = std::numeric_limits<int64_t>::min();
      iv[2] = (int64_t{1} << 53) + 1;
      iv[3] = (int64_t{1} << 60) + 12345;
      iv[4] = 65519;
      iv[5] = 2049;
      iv[6] = 4097;
      src = testing::MakeTensor<int64_t>(DType::kI64, {n}, iv);
    }
    for (DType to : kAll) {
      SCOPED_TRACE(std::string(DTypeName(from)) + " -> " + std::string(DTypeName(to)));
      ExpectCudaMatchesCpu(dev(), "Cast", {&src}, {{"to", static_cast<int64_t>(to)}}, 1, 0);
      Tensor like = Tensor::Create(to, {1}).value();
      ExpectCudaMatchesCpu(dev(), "CastLike", {&src, &like}, {}, 1, 0);
      // Bit-exact where there is no NaN to differ in payload.
      absl::StatusOr<std::vector<Tensor>> cpu = testing::RunOp("Cast", {&src}, {{"to", static_cast<int64_t>(to)}});
      absl::StatusOr<std::vector<Tensor>> gpu = RunOpCuda(dev(), "Cast", {&src}, {{"to", static_cast<int64_t>(to)}});
      ASSERT_TRUE(cpu.ok() && gpu.ok());
      if (!IsFloat(to)) {
        EXPECT_EQ(std::memcmp((*cpu)[0].data(), (*gpu)[0].data(), (*cpu)[0].view().byte_size()), 0);
      }
    }
  }
  // Empty and rank-0 tensors, odd sizes.
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{0}, {}, {2, 0}, {1000}, {257}}) {
    Tensor src = Random(DType::kF32, shape, 5, true, -300, 300);
    for (DType to : kAll) ExpectCudaMatchesCpu(dev(), "Cast", {&src}, {{"to", static_cast<int64_t>(to)}}, 1, 0);
  }
}

}  // namespace
}  // namespace grove
