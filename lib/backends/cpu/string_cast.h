// Cast between numbers and strings (ONNX Cast/CastLike with a tensor(string)
// side), shared by both ops through CastElements.
//
// To string: the shortest text that reads back to the same value (as NumPy
// and std::to_chars print it: "0.039187793", "1e-05", "123456"), "NaN",
// "INF" and "-INF" for the special values, integers in decimal, bool as "1"
// or "0". From string: surrounding ASCII whitespace is ignored; "NaN",
// "INF", "+INF", "-INF" and "Infinity" in any case are the special values;
// a decimal or scientific number is rounded once to the target type; an
// integer target takes an integer in range, or a finite number truncated
// toward zero ("100.5" gives 100); bool takes "true"/"false" in any case or
// a number (non-zero is true). Anything else is an InvalidArgument error
// naming the element and the text: ONNX leaves it undefined.
#ifndef GROVE_LIB_BACKENDS_CPU_STRING_CAST_H_
#define GROVE_LIB_BACKENDS_CPU_STRING_CAST_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

// `in` is numeric or bool, `out` is kString (same element count); the text
// lives in ctx's string arena.
absl::Status CastToStrings(const ir::KernelContext& ctx, const TensorView& in, TensorView& out);
// `in` is kString, `out` is numeric or bool.
absl::Status CastFromStrings(const ir::KernelContext& ctx, const TensorView& in, TensorView& out);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_STRING_CAST_H_
