// The host of a kernel run outside a plan that needs nothing of it but a
// workspace (KernelContext::Host's default: host memory) and, when asked
// for, a place for the strings it makes: plan-time folding, Tensor::CastOf,
// ir::RunKernel without a host. Such kernels never allocate their outputs or
// run a subgraph; one that asks gets an Internal error naming the caller.
//
//   ir::PlainHost host("folded op");
//   ir::KernelContext ctx(node, ins, outs, &host);
//   absl::Status s = ir::RunKernel(ir::Backend::kCpu, ctx);
#ifndef GROVE_LIB_IR_PLAIN_HOST_H_
#define GROVE_LIB_IR_PLAIN_HOST_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/string_arena.h"

namespace grove::ir {

class PlainHost : public KernelContext::Host {
 public:
  // `caller` (a literal: it is kept, not copied) names who ran the kernel in
  // the errors. Strings the kernel makes go to an arena this host owns when
  // `strings` is true; otherwise none may be made (strings() is nullptr).
  explicit PlainHost(absl::string_view caller, bool strings = false)
      : caller_(caller), strings_(strings ? std::make_unique<StringArena>() : nullptr) {}

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType, std::vector<int64_t>) override {
    return absl::InternalError(absl::StrCat(caller_, " asked to allocate output ", i));
  }
  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph, absl::Span<const TensorView>) override {
    return absl::InternalError(absl::StrCat(caller_, " asked to run subgraph ", subgraph));
  }
  StringArena* strings() override { return strings_.get(); }

 private:
  absl::string_view caller_;
  std::unique_ptr<StringArena> strings_;
};

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_PLAIN_HOST_H_
