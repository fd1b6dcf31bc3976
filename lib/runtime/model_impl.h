// The private side of grove::Model: the bytes, the verified graph, and the
// public descriptions of inputs, outputs and symbols. The inputs and the
// outputs' shapes (and the shape-inference note) are described on first use,
// not at load: opening a model touches only what loading it needs.
#ifndef GROVE_LIB_RUNTIME_MODEL_IMPL_H_
#define GROVE_LIB_RUNTIME_MODEL_IMPL_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/format/loader.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"

namespace grove::runtime {
class Backend;
}

namespace grove::internal {

class ModelImpl {
 public:
  static absl::StatusOr<std::unique_ptr<ModelImpl>> Create(std::shared_ptr<const format::ModelBytes> bytes);

  const ir::Graph& graph() const { return loaded_.graph; }
  const ir::OpRegistry& registry() const { return *registry_; }
  // Described on first call (thread-safe).
  const std::vector<TensorInfo>& inputs() const;
  // Described on first call (symbolic shape inference of the main graph,
  // once per model, thread-safe); a session never needs it.
  const std::vector<TensorInfo>& outputs() const;
  // The outputs' names as the graph declares them, without describing them.
  const std::vector<std::string>& output_names() const { return output_names_; }
  // Whether outputs() (or Summary()) has described the outputs yet.
  bool outputs_described() const { return outputs_described_.load(std::memory_order_acquire); }
  const std::vector<SymbolInfo>& symbols() const { return symbols_; }
  ModelSummary Summary() const;

  // The model's bytes (weights point into them) in `backend`'s memory:
  // uploaded once per device on first request and shared by every session
  // on that device.
  absl::StatusOr<const uint8_t*> DeviceBytes(runtime::Backend& backend) const;
  const uint8_t* host_bytes() const;
  size_t host_byte_size() const;
  ~ModelImpl();

 private:
  std::shared_ptr<const format::ModelBytes> bytes_;
  format::LoadedGraph loaded_;
  const ir::OpRegistry* registry_ = nullptr;
  // Fills outputs_ and shape_note_ (under outputs_once_).
  void DescribeOutputs() const;

  mutable absl::once_flag inputs_once_;
  mutable std::vector<TensorInfo> inputs_;
  std::vector<std::string> output_names_;
  std::vector<SymbolInfo> symbols_;
  mutable absl::once_flag outputs_once_;
  mutable std::atomic<bool> outputs_described_{false};
  mutable std::vector<TensorInfo> outputs_;
  mutable std::string shape_note_;
  mutable std::mutex device_mu_;
  mutable std::vector<std::pair<const void*, std::shared_ptr<const uint8_t>>> device_bytes_;
};

}  // namespace grove::internal

#endif  // GROVE_LIB_RUNTIME_MODEL_IMPL_H_
