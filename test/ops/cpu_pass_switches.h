// Scoped switches of the CPU plan passes (lib/backends/cpu/activation_fusion.h)
// for the tests that compare a plan made with a pass on and off: each sets
// its switch for the scope and restores it.
//
//   testing::ScopedChannelsLast layout(false);  // plans made now stay NCHW
#ifndef GROVE_TEST_OPS_CPU_PASS_SWITCHES_H_
#define GROVE_TEST_OPS_CPU_PASS_SWITCHES_H_

#include "lib/backends/cpu/activation_fusion.h"

namespace grove::testing {

template <bool (*kGet)(), void (*kSet)(bool)>
class ScopedSwitch {
 public:
  explicit ScopedSwitch(bool on) : before_(kGet()) { kSet(on); }
  ~ScopedSwitch() { kSet(before_); }
  ScopedSwitch(const ScopedSwitch&) = delete;
  ScopedSwitch& operator=(const ScopedSwitch&) = delete;

 private:
  bool before_;
};

// Whether plans chain oneDNN steps.
using ScopedChains = ScopedSwitch<&cpu::OneDnnChainsEnabled, &cpu::SetOneDnnChainsEnabled>;
// Whether plans store activations channels-last.
using ScopedChannelsLast = ScopedSwitch<&cpu::ChannelsLastEnabled, &cpu::SetChannelsLastEnabled>;

// Channels-last window steps prepared as if their kernels could not read the
// layout: X, Y (and a fused residual) transposed through the workspace.
class ScopedCopiesOnly {
 public:
  ScopedCopiesOnly() { cpu::SetChannelsLastCopiesOnly(true); }
  ~ScopedCopiesOnly() { cpu::SetChannelsLastCopiesOnly(false); }
  ScopedCopiesOnly(const ScopedCopiesOnly&) = delete;
  ScopedCopiesOnly& operator=(const ScopedCopiesOnly&) = delete;
};

}  // namespace grove::testing

#endif  // GROVE_TEST_OPS_CPU_PASS_SWITCHES_H_
