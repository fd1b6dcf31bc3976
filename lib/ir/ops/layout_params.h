// Parameters of the layout ops that both halves derive from concrete inputs:
// the shape functions (when the values are known at plan time) and the CPU
// kernels (which must write exactly what was planned). Keeping one copy of
// each rule means plan and run cannot disagree. Errors carry no node prefix;
// callers add it with ctx.Error().
#ifndef GROVE_LIB_IR_OPS_LAYOUT_PARAMS_H_
#define GROVE_LIB_IR_OPS_LAYOUT_PARAMS_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/ir/graph.h"

namespace grove::ir {

inline std::string DimsString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The integers of an i32 or i64 tensor; false for any other dtype.
inline bool ReadIntegers(const TensorView& v, std::vector<int64_t>* out) {
  const int64_t n = v.num_elements();
  out->resize(static_cast<size_t>(n));
  if (v.dtype == DType::kI64) {
    if (n > 0) std::memcpy(out->data(), v.data, static_cast<size_t>(n) * sizeof(int64_t));
  } else if (v.dtype == DType::kI32) {
    const auto* p = static_cast<const int32_t*>(v.data);
    for (int64_t i = 0; i < n; ++i) (*out)[i] = p[i];
  } else {
    return false;
  }
  return true;
}

// Element i of a tensor of any numeric dtype as a double (bool: 0 or 1; 0 for
// strings, which callers refuse first). The IR has no f16 arithmetic, so the
// two 16-bit formats are decoded here.
inline double ReadNumber(const TensorView& v, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(v.data);
  switch (v.dtype) {
    case DType::kF32: {
      float x;
      std::memcpy(&x, p + i * 4, 4);
      return x;
    }
    case DType::kF64: {
      double x;
      std::memcpy(&x, p + i * 8, 8);
      return x;
    }
    case DType::kI64: {
      int64_t x;
      std::memcpy(&x, p + i * 8, 8);
      return static_cast<double>(x);
    }
    case DType::kI32: {
      int32_t x;
      std::memcpy(&x, p + i * 4, 4);
      return x;
    }
    case DType::kI8:
      return static_cast<int8_t>(p[i]);
    case DType::kU8:
      return p[i];
    case DType::kBool:
      return p[i] != 0 ? 1.0 : 0.0;
    case DType::kI16: {
      int16_t x;
      std::memcpy(&x, p + i * 2, 2);
      return x;
    }
    case DType::kU16: {
      uint16_t x;
      std::memcpy(&x, p + i * 2, 2);
      return x;
    }
    case DType::kU32: {
      uint32_t x;
      std::memcpy(&x, p + i * 4, 4);
      return x;
    }
    case DType::kU64: {
      uint64_t x;
      std::memcpy(&x, p + i * 8, 8);
      return static_cast<double>(x);
    }
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p + i * 2, 2);
      return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
      double m;
      if (exp == 0x1f) {
        m = mant != 0 ? NAN : INFINITY;
      } else if (exp == 0) {
        m = std::ldexp(mant, -24);
      } else {
        m = std::ldexp(mant + 1024, exp - 25);
      }
      return (h & 0x8000) != 0 ? -m : m;
    }
    case DType::kString:  // not a number: callers take numeric dtypes only
    case DType::kUnknown:
      break;
  }
  return 0;
}

// A number read as an integer count the way ONNX casts (truncation); an
// error for NaN, infinities and values outside int64.
inline absl::StatusOr<int64_t> NumberAsInt(double v, absl::string_view what) {
  if (!(v > -9.2e18 && v < 9.2e18))
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", v, "; not an integer count"));
  return static_cast<int64_t>(v);
}

// Transpose: attribute perm, or the reversed dims of a rank-`rank` input.
inline std::vector<int64_t> TransposePerm(const Attributes& attrs, int rank) {
  if (attrs.Has("perm")) return attrs.GetInts("perm");
  std::vector<int64_t> perm;
  for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

// Expand: numpy broadcasting of the input shape `a` against the requested
// shape `b` (both concrete).
inline absl::StatusOr<std::vector<int64_t>> ExpandShape(const std::vector<int64_t>& a,
                                                        const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1) {
      return absl::InvalidArgumentError(absl::StrCat("cannot expand ", DimsString(a), " to ", DimsString(b),
                                                     ": dim ", i, " is ", x, " against ", y));
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// Axes for Squeeze (`rank` = input rank) or Unsqueeze (`rank` = output rank):
// normalised, each once. Returns a mask over `rank` dims.
inline absl::StatusOr<std::vector<bool>> AxesMask(absl::Span<const int64_t> axes, int64_t rank,
                                                  absl::string_view what) {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  for (int64_t axis : axes) {
    const int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", DimsString(axes), " has axis ", axis, "; expected ", -rank, "..", rank - 1));
    }
    if (mask[a])
      return absl::InvalidArgumentError(absl::StrCat(what, " ", DimsString(axes), " names dim ", a, " twice"));
    mask[a] = true;
  }
  return mask;
}

// Split: the size of each of `num_outputs` parts of an axis of `dim`, from
// the split sizes (`split`, may be null), or the opset-18 num_outputs
// attribute (`num_outputs_attr` >= 0: ceil-sized parts, the last smaller), or
// equal parts.
inline absl::StatusOr<std::vector<int64_t>> SplitSizes(int64_t dim, int num_outputs,
                                                       const std::vector<int64_t>* split,
                                                       int64_t num_outputs_attr) {
  if (split != nullptr) {
    if (static_cast<int64_t>(split->size()) != num_outputs) {
      return absl::InvalidArgumentError(absl::StrCat("split ", DimsString(*split), " has ", split->size(),
                                                     " entries but the node has ", num_outputs, " outputs"));
    }
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0)
        return absl::InvalidArgumentError(absl::StrCat("split ", DimsString(*split), " has a negative size"));
      if (__builtin_add_overflow(sum, s, &sum)) return absl::InvalidArgumentError("split sizes overflow int64");
    }
    if (sum != dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("split ", DimsString(*split), " sums to ", sum, " but the axis has ", dim, " elements"));
    }
    return *split;
  }
  if (num_outputs <= 0) return absl::InvalidArgumentError("Split needs at least one output");
  if (num_outputs_attr >= 0) {
    if (num_outputs_attr != num_outputs) {
      return absl::InvalidArgumentError(absl::StrCat("attribute num_outputs is ", num_outputs_attr,
                                                     " but the node has ", num_outputs, " outputs"));
    }
    const int64_t chunk = dim / num_outputs + (dim % num_outputs != 0 ? 1 : 0);
    const int64_t last = dim - chunk * (num_outputs - 1);
    if (last < 0) {
      return absl::InvalidArgumentError(absl::StrCat("an axis of ", dim, " elements cannot be split into ",
                                                     num_outputs, " parts of ", chunk, " (num_outputs)"));
    }
    std::vector<int64_t> sizes(num_outputs, chunk);
    sizes.back() = last;
    return sizes;
  }
  if (dim % num_outputs != 0) {
    return absl::InvalidArgumentError(absl::StrCat("an axis of ", dim, " elements does not split into ",
                                                   num_outputs, " equal parts; give split sizes"));
  }
  return std::vector<int64_t>(num_outputs, dim / num_outputs);
}

// Pad: per-dim amounts before and after, from the ONNX pads list ([begins...,
// ends...] over `axes`, or over every dim when `axes` is null).
struct PadAmounts {
  std::vector<int64_t> begin, end;
};

inline absl::StatusOr<PadAmounts> PadAmountsFor(int64_t rank, absl::Span<const int64_t> pads,
                                                const std::vector<int64_t>* axes) {
  std::vector<int64_t> dims;
  if (axes != nullptr) {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t axis : *axes) {
      const int64_t a = axis < 0 ? axis + rank : axis;
      if (a < 0 || a >= rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("axes ", DimsString(*axes), " has axis ", axis, "; expected ", -rank, "..", rank - 1));
      }
      if (seen[a])
        return absl::InvalidArgumentError(absl::StrCat("axes ", DimsString(*axes), " names dim ", a, " twice"));
      seen[a] = true;
      dims.push_back(a);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
  const int64_t n = static_cast<int64_t>(dims.size());
  if (static_cast<int64_t>(pads.size()) != 2 * n) {
    return absl::InvalidArgumentError(absl::StrCat("pads ", DimsString(pads), " has ", pads.size(),
                                                   " entries; expected ", 2 * n, " (begin and end for ", n,
                                                   axes != nullptr ? " axes)" : " dims of the input)"));
  }
  PadAmounts p;
  p.begin.assign(static_cast<size_t>(rank), 0);
  p.end.assign(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < n; ++i) {
    p.begin[dims[i]] = pads[i];
    p.end[dims[i]] = pads[i + n];
  }
  return p;
}

// Range: max(ceil((limit - start) / delta), 0) elements, computed in the
// inputs' type as ONNX does; an error for delta 0, a non-finite bound or a
// count beyond what a tensor can hold.
inline absl::StatusOr<int64_t> RangeCount(const TensorView& start, const TensorView& limit,
                                          const TensorView& delta) {
  constexpr int64_t kMaxCount = int64_t{1} << 48;
  double count;
  if (start.dtype == DType::kI64 || start.dtype == DType::kI32) {
    std::vector<int64_t> s, l, d;
    ReadIntegers(start, &s);
    ReadIntegers(limit, &l);
    ReadIntegers(delta, &d);
    if (d[0] == 0) return absl::InvalidArgumentError("delta is 0");
    const __int128 span = static_cast<__int128>(l[0]) - s[0];
    __int128 q = span / d[0];
    if (q * d[0] != span && ((span > 0) == (d[0] > 0))) ++q;  // ceil
    count = q <= 0 ? 0.0 : (q > kMaxCount ? static_cast<double>(kMaxCount) * 2 : static_cast<double>(q));
  } else {
    const double s = ReadNumber(start, 0), l = ReadNumber(limit, 0), d = ReadNumber(delta, 0);
    if (d == 0) return absl::InvalidArgumentError("delta is 0");
    if (!std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("start ", s, ", limit ", l, ", delta ", d, " are not all finite"));
    }
    // In the inputs' own precision, as numpy's arange (the ONNX reference).
    const double q =
        start.dtype == DType::kF32
            ? static_cast<double>((static_cast<float>(l) - static_cast<float>(s)) / static_cast<float>(d))
            : (l - s) / d;
    if (!std::isfinite(q))
      return absl::InvalidArgumentError(
          absl::StrCat("the range from ", s, " to ", l, " by ", d, " has no finite length"));
    count = std::max(std::ceil(q), 0.0);
  }
  if (count > static_cast<double>(kMaxCount)) {
    return absl::InvalidArgumentError(absl::StrCat("the range has ", count, " elements; at most ", kMaxCount));
  }
  return static_cast<int64_t>(count);
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_LAYOUT_PARAMS_H_
