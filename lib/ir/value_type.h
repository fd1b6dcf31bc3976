// Sequences and optionals inside the runtime. Such a value travels where a
// tensor would (plans, kernels, subgraph calls) as a TensorView whose dtype is
// a "boxed" code, made of the value's kind and its tensors' dtype, whose
// shape is {} and whose data points at a host grove::Value. Boxed codes exist
// only in memory: the model format stores the kind and the dtype apart.
//
// In shape inference a boxed value's shape is its tensors' shape (dims that
// differ between items are unknown), and rank_known says whether they share
// a rank at all (an empty sequence, an absent optional: not known). A list
// that starts empty and grows (SequenceInsert, a Loop carrying it) is
// predicted to hold tensors of the inserted rank, every dim unknown: the
// plan needs ranks, kernels allocate what the items really are.
#ifndef GROVE_LIB_IR_VALUE_TYPE_H_
#define GROVE_LIB_IR_VALUE_TYPE_H_

#include <string>

#include "grove/grove.h"

namespace grove::ir {

inline constexpr int kBoxedStride = 64;

constexpr DType BoxedDType(ValueKind kind, DType dtype) {
  return kind == ValueKind::kTensor ? dtype
                                    : static_cast<DType>(kBoxedStride * static_cast<int>(kind) + static_cast<int>(dtype));
}
constexpr bool IsBoxed(DType dtype) { return static_cast<int>(dtype) >= kBoxedStride; }
constexpr ValueKind KindOf(DType dtype) {
  return static_cast<ValueKind>(static_cast<int>(dtype) / kBoxedStride);
}
// The tensors' dtype of a boxed code; a tensor dtype itself.
constexpr DType ElemDType(DType dtype) { return static_cast<DType>(static_cast<int>(dtype) % kBoxedStride); }
constexpr bool IsSequenceDType(DType dtype) {
  return KindOf(dtype) == ValueKind::kSequence || KindOf(dtype) == ValueKind::kOptionalSequence;
}
constexpr bool IsOptionalDType(DType dtype) {
  return KindOf(dtype) == ValueKind::kOptionalTensor || KindOf(dtype) == ValueKind::kOptionalSequence;
}

// What an optional holds: optional(T) -> T, optional(seq(T)) -> seq(T);
// other dtypes are themselves.
constexpr DType UnwrapOptional(DType dtype) {
  return KindOf(dtype) == ValueKind::kOptionalTensor     ? ElemDType(dtype)
         : KindOf(dtype) == ValueKind::kOptionalSequence ? BoxedDType(ValueKind::kSequence, ElemDType(dtype))
                                                         : dtype;
}

// The grove::Value a boxed view points at.
inline const Value& BoxedValue(const TensorView& view) { return *static_cast<const Value*>(view.data); }
inline Value& MutableBoxedValue(const TensorView& view) { return *static_cast<Value*>(view.data); }

// The shape the items of `value` share, for plans and shape functions: the
// dims all items agree on, -1 where they differ; false when they do not share
// a rank (no items, mixed ranks, an absent optional).
bool SharedItemShape(const Value& value, std::vector<int64_t>* shape);

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_VALUE_TYPE_H_
