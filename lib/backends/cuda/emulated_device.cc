#include "lib/backends/cuda/emulated_device.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/emulation_launch.h"
#include "jit/kernels/prelude.cuh"
#include "lib/backends/cuda/host_memory.h"

namespace grove::cuda {
namespace {

float LoadF(DType dtype, const void* base, int64_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kF16: return grove_k::to_f32(static_cast<const grove_k::f16*>(base)[i]);
    case DType::kBF16: return grove_k::to_f32(static_cast<const grove_k::bf16*>(base)[i]);
    default: return 0;
  }
}

void StoreF(DType dtype, void* base, int64_t i, float v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(base)[i] = v; break;
    case DType::kF16: static_cast<grove_k::f16*>(base)[i] = grove_k::from_f32<grove_k::f16>(v); break;
    case DType::kBF16: static_cast<grove_k::bf16*>(base)[i] = grove_k::from_f32<grove_k::bf16>(v); break;
    default: break;
  }
}

// What a fast compute mode does to an f32 GEMM input before the multiply.
float RoundForMath(const GemmDesc& g, float v) {
  if (g.dtype != DType::kF32) return v;
  switch (g.math) {
    case GemmDesc::Math::kF32: return v;
    case GemmDesc::Math::kBF16: return grove_k::bf16_to_f32(grove_k::f32_to_bf16(v));
    case GemmDesc::Math::kF16: return grove_k::f16_to_f32(grove_k::f32_to_f16(v));
    case GemmDesc::Math::kTF32: {  // 10 mantissa bits, round to nearest even
      uint32_t x;
      std::memcpy(&x, &v, 4);
      if ((x & 0x7f800000u) != 0x7f800000u) x = (x + 0xfffu + ((x >> 13) & 1u)) & ~0x1fffu;
      std::memcpy(&v, &x, 4);
      return v;
    }
  }
  return v;
}

class EmulatedDevice final : public HostMemoryDevice<> {
 public:
  explicit EmulatedDevice(int conditional_level)
      : HostMemoryDevice({.alignment = 256, .error_prefix = "emulated device: "}) {
    conditional_level_ = std::clamp(conditional_level, 0, 2);
  }
  std::string Describe() const override { return "emulated CUDA device (host threads)"; }
  bool emulated() const override { return true; }
  int arch() const override { return 90; }

  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                      const void* params, size_t params_bytes, Stream) override {
    if (!jit::InManifest(module)) {
      return absl::NotFoundError(absl::StrCat("kernel module ", module.file, jit::Suffix(module),
                                              " is not in jit/kernels/kernels.cmake"));
    }
    const std::string name = jit::EntryName(kernel, module);
    emu::EntryFn fn = emu::FindEntry(name);
    if (fn == nullptr) return absl::NotFoundError(absl::StrCat("no kernel entry point ", name));
    const bool indirect = module.indirect;
    if (indirect) {
      // The one parameter is a device pointer to the struct, read when the
      // kernel runs (a replay sees what the host copied there since).
      if (params_bytes != sizeof(void*)) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": an indirect launch takes one device pointer, given ",
                                                       params_bytes, " bytes"));
      }
      const void* block;
      std::memcpy(&block, params, sizeof(block));
      if (!memory_.Contains(block)) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": indirect parameters not in device memory"));
      }
    }
    // The struct the entry reads: the bytes given, or where they point.
    auto target = [indirect](const uint8_t* bytes) {
      const void* p = bytes;
      if (indirect) std::memcpy(&p, bytes, sizeof(p));
      return p;
    };
    if (HostGraph* g = capturing()) {
      // The parameter bytes as they are now: a replay must not see what the
      // caller writes into its struct later (as a CUDA graph's node).
      std::vector<uint8_t> bytes(static_cast<const uint8_t*>(params), static_cast<const uint8_t*>(params) + params_bytes);
      g->Add([fn, dims, target, bytes = std::move(bytes)] {
        return emu::Launch(fn, dims.grid, dims.block, target(bytes.data()));
      }, params_bytes);
      return absl::OkStatus();
    }
    counters_.CountLaunch();
    return emu::Launch(fn, dims.grid, dims.block, target(static_cast<const uint8_t*>(params)));
  }
  absl::Status Gemm(const GemmDesc& g, Stream) override {
    if (g.dtype != DType::kF32 && g.dtype != DType::kF16 && g.dtype != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat("GEMM on ", DTypeName(g.dtype)));
    }
    if (g.out_dtype() != g.dtype && (g.out_dtype() != DType::kF32 || g.bias != nullptr)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GEMM of ", DTypeName(g.dtype), " into ", DTypeName(g.out_dtype())));
    }
    if (HostGraph* graph = capturing()) {
      graph->Add([g] { return RunGemm(g); }, sizeof(GemmDesc));
      return absl::OkStatus();
    }
    counters_.CountGemm();
    return RunGemm(g);
  }
  DeviceStats stats() const override {
    DeviceStats s;
    counters_.Fill(&s);
    s.bytes_allocated = memory_.bytes_allocated();
    s.peak_bytes_allocated = memory_.peak_bytes_allocated();
    return s;
  }

 private:
  static absl::Status RunGemm(const GemmDesc& g) {
    for (int64_t b = 0; b < g.batch; ++b) {
      const int64_t oa = b * g.stride_a, ob = b * g.stride_b, oc = b * g.stride_c;
      for (int64_t i = 0; i < g.m; ++i) {
        for (int64_t j = 0; j < g.n; ++j) {
          float acc = 0;
          for (int64_t p = 0; p < g.k; ++p) {
            const int64_t ia = g.trans_a ? p * g.lda + i : i * g.lda + p;
            const int64_t ib = g.trans_b ? j * g.ldb + p : p * g.ldb + j;
            acc += RoundForMath(g, LoadF(g.dtype, g.a, oa + ia)) * RoundForMath(g, LoadF(g.dtype, g.b, ob + ib));
          }
          float v = g.alpha * acc;
          if (g.beta != 0) v += g.beta * LoadF(g.out_dtype(), g.c, oc + i * g.ldc + j);
          if (g.bias != nullptr) v += LoadF(g.dtype, g.bias, j);
          if (g.epilogue == GemmDesc::Epilogue::kRelu) v = v > 0 ? v : 0;
          if (g.epilogue == GemmDesc::Epilogue::kGelu) v = 0.5f * v * (1.0f + std::erf(v * 0.70710678f));
          StoreF(g.out_dtype(), g.c, oc + i * g.ldc + j, v);
        }
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::shared_ptr<Device> NewEmulatedDevice(int conditional_level) {
  return std::make_shared<EmulatedDevice>(conditional_level);
}

}  // namespace grove::cuda
