// Op definitions of the vision and signal group, with ONNX semantics:
// NonMaxSuppression (opset 10+), GridSample (16; also the N-D form and the
// mode names 'linear' / 'cubic' of 20), RoiAlign (16), MaxUnpool (11), DFT
// (17, axis an attribute), STFT (17) and MelWeightMatrix (17).
// NonMaxSuppression's output size depends on the scores, so its kernel
// allocates it. The other ops' output shapes depend on input values only
// through small integer inputs (dft_length, frame_step, output_shape, ...):
// when those are not known here the dims are unknown and the runtime infers
// them again once the values are known.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/vision_params.h"

namespace grove::ir {
namespace {

constexpr DType kIntDTypes[] = {DType::kI64, DType::kI32};

bool KnownDifferent(const SymDim& a, const SymDim& b) { return a.is_const() && b.is_const() && a != b; }
bool IsConst(const SymDim& d, int64_t v) { return d.is_const() && d.value() == v; }
std::string DimString(const ShapeContext& ctx, const SymDim& d) { return d.ToString(ctx.graph().symbol_names()); }

// A scalar input (rank 0, or one element of rank 1) of one of `allowed`.
absl::Status CheckScalarInput(const ShapeContext& ctx, int i, absl::string_view name, absl::Span<const DType> allowed) {
  if (absl::Status s = CheckInputDType(ctx, i, name, allowed); !s.ok()) return s;
  const SymShape& s = ctx.input_shape(i);
  if (s.empty() || (s.size() == 1 && !KnownDifferent(s[0], SymDim(1)))) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputName(i, name), " has shape ", ShapeString(ctx, s), "; expected a scalar"));
}

// The value of a scalar integer input when known here.
bool ScalarIntValue(const ShapeContext& ctx, int i, int64_t* out) {
  std::vector<int64_t> v;
  if (!ctx.has_input(i) || !ctx.InputInts(i, &v) || v.size() != 1) return false;
  *out = v[0];
  return true;
}

// ---------------------------------------------------------------------------
// NonMaxSuppression
// ---------------------------------------------------------------------------

// Inputs 2..4 (max_output_boxes_per_class, iou_threshold, score_threshold)
// hold one value, or none for the default.
absl::Status CheckOptionalScalar(const ShapeContext& ctx, int i, absl::string_view name,
                                 absl::Span<const DType> allowed) {
  if (!ctx.has_input(i)) return absl::OkStatus();
  if (absl::Status s = CheckInputDType(ctx, i, name, allowed); !s.ok()) return s;
  const SymShape& s = ctx.input_shape(i);
  if (s.empty() || (s.size() == 1 && (!s[0].is_const() || s[0].value() <= 1))) return absl::OkStatus();
  return ctx.Error(
      absl::StrCat(InputName(i, name), " has shape ", ShapeString(ctx, s), "; expected a scalar or one element"));
}

absl::Status InferNonMaxSuppression(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "boxes", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "scores", {ctx.input_dtype(0)}); !s.ok()) return s;
  bool center = false;
  if (absl::Status s = ReadBoolAttr(ctx, "center_point_box", 0, &center); !s.ok()) return s;
  const SymShape& boxes = ctx.input_shape(0);
  const SymShape& scores = ctx.input_shape(1);
  if (boxes.size() != 3 || KnownDifferent(boxes[2], SymDim(4))) {
    return ctx.Error(absl::StrCat(InputName(0, "boxes"), " has shape ", ShapeString(ctx, boxes),
                                  "; expected [num_batches, spatial_dimension, 4]"));
  }
  if (scores.size() != 3 || KnownDifferent(scores[0], boxes[0]) || KnownDifferent(scores[2], boxes[1])) {
    return ctx.Error(absl::StrCat(InputName(1, "scores"), " has shape ", ShapeString(ctx, scores), "; expected [",
                                  DimString(ctx, boxes[0]), ", num_classes, ", DimString(ctx, boxes[1]), "] for ",
                                  InputName(0, "boxes"), " ", ShapeString(ctx, boxes)));
  }
  if (absl::Status s = CheckOptionalScalar(ctx, 2, "max_output_boxes_per_class", kIntDTypes); !s.ok()) return s;
  if (absl::Status s = CheckOptionalScalar(ctx, 3, "iou_threshold", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckOptionalScalar(ctx, 4, "score_threshold", kFloatDTypes); !s.ok()) return s;
  ctx.SetOutput(0, DType::kI64, {SymDim::Unknown(), SymDim(3)});
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// GridSample
// ---------------------------------------------------------------------------

absl::Status InferGridSample(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "grid", kFloatDTypes); !s.ok()) return s;
  if (absl::StatusOr<GridSampleAttrs> a = ReadGridSampleAttrs(ctx.attrs()); !a.ok()) {
    return ctx.Error(a.status().message());
  }
  const SymShape& x = ctx.input_shape(0);
  const SymShape& grid = ctx.input_shape(1);
  if (x.size() < 3) {
    return ctx.Error(absl::StrCat(InputName(0, "X"), " has shape ", ShapeString(ctx, x),
                                  "; expected rank >= 3 (N, C, spatial dims...)"));
  }
  const int spatial = static_cast<int>(x.size()) - 2;
  if (static_cast<int>(grid.size()) != spatial + 2 || KnownDifferent(grid[0], x[0]) ||
      KnownDifferent(grid.back(), SymDim(spatial))) {
    return ctx.Error(absl::StrCat(InputName(1, "grid"), " has shape ", ShapeString(ctx, grid), "; expected [",
                                  DimString(ctx, x[0]), ", output spatial dims (", spatial, ")..., ", spatial, "] for ",
                                  InputName(0, "X"), " ", ShapeString(ctx, x)));
  }
  SymShape out = {x[0], x[1]};
  for (int d = 0; d < spatial; ++d) out.push_back(grid[1 + d]);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// RoiAlign
// ---------------------------------------------------------------------------

absl::Status InferRoiAlign(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "rois", {ctx.input_dtype(0)}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 2, "batch_indices", kIntDTypes); !s.ok()) return s;
  absl::StatusOr<RoiAlignAttrs> attrs = ReadRoiAlignAttrs(ctx.attrs());
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  const int64_t oh = attrs->output_height, ow = attrs->output_width;
  const SymShape& x = ctx.input_shape(0);
  const SymShape& rois = ctx.input_shape(1);
  const SymShape& idx = ctx.input_shape(2);
  if (x.size() != 4) {
    return ctx.Error(absl::StrCat(InputName(0, "X"), " has shape ", ShapeString(ctx, x), "; expected [N, C, H, W]"));
  }
  if (rois.size() != 2 || KnownDifferent(rois[1], SymDim(4))) {
    return ctx.Error(
        absl::StrCat(InputName(1, "rois"), " has shape ", ShapeString(ctx, rois), "; expected [num_rois, 4]"));
  }
  if (idx.size() != 1 || KnownDifferent(idx[0], rois[0])) {
    return ctx.Error(absl::StrCat(InputName(2, "batch_indices"), " has shape ", ShapeString(ctx, idx), "; expected [",
                                  DimString(ctx, rois[0]), "] (one per roi)"));
  }
  const SymDim num_rois = rois[0].is_const() ? rois[0] : idx[0];
  ctx.SetOutput(0, ctx.input_dtype(0), {num_rois, x[1], SymDim(oh), SymDim(ow)});
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MaxUnpool
// ---------------------------------------------------------------------------

absl::Status InferMaxUnpool(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "I", {DType::kI64}); !s.ok()) return s;
  const SymShape& x = ctx.input_shape(0);
  const SymShape& ind = ctx.input_shape(1);
  const int rank = ctx.input_rank(0);
  if (rank < 3) {
    return ctx.Error(absl::StrCat(InputName(0, "X"), " has shape ", ShapeString(ctx, x),
                                  "; expected rank >= 3 (N, C, spatial dims...)"));
  }
  bool same = ind.size() == x.size();
  for (size_t d = 0; same && d < x.size(); ++d) same = !KnownDifferent(ind[d], x[d]);
  if (!same) {
    return ctx.Error(absl::StrCat(InputName(1, "I"), " has shape ", ShapeString(ctx, ind), "; expected the shape of ",
                                  InputName(0, "X"), " ", ShapeString(ctx, x)));
  }
  absl::StatusOr<UnpoolWindow> w = ReadUnpoolWindow(ctx.attrs(), rank - 2);
  if (!w.ok()) return ctx.Error(w.status().message());
  SymShape out = {x[0], x[1]};
  for (int d = 0; d < rank - 2; ++d) {
    if (!x[2 + d].is_const()) {
      out.push_back(SymDim::Unknown());
      continue;
    }
    absl::StatusOr<int64_t> len = UnpooledLength(*w, d, x[2 + d].value());
    if (!len.ok()) return ctx.Error(len.status().message());
    out.push_back(SymDim(*len));
  }
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "output_shape", kIntDTypes); !s.ok()) return s;
    const SymShape& os = ctx.input_shape(2);
    if (os.size() != 1 || KnownDifferent(os[0], SymDim(rank))) {
      return ctx.Error(absl::StrCat(InputName(2, "output_shape"), " has shape ", ShapeString(ctx, os), "; expected [",
                                    rank, "] (one length per dim of X)"));
    }
    std::vector<int64_t> given;
    if (!ctx.InputInts(2, &given)) {
      out.assign(static_cast<size_t>(rank), SymDim::Unknown());
    } else if (static_cast<int>(given.size()) != rank) {
      return ctx.Error(absl::StrCat(InputName(2, "output_shape"), " has ", given.size(), " values; expected ", rank,
                                    " (one length per dim of X)"));
    } else {
      // The unpooled tensor lies in the output's leading corner: every
      // length at least the unpooled one, N and C as in X.
      for (int d = 0; d < rank; ++d) {
        const bool too_small = out[d].is_const() && given[d] < out[d].value();
        if (given[d] < 0 || too_small || (d < 2 && KnownDifferent(SymDim(given[d]), out[d]))) {
          return ctx.Error(absl::StrCat(InputName(2, "output_shape"), " is ", ShapeString(ctx, FromConcrete(given)),
                                        "; expected N and C of X and each spatial length >= the unpooled shape ",
                                        ShapeString(ctx, out)));
        }
      }
      out = FromConcrete(given);
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// DFT
// ---------------------------------------------------------------------------

absl::Status InferDft(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kFloatDTypes); !s.ok()) return s;
  bool onesided = false, inverse = false;
  if (absl::Status s = ReadBoolAttr(ctx, "onesided", 0, &onesided); !s.ok()) return s;
  if (absl::Status s = ReadBoolAttr(ctx, "inverse", 0, &inverse); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int rank = ctx.input_rank(0);
  if (rank < 2 || (!IsConst(in.back(), 1) && !IsConst(in.back(), 2) && in.back().is_const())) {
    return ctx.Error(absl::StrCat(InputName(0, "input"), " has shape ", ShapeString(ctx, in),
                                  "; expected [batch, signal dims..., 1 or 2] (real or complex)"));
  }
  absl::StatusOr<int> dft_axis = DftAxis(ctx.attrs().GetInt("axis", 1), rank);
  if (!dft_axis.ok()) return ctx.Error(dft_axis.status().message());
  const int axis = *dft_axis;
  int64_t dft_length = -1;
  bool length_known = true;
  if (ctx.has_input(1)) {
    if (absl::Status s = CheckScalarInput(ctx, 1, "dft_length", kIntDTypes); !s.ok()) return s;
    length_known = ScalarIntValue(ctx, 1, &dft_length);
    if (length_known && dft_length < 1) {
      return ctx.Error(absl::StrCat(InputName(1, "dft_length"), " is ", dft_length, "; expected >= 1"));
    }
  }
  SymShape out = in;
  out.back() = SymDim(onesided && inverse ? 1 : 2);
  if (length_known && (dft_length >= 0 || in[axis].is_const())) {
    absl::StatusOr<DftSizes> sizes =
        ComputeDftSizes(in[axis].is_const() ? in[axis].value() : 0, dft_length, onesided, inverse);
    if (!sizes.ok()) return ctx.Error(sizes.status().message());
    out[axis] = SymDim(sizes->axis_out);
  } else if (length_known && !onesided) {
    out[axis] = in[axis];  // dft_length defaults to the axis length
  } else {
    out[axis] = SymDim::Unknown();
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// STFT
// ---------------------------------------------------------------------------

absl::Status InferStft(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "signal", kFloatDTypes); !s.ok()) return s;
  bool onesided = true;
  if (absl::Status s = ReadBoolAttr(ctx, "onesided", 1, &onesided); !s.ok()) return s;
  const SymShape& sig = ctx.input_shape(0);
  if (sig.size() != 3 || (sig[2].is_const() && !IsConst(sig[2], 1) && !IsConst(sig[2], 2))) {
    return ctx.Error(absl::StrCat(InputName(0, "signal"), " has shape ", ShapeString(ctx, sig),
                                  "; expected [batch, signal_length, 1 or 2] (real or complex)"));
  }
  if (absl::Status s = CheckScalarInput(ctx, 1, "frame_step", kIntDTypes); !s.ok()) return s;
  SymDim frame_length = sig[1];
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "window", {ctx.input_dtype(0)}); !s.ok()) return s;
    if (ctx.input_rank(2) != 1) {
      return ctx.Error(absl::StrCat(InputName(2, "window"), " has shape ", ShapeString(ctx, ctx.input_shape(2)),
                                    "; expected a 1-D tensor"));
    }
    frame_length = ctx.input_shape(2)[0];
  }
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckScalarInput(ctx, 3, "frame_length", kIntDTypes); !s.ok()) return s;
    int64_t fl;
    if (ScalarIntValue(ctx, 3, &fl)) {
      if (ctx.has_input(2) && KnownDifferent(frame_length, SymDim(fl))) {
        return ctx.Error(absl::StrCat(InputName(3, "frame_length"), " is ", fl, " but ", InputName(2, "window"),
                                      " has ", DimString(ctx, frame_length), " elements; they must agree"));
      }
      frame_length = SymDim(fl);
    } else if (!ctx.has_input(2)) {
      frame_length = SymDim::Unknown();
    }
  }
  SymDim frames = SymDim::Unknown();
  SymDim bins = SymDim::Unknown();
  int64_t step;
  if (frame_length.is_const()) {
    const int64_t fl = frame_length.value();
    if (fl < 1 || fl > kMaxDftLength) {
      return ctx.Error(absl::StrCat("frame_length is ", fl, "; expected >= 1"));
    }
    bins = SymDim(onesided ? fl / 2 + 1 : fl);
    if (ScalarIntValue(ctx, 1, &step) && sig[1].is_const()) {
      absl::StatusOr<int64_t> n = StftFrames(sig[1].value(), fl, step);
      if (!n.ok()) return ctx.Error(n.status().message());
      frames = SymDim(*n);
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), {sig[0], frames, bins, SymDim(2)});
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MelWeightMatrix
// ---------------------------------------------------------------------------

absl::Status InferMelWeightMatrix(ShapeContext& ctx) {
  if (absl::Status s = CheckScalarInput(ctx, 0, "num_mel_bins", kIntDTypes); !s.ok()) return s;
  if (absl::Status s = CheckScalarInput(ctx, 1, "dft_length", kIntDTypes); !s.ok()) return s;
  if (absl::Status s = CheckScalarInput(ctx, 2, "sample_rate", kIntDTypes); !s.ok()) return s;
  if (absl::Status s = CheckScalarInput(ctx, 3, "lower_edge_hertz", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckScalarInput(ctx, 4, "upper_edge_hertz", kFloatDTypes); !s.ok()) return s;
  const int64_t dt = ctx.attrs().GetInt("output_datatype", static_cast<int64_t>(DType::kF32));
  bool numeric = false;
  for (DType d : kNumericDTypes) numeric |= static_cast<int64_t>(d) == dt;
  if (!numeric) {
    return ctx.Error(absl::StrCat("attribute 'output_datatype' is ", dt, "; expected a numeric dtype"));
  }
  SymDim rows = SymDim::Unknown(), cols = SymDim::Unknown();
  int64_t v;
  if (ScalarIntValue(ctx, 0, &v)) {
    if (v < 0 || v > kMaxVisionLength) {
      return ctx.Error(absl::StrCat(InputName(0, "num_mel_bins"), " is ", v, "; expected >= 0"));
    }
    cols = SymDim(v);
  }
  if (ScalarIntValue(ctx, 1, &v)) {
    if (v < 1 || v > kMaxVisionLength) {
      return ctx.Error(absl::StrCat(InputName(1, "dft_length"), " is ", v, "; expected >= 1"));
    }
    rows = SymDim(v / 2 + 1);
  }
  ctx.SetOutput(0, static_cast<DType>(dt), {rows, cols});
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterVisionOps(OpRegistry& registry) {
  using K = AttrKind;
  std::vector<OpDef> defs;
  OpDef nms = MakeOpDef("NonMaxSuppression", 2, 5, {{"center_point_box", K::kInt}}, &InferNonMaxSuppression);
  nms.kernel_allocates_outputs = true;
  defs.push_back(std::move(nms));
  defs.push_back(MakeOpDef("GridSample", 2, 2,
                     {{"align_corners", K::kInt}, {"mode", K::kString}, {"padding_mode", K::kString}},
                     &InferGridSample));
  defs.push_back(MakeOpDef("RoiAlign", 3, 3,
                     {{"coordinate_transformation_mode", K::kString},
                      {"mode", K::kString},
                      {"output_height", K::kInt},
                      {"output_width", K::kInt},
                      {"sampling_ratio", K::kInt},
                      {"spatial_scale", K::kFloat}},
                     &InferRoiAlign));
  defs.push_back(MakeOpDef("MaxUnpool", 2, 3, {{"kernel_shape", K::kInts, true}, {"strides", K::kInts}, {"pads", K::kInts}},
                     &InferMaxUnpool));
  defs.push_back(MakeOpDef("DFT", 1, 2, {{"axis", K::kInt}, {"inverse", K::kInt}, {"onesided", K::kInt}}, &InferDft));
  defs.push_back(MakeOpDef("STFT", 2, 4, {{"onesided", K::kInt}}, &InferStft));
  defs.push_back(MakeOpDef("MelWeightMatrix", 5, 5, {{"output_datatype", K::kInt}}, &InferMelWeightMatrix));
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
