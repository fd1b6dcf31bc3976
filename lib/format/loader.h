// Loading a .grove file: the bytes (a read-only mapping, or an aligned copy
// of a small file or a buffer),
// the FlatBuffers verifier, then semantic checks, then the in-memory graph.
// Nothing reads the file's data before the check that covers it.
#ifndef GROVE_LIB_FORMAT_LOADER_H_
#define GROVE_LIB_FORMAT_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"

namespace grove::format {

// The bytes of a model, alive as long as the model: weights point into them.
class ModelBytes {
 public:
  // Maps the file read-only, weights used in place; a file of at most
  // kReadBelow bytes is read into aligned memory instead (one pread: opening
  // a small model then costs a fraction of a mapping and its page faults).
  static constexpr size_t kReadBelow = size_t{1} << 20;
  static absl::StatusOr<std::shared_ptr<const ModelBytes>> MapFile(const std::string& path);
  // Copies into 64-byte aligned storage.
  static absl::StatusOr<std::shared_ptr<const ModelBytes>> CopyOf(absl::Span<const uint8_t> bytes);
  ~ModelBytes();
  ModelBytes(const ModelBytes&) = delete;
  ModelBytes& operator=(const ModelBytes&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  ModelBytes() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
};

struct LoadedGraph {
  ir::Graph graph;
  // The references of string weights (into the model's bytes); their
  // TensorDecl::data points here (into each inner vector's own buffer,
  // which a move of the outer vector's elements keeps).
  std::vector<std::vector<StringRef>> string_weights;
  std::string producer;
  uint32_t format_version = 0;
};

// Verifies and converts. Every error names what is wrong and where
// ("tensor 12 ('w1'): buffer size 60 does not match f32[4, 4] = 64 bytes").
absl::StatusOr<LoadedGraph> LoadGraph(const ModelBytes& bytes, const ir::OpRegistry& registry);

}  // namespace grove::format

#endif  // GROVE_LIB_FORMAT_LOADER_H_
