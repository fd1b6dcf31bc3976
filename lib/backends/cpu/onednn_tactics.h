// Choosing among oneDNN's implementations of one problem by timing them, as
// TensorRT times its tactics: oneDNN ranks its implementations by a fixed
// order (brgemm-based kernels first on AVX-512), and on some CPUs and
// shapes the next one is faster. Measured on one thread of this project's
// AMD EPYC (AVX-512), channels-last f32 3x3 Convs: the depthwise `jit_dw`
// kernel takes 0.45-0.78x the time of oneDNN's first pick `brdgmm_dw`
// (4x16x32x32: 20 against 25-40 us), `jit:avx512_core` 0.83-0.95x of
// `brgconv` at 8-64 input channels (4x16x16x16 -> 32: 79-94 against 84-106
// us), while `brgconv` stays ahead at 128+ channels and strided 64 -> 128.
// No fixed rule holds across CPUs, so the prepare measures.
#ifndef GROVE_LIB_BACKENDS_CPU_ONEDNN_TACTICS_H_
#define GROVE_LIB_BACKENDS_CPU_ONEDNN_TACTICS_H_

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace grove::cpu {

// At most this many implementations of a problem are timed (oneDNN's first
// ones taken: later ones are its slower fallbacks).
inline constexpr int kMaxTimedImpls = 2;

// Problems above this many multiply-adds keep oneDNN's first pick untimed:
// one run takes ~0.5 ms or more here, and there the picks measured within a
// few percent of each other (or brgemm ahead).
inline constexpr double kMaxTimedMacs = 3e7;

// Whether prepares time implementations (default on; GROVE_CPU_ONEDNN_TIMING=0
// in the environment, read once, or the setter keeps oneDNN's first pick).
bool OneDnnTimingEnabled();
void SetOneDnnTimingEnabled(bool enabled);

// How many problems prepares have timed in this process (each once: the
// choice is kept per problem for the process's life).
int64_t OneDnnProblemsTimed();

// Tests: replaces the clock. `timer(impl)` gives the seconds a run of the
// implementation named `impl` takes (nullopt: it cannot run); empty
// restores the real measurement. Choices already kept stay kept.
void SetOneDnnTimerForTest(std::function<std::optional<double>(const std::string& impl)> timer);

// Clears the kept choices (tests).
void ForgetOneDnnChoicesForTest();

namespace internal_tactics {

// The key of `pd`'s problem: `problem` (what the descriptors do not say:
// strides, pads, dilations), every argument's dims, the source's and
// destination's layouts, and the post-ops.
std::string ProblemKey(const dnnl::primitive_desc& pd, absl::string_view problem);

// oneDNN's implementations of `first`'s problem after it that may replace
// it, at most kMaxTimedImpls - 1 (the caller destroys them): not oneDNN's
// reference loops or im2col + GEMM, and the same source and destination
// layouts (the step's reorders and links stay as they are). Enumerated by a
// new iterator over `first`'s operation and attributes: oneDNN 2.6's
// primitive_desc::next_impl stops at once for a problem whose layouts
// another descriptor made before resolved (format_tag::any), the case of
// every channels-last Conv here.
std::vector<dnnl_primitive_desc_t> OtherImpls(const dnnl::primitive_desc& first);

// The implementation kept for `key` (by ChooseIndex or Keep), if any.
std::optional<std::string> KeptImpl(const std::string& key);
// Keeps `impl` for `key` (a problem with nothing else to time).
void Keep(const std::string& key, const std::string& impl);

// The index among `candidates` to use for `key` (kept, or timed now).
size_t ChooseIndex(const std::string& key, const std::vector<const dnnl::primitive_desc*>& candidates);

}  // namespace internal_tactics

// Replaces `pd` (oneDNN's first implementation of its problem) with the
// fastest of up to kMaxTimedImpls interchangeable implementations, timed on
// one thread over zero-filled arrays (a warm-up run, then the best of
// three), once per process for each problem; `macs` is the problem's
// multiply-adds and `problem` what its descriptors do not say (see
// ProblemKey). Nothing changes when timing is off, the problem is larger
// than kMaxTimedMacs or oneDNN has no other implementation.
template <typename PrimitiveDesc>
void ChooseFastestImpl(PrimitiveDesc& pd, double macs, absl::string_view problem) {
  if (!OneDnnTimingEnabled() || macs > kMaxTimedMacs || !pd) return;
  const std::string key = internal_tactics::ProblemKey(pd, problem);
  // A problem decided before for oneDNN's first pick (every plan and part
  // after the first): nothing to enumerate.
  if (internal_tactics::KeptImpl(key) == pd.impl_info_str()) return;
  std::vector<PrimitiveDesc> candidates{pd};
  for (dnnl_primitive_desc_t other : internal_tactics::OtherImpls(pd)) {
    candidates.emplace_back(other);  // a clone
    dnnl_primitive_desc_destroy(other);
  }
  if (candidates.size() < 2) {
    internal_tactics::Keep(key, pd.impl_info_str());
    return;
  }
  std::vector<const dnnl::primitive_desc*> ptrs;
  for (const PrimitiveDesc& c : candidates) ptrs.push_back(&c);
  const size_t best = internal_tactics::ChooseIndex(key, ptrs);
  if (best != 0) pd = candidates[best];
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_ONEDNN_TACTICS_H_
