// What this CPU offers, read from its own feature flags (cpuid, with the
// operating system's saved register state checked through xgetbv, so AVX
// and AVX-512 count only where the OS preserves their registers), and which
// code paths the CPU backend takes on it: oneDNN's JIT ISA, the BLAS core
// OpenBLAS chose, grove's own AVX2 kernels. grove's kernels pick their paths
// from HostCpuFeatures(), never from a library's guess of the CPU; `grove
// version --verbose` prints DescribeCpuBackend().
//
//   if (HostCpuFeatures().avx2 && HostCpuFeatures().fma) { ... AVX2 path ... }
#ifndef GROVE_LIB_BACKENDS_CPU_CPU_FEATURES_H_
#define GROVE_LIB_BACKENDS_CPU_CPU_FEATURES_H_

#include <string>
#include <utility>
#include <vector>

namespace grove::cpu {

struct CpuFeatures {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...; "" off x86
  std::string brand;   // "AMD EPYC 9454 ...", as cpuid gives it
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx_vnni = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
};

// Detected once per process (thread-safe).
const CpuFeatures& HostCpuFeatures();

// The feature names present, in a fixed order ("sse4.2 avx avx2 fma ...").
std::string FeatureList(const CpuFeatures& f);

// grove's own AVX2 + FMA kernels (the CPU attention's) run on this CPU.
bool UseAvx2Kernels();

// (what, value) lines: the CPU and its features, oneDNN's version and the
// ISA its JIT code uses here, the BLAS and the core it runs, grove's AVX2
// kernels, the ISA of grove's LSTM kernel (recurrent_lstm.h).
std::vector<std::pair<std::string, std::string>> DescribeCpuBackend();

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_CPU_FEATURES_H_
