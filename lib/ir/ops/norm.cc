// Op definitions of the norm group (ONNX opset 13-17): BatchNormalization
// (inference and training mode), InstanceNormalization, LayerNormalization,
// MeanVarianceNormalization, Softmax, LogSoftmax and Hardmax. The same group
// name holds their kernels (lib/backends/cpu/norm.cc, lib/backends/cuda/norm.cc,
// jit/kernels/norm.cuh; CUDA's Softmax in jit/kernels/softmax.cuh), the
// checks both backends share (lib/backends/common/norm_checks.h) and their
// tests (test/ops/norm_test.cc). Dims that must agree but are symbolic here
// are checked by the kernels' prepares once concrete.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/channel_checks.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::ir {
namespace {

// ---------------------------------------------------------------------------
// BatchNormalization, InstanceNormalization, LayerNormalization
// ---------------------------------------------------------------------------

// training_mode=1 (deterministic: no dropout) normalizes with the batch's
// own statistics and also gives the updated running_mean and running_var.
absl::Status InferBatchNormalization(ShapeContext& ctx) {
  const int64_t training = ctx.attrs().GetInt("training_mode", 0);
  if (training != 0 && training != 1) {
    return ctx.Error(absl::StrCat("attribute 'training_mode' is ", training, "; expected 0 or 1"));
  }
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    if (training == 0 && ctx.node().outputs[i] >= 0) {
      return ctx.Error(absl::StrCat("output ", i, " (", i == 1 ? "running_mean" : "running_var",
                                    ") is given, but it exists only with training_mode=1"));
    }
  }
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckImageRank(ctx, 0, "X", 2); !s.ok()) return s;
  const SymDim& channels = ctx.input_shape(0)[1];
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    if (absl::Status s = CheckInputDType(ctx, i, kNames[i], kFloatDTypes); !s.ok()) return s;
    if (absl::Status s = CheckChannelVector(ctx, i, kNames[i], channels); !s.ok()) return s;
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.SetOutput(i, ctx.input_dtype(3 + i - 1), {channels});
  return absl::OkStatus();
}

absl::Status InferInstanceNormalization(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckImageRank(ctx, 0, "input", 3); !s.ok()) return s;
  const SymDim& channels = ctx.input_shape(0)[1];
  static constexpr const char* kNames[] = {"input", "scale", "B"};
  for (int i = 1; i < 3; ++i) {
    if (absl::Status s = CheckInputDType(ctx, i, kNames[i], {ctx.input_dtype(0)}); !s.ok()) return s;
    if (absl::Status s = CheckChannelVector(ctx, i, kNames[i], channels); !s.ok()) return s;
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferLayerNormalization(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  const int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("input 0 (X) is a scalar; LayerNormalization needs rank >= 1");
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", axis.status().message()));
  const int64_t stash = ctx.attrs().GetInt("stash_type", 1);
  if (stash != 1) {
    return ctx.Error(
        absl::StrCat("attribute 'stash_type' is ", stash, "; only 1 (compute in float) is supported"));
  }
  const SymShape& x = ctx.input_shape(0);
  const SymShape normalized(x.begin() + *axis, x.end());
  static constexpr const char* kNames[] = {"X", "Scale", "B"};
  for (int i = 1; i < 3; ++i) {
    if (i == 2 && !ctx.has_input(2)) continue;
    if (absl::Status s = CheckInputDType(ctx, i, kNames[i], {ctx.input_dtype(0)}); !s.ok()) return s;
    // Broadcast onto X's normalized dims (the dims from axis on).
    const SymShape& p = ctx.input_shape(i);
    bool ok = p.size() <= normalized.size();
    for (size_t k = 0; ok && k < p.size(); ++k) {
      const SymDim& want = normalized[normalized.size() - p.size() + k];
      if (!(p[k].is_const() && p[k].value() == 1) && ConstMismatch(p[k], want)) ok = false;
    }
    if (!ok) {
      return ctx.Error(absl::StrCat(InputName(i, kNames[i]), " has shape ", ShapeString(ctx, p),
                                    ", which does not broadcast to the normalized dims ",
                                    ShapeString(ctx, normalized), " of input 0 (X) (axis ", *axis, ")"));
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), x);
  SymShape stat(x.begin(), x.begin() + *axis);
  stat.resize(x.size(), SymDim(1));
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, DType::kF32, stat);
  if (ctx.num_outputs() > 2) ctx.SetOutput(2, DType::kF32, std::move(stat));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax
// ---------------------------------------------------------------------------

// Softmax and LogSoftmax follow opset 13 (one axis, default -1).
absl::Status InferSoftmaxFamily(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kFloatDTypes); !s.ok()) return s;
  if (ctx.input_rank(0) == 0) {
    return ctx.Error(absl::StrCat("input 0 (input) is a scalar; ", ctx.node().type, " needs rank >= 1"));
  }
  const int64_t axis = ctx.attrs().GetInt("axis", -1);
  if (absl::StatusOr<int> a = NormalizeAxis(axis, ctx.input_rank(0)); !a.ok()) {
    return ctx.Error(absl::StrCat("attribute 'axis': ", a.status().message()));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

// Hardmax follows opset 13 (one axis, default -1); the importer rewrites the
// 2-D coercion of older opsets around it.
absl::Status InferHardmax(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kFloatDTypes); !s.ok()) return s;
  if (ctx.input_rank(0) == 0) return ctx.Error("input 0 (input) is a scalar; Hardmax needs rank >= 1");
  if (absl::StatusOr<int> a = NormalizeAxis(ctx.attrs().GetInt("axis", -1), ctx.input_rank(0)); !a.ok()) {
    return ctx.Error(absl::StrCat("attribute 'axis': ", a.status().message()));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MeanVarianceNormalization
// ---------------------------------------------------------------------------

absl::Status InferMeanVarianceNormalization(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  const std::vector<int64_t> axes = ctx.attrs().GetInts("axes", {0, 2, 3});
  if (absl::StatusOr<std::vector<bool>> r = ReducedDims(axes, ctx.input_rank(0), false); !r.ok()) {
    return ctx.Error(absl::StrCat("attribute 'axes': ", r.status().message()));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterNormOps(OpRegistry& registry) {
  OpDef defs[] = {
      MakeOpDef("BatchNormalization", 5, 5,
                {{"epsilon", AttrKind::kFloat}, {"momentum", AttrKind::kFloat}, {"training_mode", AttrKind::kInt}},
                &InferBatchNormalization),
      MakeOpDef("LayerNormalization", 2, 3,
                {{"axis", AttrKind::kInt}, {"epsilon", AttrKind::kFloat}, {"stash_type", AttrKind::kInt}},
                &InferLayerNormalization),
      MakeOpDef("InstanceNormalization", 3, 3, {{"epsilon", AttrKind::kFloat}}, &InferInstanceNormalization),
      MakeOpDef("MeanVarianceNormalization", 1, 1, {{"axes", AttrKind::kInts}}, &InferMeanVarianceNormalization),
      MakeOpDef("Softmax", 1, 1, {{"axis", AttrKind::kInt}}, &InferSoftmaxFamily),
      MakeOpDef("LogSoftmax", 1, 1, {{"axis", AttrKind::kInt}}, &InferSoftmaxFamily),
      MakeOpDef("Hardmax", 1, 1, {{"axis", AttrKind::kInt}}, &InferHardmax),
  };
  for (OpDef& def : defs) {
    // BatchNormalization and LayerNormalization have optional outputs
    // (running statistics; Mean and InvStdDev).
    if (def.type == "BatchNormalization" || def.type == "LayerNormalization") def.max_outputs = 3;
    // The CUDA kernel normalizes with the given statistics only.
    if (def.type == "BatchNormalization") {
      def.backend_takes = [](Backend backend, const Node& node) {
        return backend != Backend::kCuda || node.attrs.GetInt("training_mode", 0) == 0;
      };
    }
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
