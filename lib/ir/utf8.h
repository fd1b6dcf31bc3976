// UTF-8 decoding and encoding for string tensors (StringNormalizer, .npy
// unicode arrays). Strict: overlong forms, surrogates, code points above
// U+10FFFF and truncated sequences are invalid.
#ifndef GROVE_LIB_IR_UTF8_H_
#define GROVE_LIB_IR_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace grove::ir {

// Appends the code points of `s` to `out`; false at the first invalid
// sequence, with *bad_offset (when given) its byte offset.
bool DecodeUtf8(absl::string_view s, std::vector<char32_t>* out, size_t* bad_offset = nullptr);
// Appends the UTF-8 bytes of code point `c` (valid: <= U+10FFFF, not a surrogate).
void AppendUtf8(char32_t c, std::string* out);
// True for a code point that UTF-8 can carry.
inline bool IsScalarValue(uint32_t c) { return c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF); }

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_UTF8_H_
