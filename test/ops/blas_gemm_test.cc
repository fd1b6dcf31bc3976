// The reference kernels' GEMM (lib/backends/cpu/blas_gemm.h): OpenBLAS
// loaded on first use, and the portable loops that stand in for it, both
// against a naive double-precision product over every transpose, alpha and
// beta, and the edge cases (empty, k == 0).
#include "lib/backends/cpu/blas_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace grove::cpu {
namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  double alpha, beta;
};

// C = alpha * op(A) op(B) + beta * C in double, with the error bound of a
// float sum of k products (gamma_k * sum |a b|, doubled) per element.
template <typename T>
void Reference(const Case& c, const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c0,
               std::vector<double>* want, std::vector<double>* bound) {
  want->assign(static_cast<size_t>(c.m * c.n), 0.0);
  bound->assign(want->size(), 0.0);
  const double eps = std::is_same_v<T, float> ? 0x1p-24 : 0x1p-53;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double av = a[c.ta ? p * c.m + i : i * c.k + p];
        const double bv = b[c.tb ? j * c.k + p : p * c.n + j];
        sum += av * bv;
        mag += std::fabs(av * bv);
      }
      const double old = c.beta == 0 ? 0.0 : c.beta * static_cast<double>(c0[i * c.n + j]);
      (*want)[i * c.n + j] = c.alpha * sum + old;
      (*bound)[i * c.n + j] =
          2 * (static_cast<double>(c.k + 2) * eps * (std::fabs(c.alpha) * mag + std::fabs(old))) + 1e-30;
    }
  }
}

template <typename T, typename Fn>
void Check(const Case& c, Fn gemm, const char* what) {
  std::mt19937 rng(static_cast<uint32_t>(c.m * 131 + c.n * 17 + c.k));
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<T> a(static_cast<size_t>(c.m * c.k)), b(static_cast<size_t>(c.k * c.n)), y(static_cast<size_t>(c.m * c.n));
  for (T& v : a) v = static_cast<T>(dist(rng));
  for (T& v : b) v = static_cast<T>(dist(rng));
  // beta == 0 never reads C: a NaN there must not reach the result.
  for (T& v : y) v = c.beta == 0 ? std::nan("") : static_cast<T>(dist(rng));
  const std::vector<T> c0 = y;
  std::vector<double> want, bound;
  Reference(c, a, b, c0, &want, &bound);
  gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), b.data(), c.beta, y.data());
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_LE(std::fabs(static_cast<double>(y[i]) - want[i]), bound[i])
        << what << " ta=" << c.ta << " tb=" << c.tb << " m=" << c.m << " n=" << c.n << " k=" << c.k
        << " alpha=" << c.alpha << " beta=" << c.beta << " at " << i << ": " << y[i] << " vs " << want[i];
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const auto& [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
               {1, 1, 1}, {3, 5, 7}, {17, 1, 33}, {1, 19, 64}, {40, 24, 9}, {0, 4, 3}, {4, 0, 3}, {5, 6, 0}}) {
        for (const auto& [alpha, beta] : std::vector<std::pair<double, double>>{{1, 0}, {0.5, 0}, {1, 1}, {-2, 0.25}}) {
          cases.push_back({ta, tb, m, n, k, alpha, beta});
        }
      }
    }
  }
  return cases;
}

using FloatGemm = void (*)(bool, bool, int64_t, int64_t, int64_t, double, const float*, const float*, double, float*);
using DoubleGemm = void (*)(bool, bool, int64_t, int64_t, int64_t, double, const double*, const double*, double,
                            double*);

TEST(BlasGemm, BlasMatchesNaiveProduct) {
  for (const Case& c : Cases()) {
    Check<float>(c, static_cast<FloatGemm>(&Gemm), "Gemm<float>");
    Check<double>(c, static_cast<DoubleGemm>(&Gemm), "Gemm<double>");
  }
}

TEST(BlasGemm, PortableLoopsMatchNaiveProduct) {
  for (const Case& c : Cases()) {
    Check<float>(c, static_cast<FloatGemm>(&PortableGemm), "PortableGemm<float>");
    Check<double>(c, static_cast<DoubleGemm>(&PortableGemm), "PortableGemm<double>");
  }
}

TEST(BlasGemm, OpenBlasIsLoadedOnFirstUseAndDescribed) {
  // This machine has Debian's OpenBLAS (the build found its headers); the
  // GEMMs above loaded it.
  Gemm(false, false, 1, 1, 1, 1.0, std::vector<float>{2}.data(), std::vector<float>{3}.data(), 0.0,
       std::vector<float>(1).data());
  EXPECT_TRUE(BlasLoadedYet());
  if (!BlasLoaded()) GTEST_SKIP() << DescribeBlas();
  EXPECT_NE(DescribeBlas().find(", core "), std::string::npos) << DescribeBlas();
}

}  // namespace
}  // namespace grove::cpu
