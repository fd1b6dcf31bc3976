// Which elements NonZero reports, shared by its shape function (which needs
// the count for the output shape) and its CPU kernel, so the two agree by
// construction. Works on the stored bytes of any dtype: an element is zero
// when every bit but a float's sign bit is clear, so -0.0 is zero and NaN is
// not, as with `x != 0`. A string is non-zero when it is not empty (numpy's
// rule), whatever its reference holds.
#ifndef GROVE_LIB_IR_OPS_NONZERO_COUNT_H_
#define GROVE_LIB_IR_OPS_NONZERO_COUNT_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "grove/grove.h"

namespace grove::ir {

static_assert(std::endian::native == std::endian::little, "NonZero reads a float's sign from its last byte");

inline bool ElementIsNonZero(const uint8_t* element, DType dtype) {
  if (dtype == DType::kString) {
    StringRef s;
    std::memcpy(&s, element, sizeof(s));
    return s.size != 0;
  }
  const size_t size = DTypeSize(dtype);
  const bool is_float = dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 || dtype == DType::kBF16;
  uint8_t bits = 0;
  for (size_t b = 0; b + 1 < size; ++b) bits |= element[b];
  bits |= element[size - 1] & (is_float ? 0x7f : 0xff);
  return bits != 0;
}

inline int64_t CountNonZero(const TensorView& v) {
  const int64_t n = v.num_elements();
  const size_t size = DTypeSize(v.dtype);
  const auto* bytes = static_cast<const uint8_t*>(v.data);
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += ElementIsNonZero(bytes + i * size, v.dtype) ? 1 : 0;
  return count;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_NONZERO_COUNT_H_
