// The private side of grove::Model: the bytes, the verified graph, and the
// public descriptions of inputs, outputs and symbols.
#ifndef GROVE_LIB_RUNTIME_MODEL_IMPL_H_
#define GROVE_LIB_RUNTIME_MODEL_IMPL_H_

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

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
  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
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
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<SymbolInfo> symbols_;
  std::string shape_note_;
  mutable std::mutex device_mu_;
  mutable std::vector<std::pair<const void*, std::shared_ptr<const uint8_t>>> device_bytes_;
};

}  // namespace grove::internal

#endif  // GROVE_LIB_RUNTIME_MODEL_IMPL_H_
