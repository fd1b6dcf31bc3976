// The vectorised exp(x <= 0) and row softmax (lib/backends/cpu/simd_exp.h)
// against std::exp in double and against the Softmax kernel's scalar
// arithmetic, over sweeps and edge values, in both ISAs the CPU has.
#include "lib/backends/cpu/simd_exp.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backends/cpu/cpu_features.h"

#if defined(GROVE_SIMD_EXP)
namespace grove::testing {
namespace {

struct Isa {
  const char* name;
  bool available;
  void (*exp)(const float*, float*, int64_t);
  void (*softmax)(float*, int64_t);
};

std::vector<Isa> Isas() {
  const cpu::CpuFeatures& f = cpu::HostCpuFeatures();
  return {{"avx2", f.avx2 && f.fma, cpu::ExpNonPositiveAvx2, cpu::SoftmaxRowAvx2},
          {"avx512", f.avx512f, cpu::ExpNonPositiveAvx512, cpu::SoftmaxRowAvx512}};
}

// Floats in order as integers: the distance in ulps between two finite floats.
int64_t Ordered(float x) {
  int32_t i;
  std::memcpy(&i, &x, sizeof i);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

int64_t Ulps(float a, float b) { return std::llabs(Ordered(a) - Ordered(b)); }

// What exp(x) must be: exp in double rounded to float, and 0 where that is
// below FLT_MIN (no subnormal results).
float Want(float x) {
  const float e = static_cast<float>(std::exp(static_cast<double>(x)));
  return e < std::numeric_limits<float>::min() ? 0.0f : e;
}

TEST(SimdExpTest, WithinTwoUlpsOverTheRange) {
  // Every 397th float from -0 down to log(FLT_MIN) (2.8 million), then a
  // uniform sweep.
  std::vector<float> xs;
  for (uint32_t bits = 0x80000000u; ; bits += 397) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (!(x >= -87.33f)) break;
    xs.push_back(x);
  }
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> u(-87.33f, 0.0f);
  for (int i = 0; i < 100000; ++i) xs.push_back(u(rng));
  ASSERT_GT(xs.size(), size_t{2800000});
  for (const Isa& isa : Isas()) {
    if (!isa.available) continue;
    SCOPED_TRACE(isa.name);
    std::vector<float> ys(xs.size());
    isa.exp(xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
    int64_t worst = 0;
    float at = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t d = Ulps(ys[i], Want(xs[i]));
      if (d > worst) worst = d, at = xs[i];
    }
    EXPECT_LE(worst, 2) << "at x = " << at;
  }
}

TEST(SimdExpTest, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float fmin = std::numeric_limits<float>::min(), tiny = std::numeric_limits<float>::denorm_min();
  // (x, exp(x) wanted; NaN: NaN).
  const std::vector<std::pair<float, float>> cases = {
      {0.0f, 1.0f}, {-0.0f, 1.0f}, {-tiny, 1.0f}, {-fmin, 1.0f}, {-1e-30f, 1.0f}, {-1e-7f, Want(-1e-7f)},
      {-1.0f, Want(-1.0f)}, {-0.34657359f, Want(-0.34657359f)}, {-0.34657360f, Want(-0.34657360f)},
      {-87.33f, Want(-87.33f)}, {-87.3365f, Want(-87.3365f)},
      // Below log(FLT_MIN): 0, never a subnormal.
      {-87.34f, 0.0f}, {-88.0f, 0.0f}, {-100.0f, 0.0f}, {-103.5f, 0.0f}, {-104.0f, 0.0f}, {-1e4f, 0.0f},
      {-1e30f, 0.0f}, {-std::numeric_limits<float>::max(), 0.0f}, {-inf, 0.0f}, {nan, nan}, {-nan, nan}};
  // Each value in every lane position, in arrays of 1..35 elements (the
  // tails), around ordinary values.
  for (const Isa& isa : Isas()) {
    if (!isa.available) continue;
    SCOPED_TRACE(isa.name);
    for (const auto& [x, want] : cases) {
      for (int64_t n : {1, 7, 8, 9, 16, 17, 35}) {
        for (int64_t at = 0; at < n; ++at) {
          std::vector<float> in(n, -0.5f), out(n, 123.0f);
          in[at] = x;
          isa.exp(in.data(), out.data(), n);
          SCOPED_TRACE("x = " + std::to_string(x) + " at " + std::to_string(at) + " of " + std::to_string(n));
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(out[at]));
          } else {
            ASSERT_LE(Ulps(out[at], want), 2) << out[at] << " vs " << want;
            ASSERT_TRUE(out[at] == 0.0f || out[at] >= fmin) << "subnormal " << out[at];
          }
          for (int64_t j = 0; j < n; ++j) {
            if (j != at) ASSERT_LE(Ulps(out[j], Want(-0.5f)), 2) << j;
          }
          isa.exp(in.data(), in.data(), n);  // in place
          if (!std::isnan(want)) ASSERT_EQ(in[at], out[at]);
        }
      }
    }
  }
}

// The Softmax kernel's arithmetic, scalar (attention.cc's plain loop).
std::vector<float> ScalarSoftmax(std::vector<float> x) {
  float m = x[0];
  for (float v : x) m = v > m ? v : m;
  double total = 0;
  for (float& v : x) {
    v = std::exp(v - m);
    total += v;
  }
  const float inv = static_cast<float>(1.0 / total);
  for (float& v : x) v *= inv;
  return x;
}

TEST(SimdExpTest, SoftmaxRowsMatchTheScalarArithmetic) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(20261203);
  std::normal_distribution<float> g(0.0f, 6.0f);
  for (const Isa& isa : Isas()) {
    if (!isa.available) continue;
    SCOPED_TRACE(isa.name);
    for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 79, 128, 255, 256, 257, 1000}) {
      for (int kind = 0; kind < 6; ++kind) {
        std::vector<float> x(n);
        for (float& v : x) v = g(rng);
        if (kind == 1) {  // a causal mask's -inf tail
          for (int64_t j = n / 2 + 1; j < n; ++j) x[j] = -inf;
        } else if (kind == 2) {  // -inf at random, the first kept
          for (int64_t j = 1; j < n; ++j) x[j] = rng() % 3 == 0 ? -inf : x[j];
        } else if (kind == 3) {  // a -1e9 fill (far below log(FLT_MIN) of the max)
          for (int64_t j = 0; j < n; ++j) x[j] = j % 2 ? -1e9f : x[j];
        } else if (kind == 4) {  // large values and spread
          for (float& v : x) v *= 40.0f;
        } else if (kind == 5) {  // the max in the tail
          x[n - 1] = 500.0f;
        }
        const std::vector<float> want = ScalarSoftmax(x);
        std::vector<float> got = x;
        isa.softmax(got.data(), n);
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          SCOPED_TRACE("n " + std::to_string(n) + " kind " + std::to_string(kind) + " j " + std::to_string(j));
          ASSERT_NEAR(got[j], want[j], 1e-6f * want[j] + 1e-30f);
          ASSERT_TRUE(got[j] == 0.0f || got[j] >= std::numeric_limits<float>::min());
          sum += got[j];
        }
        EXPECT_NEAR(sum, 1.0, 1e-5) << n << " " << kind;
      }
      // NaN rows: all -inf, a NaN first (the max is NaN), a NaN later (its exp).
      for (int64_t nan_at : {int64_t{-1}, int64_t{0}, n - 1}) {
        std::vector<float> x(n, -inf);
        if (nan_at >= 0) {
          for (int64_t j = 0; j < n; ++j) x[j] = static_cast<float>(j % 5);
          x[nan_at] = nan;
        }
        isa.softmax(x.data(), n);
        for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(std::isnan(x[j])) << n << " " << nan_at << " " << j;
      }
    }
  }
}

// The Sigmoid kernel's scalar arithmetic (elementwise.cc's SigmoidOp) in
// double, rounded to float: what the vectorised one must come within 4 ulp of.
float WantSigmoid(float x) {
  const double d = x;
  const double y = d >= 0 ? 1.0 / (1.0 + std::exp(-d)) : std::exp(d) / (1.0 + std::exp(d));
  return static_cast<float>(y);
}

TEST(SimdExpTest, SigmoidWithinFourUlpsAndEdgeValues) {
  std::vector<float> xs;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-90.0f, 90.0f), narrow(-8.0f, 8.0f);
  for (int i = 0; i < 200000; ++i) xs.push_back(i % 2 ? wide(rng) : narrow(rng));
  const float inf = std::numeric_limits<float>::infinity();
  const float edges[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.7f, 100.0f, -100.0f, inf, -inf};
  for (float e : edges) xs.push_back(e);
  for (const Isa& isa : Isas()) {
    if (!isa.available) continue;
    void (*sigmoid)(const float*, float*, int64_t) =
        std::string(isa.name) == "avx2" ? cpu::SigmoidAvx2 : cpu::SigmoidAvx512;
    // Every length up to 40 (the masked tails) and the whole sweep.
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{17}, int64_t{40},
                      static_cast<int64_t>(xs.size())}) {
      std::vector<float> y(static_cast<size_t>(n) + 1, 42.0f);
      const float* x = xs.data() + xs.size() - static_cast<size_t>(n);
      sigmoid(x, y.data(), n);
      EXPECT_EQ(y[static_cast<size_t>(n)], 42.0f) << isa.name << ": wrote past n=" << n;
      int64_t worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float want = WantSigmoid(x[i]);
        // Below FLT_MIN the exp is 0, so the result is 0 (want is subnormal or 0).
        if (want < std::numeric_limits<float>::min()) {
          ASSERT_EQ(y[static_cast<size_t>(i)], 0.0f) << isa.name << " x=" << x[i];
          continue;
        }
        const int64_t u = Ulps(y[static_cast<size_t>(i)], want);
        ASSERT_LE(u, 4) << isa.name << " x=" << x[i] << " got " << y[static_cast<size_t>(i)] << " want " << want;
        worst = std::max(worst, u);
      }
    }
    float in[3] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf}, out[3];
    sigmoid(in, out, 3);
    EXPECT_TRUE(std::isnan(out[0])) << isa.name;
    EXPECT_EQ(out[1], 1.0f) << isa.name;
    EXPECT_EQ(out[2], 0.0f) << isa.name;
    float mid[2] = {0.0f, -0.0f};
    sigmoid(mid, mid, 2);  // in place
    EXPECT_EQ(mid[0], 0.5f) << isa.name;
    EXPECT_EQ(mid[1], 0.5f) << isa.name;
  }
}

TEST(SimdExpTest, TanhWithinFourUlpsAndEdgeValues) {
  std::vector<float> xs;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> wide(-12.0f, 12.0f), narrow(-1.0f, 1.0f), tiny(-1e-3f, 1e-3f);
  for (int i = 0; i < 300000; ++i) xs.push_back(i % 3 == 0 ? wide(rng) : i % 3 == 1 ? narrow(rng) : tiny(rng));
  const float inf = std::numeric_limits<float>::infinity();
  for (float e : {0.0f, -0.0f, 1e-30f, -1e-30f, 0.625f, -0.625f, 0.6249999f, 9.0f, -9.0f, 50.0f, -50.0f, inf, -inf}) {
    xs.push_back(e);
  }
  for (const Isa& isa : Isas()) {
    if (!isa.available) continue;
    void (*tanh_n)(const float*, float*, int64_t) = std::string(isa.name) == "avx2" ? cpu::TanhAvx2 : cpu::TanhAvx512;
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{13}, int64_t{16}, int64_t{33},
                      static_cast<int64_t>(xs.size())}) {
      std::vector<float> y(static_cast<size_t>(n) + 1, 42.0f);
      const float* x = xs.data() + xs.size() - static_cast<size_t>(n);
      tanh_n(x, y.data(), n);
      EXPECT_EQ(y[static_cast<size_t>(n)], 42.0f) << isa.name << ": wrote past n=" << n;
      for (int64_t i = 0; i < n; ++i) {
        const float want = static_cast<float>(std::tanh(static_cast<double>(x[i])));
        ASSERT_LE(Ulps(y[static_cast<size_t>(i)], want), 4)
            << isa.name << " x=" << x[i] << " got " << y[static_cast<size_t>(i)] << " want " << want;
      }
    }
    float in[2] = {std::numeric_limits<float>::quiet_NaN(), -0.0f}, out[2];
    tanh_n(in, out, 2);
    EXPECT_TRUE(std::isnan(out[0])) << isa.name;
    EXPECT_TRUE(out[1] == 0.0f && std::signbit(out[1])) << isa.name << ": tanh(-0) is -0";
  }
}

}  // namespace
}  // namespace grove::testing
#endif  // GROVE_SIMD_EXP
