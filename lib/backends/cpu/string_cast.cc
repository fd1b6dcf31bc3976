#include "lib/backends/cpu/string_cast.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <system_error>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::Bool8;
using ir::ConvertElement;
using ir::Half;
using ir::ToCompute;
using ir::VisitAnyDType;

namespace {

// "NaN", "INF", "-INF", or the shortest round-trip digits of `value`.
template <typename F>
absl::string_view FormatInto(F value, char* buf, size_t size) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "INF" : "-INF";
  const std::to_chars_result r = std::to_chars(buf, buf + size, value);
  return absl::string_view(buf, static_cast<size_t>(r.ptr - buf));
}

// Out of range for from_chars: the text's magnitude overflowed (true) or
// underflowed (false) the type. An exponent with a minus sign, or a mantissa
// with no non-zero digit before the point, is an underflow.
bool Overflows(absl::string_view digits) {
  const size_t e = digits.find_first_of("eE");
  if (e != absl::string_view::npos) return !(e + 1 < digits.size() && digits[e + 1] == '-');
  for (char c : digits) {
    if (c == '.') return false;
    if (c >= '1' && c <= '9') return true;
  }
  return false;
}

// Parses `text` (trimmed) as a floating point number of type F.
template <typename F>
bool ParseFloat(absl::string_view text, F* out) {
  bool negative = false;
  absl::string_view digits = text;
  if (absl::ConsumePrefix(&digits, "-")) {
    negative = true;
  } else {
    absl::ConsumePrefix(&digits, "+");
  }
  if (absl::EqualsIgnoreCase(digits, "inf") || absl::EqualsIgnoreCase(digits, "infinity")) {
    *out = negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    return true;
  }
  if (absl::EqualsIgnoreCase(digits, "nan")) {
    *out = std::numeric_limits<F>::quiet_NaN();
    return true;
  }
  // from_chars takes no sign of its own here: a second one is malformed.
  if (digits.empty() || digits[0] == '-' || digits[0] == '+') return false;
  F v = 0;
  const std::from_chars_result r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ptr != digits.data() + digits.size()) return false;
  if (r.ec == std::errc::result_out_of_range) {
    v = Overflows(digits) ? std::numeric_limits<F>::infinity() : F(0);
  } else if (r.ec != std::errc()) {
    return false;
  }
  *out = negative ? -v : v;
  return true;
}

// Parses `text` as an integer of type I: the integer itself, or a finite
// number truncated toward zero. False when it is neither or out of range.
template <typename I>
bool ParseInteger(absl::string_view text, I* out) {
  absl::string_view digits = text;
  if (absl::ConsumePrefix(&digits, "+") && (digits.empty() || digits[0] == '-' || digits[0] == '+')) return false;
  I v = 0;
  const std::from_chars_result r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ec == std::errc() && r.ptr == digits.data() + digits.size()) {
    *out = v;
    return true;
  }
  if (r.ec == std::errc::result_out_of_range) return false;
  double d = 0;
  if (!ParseFloat(text, &d) || !std::isfinite(d)) return false;
  d = std::trunc(d);
  // Both bounds are powers of two (or zero), exact in a double.
  const double lo = static_cast<double>(std::numeric_limits<I>::min());
  const double hi = std::is_signed_v<I> ? -lo : 2.0 * (static_cast<double>(std::numeric_limits<I>::max() / 2) + 1);
  if (d < lo || d >= hi) return false;
  *out = static_cast<I>(d);
  return true;
}

bool ParseBool(absl::string_view text, bool* out) {
  if (absl::EqualsIgnoreCase(text, "true")) {
    *out = true;
    return true;
  }
  if (absl::EqualsIgnoreCase(text, "false")) {
    *out = false;
    return true;
  }
  double d = 0;
  if (!ParseFloat(text, &d) || std::isnan(d)) return false;
  *out = d != 0;
  return true;
}

}  // namespace

absl::Status CastToStrings(const ir::KernelContext& ctx, const TensorView& in, TensorView& out) {
  const int64_t n = in.num_elements();
  StringRef* dst = out.as<StringRef>();
  return VisitAnyDType(ctx, in.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* src = in.as<const T>();
    char buf[64];
    for (int64_t i = 0; i < n; ++i) {
      absl::string_view text;
      if constexpr (std::is_same_v<T, Bool8>) {
        text = src[i].bits != 0 ? "1" : "0";
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        // The float holds the 16-bit value exactly; its digits identify it.
        text = FormatInto(ToCompute(src[i]), buf, sizeof(buf));
      } else if constexpr (std::is_floating_point_v<T>) {
        text = FormatInto(src[i], buf, sizeof(buf));
      } else {
        const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), src[i]);
        text = absl::string_view(buf, static_cast<size_t>(r.ptr - buf));
      }
      absl::StatusOr<StringRef> s = ctx.StoreString(text);
      if (!s.ok()) return s.status();
      dst[i] = *s;
    }
    return absl::OkStatus();
  });
}

absl::Status CastFromStrings(const ir::KernelContext& ctx, const TensorView& in, TensorView& out) {
  const int64_t n = in.num_elements();
  const StringRef* src = in.as<const StringRef>();
  return VisitAnyDType(ctx, out.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* dst = out.as<T>();
    for (int64_t i = 0; i < n; ++i) {
      const absl::string_view text = absl::StripAsciiWhitespace(src[i].view());
      bool ok = false;
      if constexpr (std::is_same_v<T, Bool8>) {
        bool b = false;
        ok = ParseBool(text, &b);
        dst[i] = Bool8{static_cast<uint8_t>(b ? 1 : 0)};
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        // One rounding: the double, rounded to odd on the way (element_types.h).
        double d = 0;
        ok = ParseFloat(text, &d);
        dst[i] = ConvertElement<T>(d);
      } else if constexpr (std::is_floating_point_v<T>) {
        T v = 0;
        ok = ParseFloat(text, &v);
        dst[i] = v;
      } else {
        T v = 0;
        ok = ParseInteger(text, &v);
        dst[i] = v;
      }
      if (!ok) {
        const absl::string_view shown = src[i].view().substr(0, 64);
        return ctx.Error(absl::StrCat("element ", i, " ('", absl::CEscape(shown),
                                      src[i].size > shown.size() ? "...')" : "')", " is not a ",
                                      DTypeName(out.dtype), " number"));
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace grove::cpu
