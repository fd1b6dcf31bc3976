// Checks that shape functions run on their inputs, with errors that name the
// input (index and ONNX name), what was expected and what was given, and the
// small shape functions that several op groups share (broadcast binary ops).
#ifndef GROVE_LIB_IR_OPS_INPUT_CHECKS_H_
#define GROVE_LIB_IR_OPS_INPUT_CHECKS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ir/broadcast.h"
#include "lib/ir/op_registry.h"

namespace grove::ir {

inline constexpr DType kFloatDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};
inline constexpr DType kNumericDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64, DType::kI32,
                                           DType::kI16, DType::kI8,  DType::kU64, DType::kU32,  DType::kU16, DType::kU8};
// Every dtype: the numeric ones and bool.
inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                                       DType::kI32, DType::kI16, DType::kI8,  DType::kU64,  DType::kU32,
                                       DType::kU16, DType::kU8,  DType::kBool};
// Every dtype and strings, for ops that move elements or only compare them
// for equality (strings have no order or arithmetic).
inline constexpr DType kAllDTypesAndString[] = {DType::kF32, DType::kF64, DType::kF16,  DType::kBF16, DType::kI64,
                                                DType::kI32, DType::kI16, DType::kI8,   DType::kU64,  DType::kU32,
                                                DType::kU16, DType::kU8,  DType::kBool, DType::kString};

// "input 1 (B)".
inline std::string InputName(int i, absl::string_view name) { return absl::StrCat("input ", i, " (", name, ")"); }

inline std::string ShapeString(const ShapeContext& ctx, const SymShape& shape) {
  return ShapeToString(shape, ctx.graph().symbol_names());
}

// The input is given and has a known dtype.
inline absl::Status CheckInputPresent(const ShapeContext& ctx, int i, absl::string_view name) {
  if (!ctx.has_input(i)) return ctx.Error(absl::StrCat(InputName(i, name), " is required but missing"));
  if (ctx.input_dtype(i) == DType::kUnknown) {
    return ctx.Error(absl::StrCat(InputName(i, name), " has an unknown dtype"));
  }
  return absl::OkStatus();
}

inline absl::Status CheckInputDType(const ShapeContext& ctx, int i, absl::string_view name,
                                    absl::Span<const DType> allowed) {
  if (absl::Status s = CheckInputPresent(ctx, i, name); !s.ok()) return s;
  const DType dtype = ctx.input_dtype(i);
  for (DType d : allowed) {
    if (d == dtype) return absl::OkStatus();
  }
  std::vector<absl::string_view> names;
  for (DType d : allowed) names.push_back(DTypeName(d));
  return ctx.Error(absl::StrCat(InputName(i, name), " has dtype ", DTypeName(dtype), "; expected ",
                                allowed.size() == 1 ? "" : "one of ", absl::StrJoin(names, ", ")));
}

// Inputs i and j hold the same dtype.
inline absl::Status CheckSameDType(const ShapeContext& ctx, int i, absl::string_view name_i, int j,
                                   absl::string_view name_j) {
  if (ctx.input_dtype(i) == ctx.input_dtype(j)) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputName(i, name_i), " and ", InputName(j, name_j),
                                " must have the same dtype; got ", DTypeName(ctx.input_dtype(i)), " and ",
                                DTypeName(ctx.input_dtype(j))));
}

// Broadcasts the leading inputs named in `names` (in input order) into `out`;
// the error lists every input's shape.
inline absl::Status BroadcastInputs(const ShapeContext& ctx, absl::Span<const absl::string_view> names,
                                    SymShape* out) {
  absl::InlinedVector<const SymShape*, 3> shapes;
  for (int i = 0; i < static_cast<int>(names.size()); ++i) shapes.push_back(&ctx.input_shape(i));
  absl::StatusOr<SymShape> shape = BroadcastShapePtrs(shapes);
  if (!shape.ok()) {
    // Described only on error: formatting every shape would cost more than
    // the broadcast itself (this runs for every binary op at model load).
    std::vector<std::string> described;
    for (int i = 0; i < static_cast<int>(names.size()); ++i) {
      described.push_back(absl::StrCat(InputName(i, names[i]), " ", ShapeString(ctx, ctx.input_shape(i))));
    }
    return ctx.Error(absl::StrCat(absl::StrJoin(described, " and "), ": ", shape.status().message()));
  }
  *out = *std::move(shape);
  return absl::OkStatus();
}

// The shape function of a binary op: A and B of one dtype out of `allowed`,
// broadcast; the output has `out_dtype`, or their dtype when kUnknown.
inline absl::Status InferBroadcastBinary(ShapeContext& ctx, absl::Span<const DType> allowed, DType out_dtype) {
  if (absl::Status s = CheckInputDType(ctx, 0, "A", allowed); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "B", allowed); !s.ok()) return s;
  if (absl::Status s = CheckSameDType(ctx, 0, "A", 1, "B"); !s.ok()) return s;
  SymShape shape;
  if (absl::Status s = BroadcastInputs(ctx, {"A", "B"}, &shape); !s.ok()) return s;
  ctx.SetOutput(0, out_dtype == DType::kUnknown ? ctx.input_dtype(0) : out_dtype, std::move(shape));
  return absl::OkStatus();
}

// An int attribute that ONNX uses as a flag: 0 or 1, else an error.
inline absl::Status ReadBoolAttr(const ShapeContext& ctx, absl::string_view name, int64_t def, bool* out) {
  const int64_t v = ctx.attrs().GetInt(name, def);
  if (v != 0 && v != 1) return ctx.Error(absl::StrCat("attribute '", name, "' is ", v, "; expected 0 or 1"));
  *out = v == 1;
  return absl::OkStatus();
}

// ScatterND and ScatterElements: data, i32/i64 indices, updates of data's
// dtype, and the reduction attribute (none add mul max min; on bool data add
// and max are "or", mul and min "and").
inline absl::Status CheckScatterInputs(const ShapeContext& ctx) {
  constexpr DType kIndices[] = {DType::kI64, DType::kI32};
  if (absl::Status s = CheckInputPresent(ctx, 0, "data"); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "indices", kIndices); !s.ok()) return s;
  if (absl::Status s = CheckInputPresent(ctx, 2, "updates"); !s.ok()) return s;
  if (absl::Status s = CheckSameDType(ctx, 0, "data", 2, "updates"); !s.ok()) return s;
  const std::string reduction = ctx.attrs().GetString("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min") {
    return ctx.Error(
        absl::StrCat("attribute reduction is '", reduction, "'; expected 'none', 'add', 'mul', 'max' or 'min'"));
  }
  if (reduction != "none" && ctx.input_dtype(0) == DType::kString) {
    return ctx.Error(absl::StrCat("attribute reduction is '", reduction,
                                  "' but data (input 0) is string; strings can only be replaced (reduction 'none')"));
  }
  return absl::OkStatus();
}

// GatherElements and ScatterElements: data of rank >= 1, indices of the
// same rank and no larger than data in any dim but `axis`. Returns the
// normalised axis.
inline absl::StatusOr<int> CheckElementsIndices(const ShapeContext& ctx) {
  const SymShape& data = ctx.input_shape(0);
  const SymShape& idx = ctx.input_shape(1);
  const int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("data (input 0) is a scalar; expected rank >= 1");
  if (ctx.input_rank(1) != rank) {
    return ctx.Error(absl::StrCat("indices (input 1) has shape ", ShapeString(ctx, idx), " but data has shape ",
                                  ShapeString(ctx, data), "; they must have the same rank"));
  }
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute axis: ", axis.status().message()));
  for (int d = 0; d < rank; ++d) {
    if (d != *axis && idx[d].is_const() && data[d].is_const() && idx[d].value() > data[d].value()) {
      return ctx.Error(absl::StrCat("indices (input 1) has shape ", ShapeString(ctx, idx), "; dim ", d,
                                    " exceeds the data's ", ShapeString(ctx, data)));
    }
  }
  return axis;
}

// An op definition with one output (change min/max_outputs after).
inline OpDef MakeOpDef(std::string type, int min_inputs, int max_inputs, std::vector<AttrSpec> attrs, ShapeFn infer) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.attrs = std::move(attrs);
  def.infer = infer;
  return def;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_INPUT_CHECKS_H_
