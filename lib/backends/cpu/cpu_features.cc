// CPU feature detection (cpuid + xgetbv) and the description of the CPU
// backend's paths (see the header).
#include "lib/backends/cpu/cpu_features.h"

#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "lib/backends/cpu/blas_gemm.h"
#include "lib/backends/cpu/recurrent_lstm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define GROVE_X86 1
#endif

namespace grove::cpu {
namespace {

#if GROVE_X86
struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs Cpuid(uint32_t leaf, uint32_t sub = 0) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

// The OS's XCR0: which register states it saves on a context switch.
uint64_t Xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool Bit(uint32_t v, int i) { return ((v >> i) & 1u) != 0; }

CpuFeatures Detect() {
  CpuFeatures f;
  const Regs v = Cpuid(0);
  const uint32_t max_leaf = v.a;
  char vendor[13] = {};
  std::memcpy(vendor, &v.b, 4);
  std::memcpy(vendor + 4, &v.d, 4);
  std::memcpy(vendor + 8, &v.c, 4);
  f.vendor = vendor;
  if (Cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = Cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    f.brand = std::string(absl::StripAsciiWhitespace(brand));
  }
  if (max_leaf < 1) return f;
  const Regs l1 = Cpuid(1);
  f.sse42 = Bit(l1.c, 20);
  const bool osxsave = Bit(l1.c, 27);
  const uint64_t xcr0 = osxsave ? Xcr0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;     // XTILECFG, XTILEDATA
  f.avx = os_avx && Bit(l1.c, 28);
  f.fma = f.avx && Bit(l1.c, 12);
  f.f16c = f.avx && Bit(l1.c, 29);
  if (max_leaf < 7) return f;
  const Regs l7 = Cpuid(7, 0);
  f.avx2 = f.avx && Bit(l7.b, 5);
  f.avx512f = os_avx512 && Bit(l7.b, 16);
  f.avx512dq = f.avx512f && Bit(l7.b, 17);
  f.avx512bw = f.avx512f && Bit(l7.b, 30);
  f.avx512vl = f.avx512f && Bit(l7.b, 31);
  f.avx512_vnni = f.avx512f && Bit(l7.c, 11);
  f.amx_bf16 = os_amx && Bit(l7.d, 22);
  f.amx_tile = os_amx && Bit(l7.d, 24);
  f.amx_int8 = os_amx && Bit(l7.d, 25);
  if (l7.a >= 1) {
    const Regs l71 = Cpuid(7, 1);
    f.avx_vnni = f.avx2 && Bit(l71.a, 4);
    f.avx512_bf16 = f.avx512f && Bit(l71.a, 5);
  }
  return f;
}
#else
CpuFeatures Detect() { return CpuFeatures(); }
#endif

std::string IsaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse4.1";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return absl::StrCat("isa 0x", absl::Hex(static_cast<int>(isa)));
  }
}

}  // namespace

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

std::string FeatureList(const CpuFeatures& f) {
  const std::pair<bool, const char*> all[] = {
      {f.sse42, "sse4.2"},       {f.avx, "avx"},           {f.avx2, "avx2"},
      {f.fma, "fma"},            {f.f16c, "f16c"},         {f.avx_vnni, "avx_vnni"},
      {f.avx512f, "avx512f"},    {f.avx512dq, "avx512dq"}, {f.avx512bw, "avx512bw"},
      {f.avx512vl, "avx512vl"},  {f.avx512_vnni, "avx512_vnni"}, {f.avx512_bf16, "avx512_bf16"},
      {f.amx_tile, "amx_tile"},  {f.amx_bf16, "amx_bf16"}, {f.amx_int8, "amx_int8"},
  };
  std::vector<const char*> names;
  for (const auto& [has, name] : all) {
    if (has) names.push_back(name);
  }
  return names.empty() ? "none of sse4.2/avx/avx2/avx512/amx" : absl::StrJoin(names, " ");
}

bool UseAvx2Kernels() {
  static const bool use = HostCpuFeatures().avx2 && HostCpuFeatures().fma;
  return use;
}

std::vector<std::pair<std::string, std::string>> DescribeCpuBackend() {
  const CpuFeatures& f = HostCpuFeatures();
  std::vector<std::pair<std::string, std::string>> lines;
  lines.emplace_back("cpu", absl::StrCat(f.brand.empty() ? "unknown" : f.brand,
                                         f.vendor.empty() ? "" : absl::StrCat(" (", f.vendor, ")"), ", ",
                                         std::thread::hardware_concurrency(), " logical cores"));
  lines.emplace_back("cpu features", FeatureList(f));
  const dnnl_version_t* v = dnnl_version();
  // oneDNN detects the ISA from cpuid itself (DNNL_MAX_CPU_ISA can lower it).
  lines.emplace_back("onednn", absl::StrCat(v->major, ".", v->minor, ".", v->patch, ", JIT ISA ",
                                            IsaName(dnnl_get_effective_cpu_isa()),
                                            ": Conv, MatMul, Gemm, pooling, BatchNormalization, "
                                            "Softmax, LSTM/GRU/RNN in f32"));
  // Loads OpenBLAS (blas_gemm.h: on first use; plain `grove version` does not).
  lines.emplace_back("blas", absl::StrCat(DescribeBlas(), BlasLoaded() ? ": f64 GEMMs and the f32 ones of the "
                                                                         "reference kernels"
                                                                       : ""));
  lines.emplace_back("grove avx2 kernels",
                     UseAvx2Kernels() ? "on (attention scores, softmax and outputs; avx2 + fma detected)"
                                      : "off (needs avx2 and fma): portable C++ loops");
  const std::string lstm_isa = LstmKernelIsa();
  lines.emplace_back("grove lstm kernel",
                     lstm_isa.empty() ? "off (needs avx2 and fma): oneDNN's or the reference LSTM"
                     : GetLstmKernelMode() == LstmKernelMode::kOff
                         ? "off (GROVE_CPU_LSTM_KERNEL=0 or GROVE_CPU_ONEDNN=0)"
                         : absl::StrCat("on, ", lstm_isa, " (f32 layers of batch x hidden <= 256)"));
  return lines;
}

}  // namespace grove::cpu
