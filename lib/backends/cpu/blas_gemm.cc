// OpenBLAS loaded on first use (see blas_gemm.h), and the portable loops
// that stand in for it where it cannot be loaded.
#include "lib/backends/cpu/blas_gemm.h"

#include <cblas.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace grove::cpu {
namespace {

// Debian's libopenblas0 is LP64: blasint is int, as FitsBlasInt assumes.
static_assert(std::is_same_v<blasint, int>, "grove's GEMM calls assume a 32-bit blasint (LP64 OpenBLAS)");

using SgemmFn = void (*)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const float*, blasint, const float*, blasint, float, float*, blasint);
using DgemmFn = void (*)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         double, const double*, blasint, const double*, blasint, double, double*, blasint);
using NameFn = char* (*)();

struct OpenBlas {
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  NameFn corename = nullptr;  // OpenBLAS' own extensions: may be absent
  NameFn config = nullptr;
  std::string error;  // why it is not loaded (sgemm == nullptr)
};

std::atomic<bool> g_loaded_yet{false};

OpenBlas Load() {
  OpenBlas blas;
  // The file GROVE_OPENBLAS_LIBRARY names (only that), else the soname of
  // Debian's libopenblas0 (an alternative: pthread, OpenMP or serial build),
  // else the development link.
  std::vector<std::string> tried;
  void* lib = nullptr;
  if (const char* env = std::getenv("GROVE_OPENBLAS_LIBRARY"); env != nullptr && *env != '\0') {
    lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) tried.push_back(absl::StrCat("GROVE_OPENBLAS_LIBRARY=", env, ": ", dlerror()));
  } else {
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
      tried.push_back(dlerror());
    }
  }
  if (lib == nullptr) {
    blas.error = absl::StrCat("OpenBLAS not loaded (", absl::StrJoin(tried, "; "),
                              "): the reference kernels' GEMMs run plain loops; install libopenblas0 or set "
                              "GROVE_OPENBLAS_LIBRARY");
    return blas;
  }
  blas.sgemm = reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm"));
  blas.dgemm = reinterpret_cast<DgemmFn>(dlsym(lib, "cblas_dgemm"));
  blas.corename = reinterpret_cast<NameFn>(dlsym(lib, "openblas_get_corename"));
  blas.config = reinterpret_cast<NameFn>(dlsym(lib, "openblas_get_config"));
  if (blas.sgemm == nullptr || blas.dgemm == nullptr) {
    blas.sgemm = nullptr;
    blas.dgemm = nullptr;
    blas.error = "OpenBLAS loaded without cblas_sgemm/cblas_dgemm: the reference kernels' GEMMs run plain loops";
  }
  return blas;
}

const OpenBlas& Blas() {
  static const OpenBlas blas = [] {
    OpenBlas b = Load();
    g_loaded_yet.store(true, std::memory_order_release);
    return b;
  }();
  return blas;
}

template <typename T>
void GemmLoops(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a, const T* b, double beta,
               T* c) {
  // op(A)[i, p] and op(B)[p, j] with their strides; rows of C accumulate
  // a row of op(B) at a time, so the inner loop runs over contiguous j
  // unless B is transposed.
  const int64_t a_row = ta ? 1 : k, a_col = ta ? m : 1;
  const int64_t b_row = tb ? 1 : n, b_col = tb ? k : 1;
  std::vector<T> acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) acc[j] = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * a_row + p * a_col];
      const T* brow = b + p * b_row;
      for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j * b_col];
    }
    T* crow = c + i * n;
    for (int64_t j = 0; j < n; ++j) {
      const T prod = static_cast<T>(alpha) * acc[j];
      crow[j] = beta == 0 ? prod : prod + static_cast<T>(beta) * crow[j];
    }
  }
}

// m or n empty: nothing; k == 0: C = beta * C. True when handled.
template <typename T>
bool GemmEdge(int64_t m, int64_t n, int64_t k, double beta, T* c) {
  if (m == 0 || n == 0) return true;
  if (k != 0) return false;
  for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0 ? T(0) : static_cast<T>(beta * c[i]);
  return true;
}

// OpenBLAS' cblas_?gemm of T (`fn`: &OpenBlas::sgemm or ::dgemm), loaded on
// the first product that is not an edge case; the loops where none loads.
template <typename T, typename Fn>
void BlasGemm(Fn OpenBlas::*fn, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a,
              const T* b, double beta, T* c) {
  if (GemmEdge(m, n, k, beta, c)) return;
  const Fn gemm = Blas().*fn;
  if (gemm == nullptr) return GemmLoops(ta, tb, m, n, k, alpha, a, b, beta, c);
  gemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
       static_cast<blasint>(n), static_cast<blasint>(k), static_cast<T>(alpha), a, static_cast<blasint>(ta ? m : k), b,
       static_cast<blasint>(tb ? k : n), static_cast<T>(beta), c, static_cast<blasint>(n));
}

}  // namespace

void PortableGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, const float* b,
                  double beta, float* c) {
  if (!GemmEdge(m, n, k, beta, c)) GemmLoops(ta, tb, m, n, k, alpha, a, b, beta, c);
}

void PortableGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  const double* b, double beta, double* c) {
  if (!GemmEdge(m, n, k, beta, c)) GemmLoops(ta, tb, m, n, k, alpha, a, b, beta, c);
}

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, const float* b,
          double beta, float* c) {
  BlasGemm(&OpenBlas::sgemm, ta, tb, m, n, k, alpha, a, b, beta, c);
}

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b,
          double beta, double* c) {
  BlasGemm(&OpenBlas::dgemm, ta, tb, m, n, k, alpha, a, b, beta, c);
}

bool BlasLoaded() { return Blas().sgemm != nullptr; }

bool BlasLoadedYet() { return g_loaded_yet.load(std::memory_order_acquire); }

std::string DescribeBlas() {
  const OpenBlas& blas = Blas();
  if (blas.sgemm == nullptr) return blas.error;
  const char* config = blas.config != nullptr ? blas.config() : nullptr;
  const char* core = blas.corename != nullptr ? blas.corename() : nullptr;
  return absl::StrCat(config != nullptr ? config : "OpenBLAS", ", core ", core != nullptr ? core : "unknown",
                      ", loaded on first use");
}

}  // namespace grove::cpu
