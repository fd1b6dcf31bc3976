// The byte layout of a .grove file around the FlatBuffer: a 4-byte size
// prefix, the FlatBuffer, padding to 64 bytes, then the weights' data region.
#ifndef GROVE_LIB_FORMAT_FILE_LAYOUT_H_
#define GROVE_LIB_FORMAT_FILE_LAYOUT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "grove/grove.h"

namespace grove {

inline constexpr uint64_t kWeightAlignment = 64;
// Subgraphs nest (If inside Loop inside If...) at most this deep.
inline constexpr int kMaxSubgraphDepth = 16;
// Bounds on symbol ranges and constant dims a model may declare.
inline constexpr int64_t kMaxDim = int64_t{1} << 40;

constexpr uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Bytes a string weight takes in the data region (schemas/grove.fbs): an
// 8-byte end offset, then the text, per string.
inline uint64_t StringWeightBytes(absl::Span<const StringRef> strings) {
  uint64_t bytes = 0;
  for (const StringRef& s : strings) bytes += 8 + s.size;
  return bytes;
}

}  // namespace grove

#endif  // GROVE_LIB_FORMAT_FILE_LAYOUT_H_
