// grove::Model: load, verify, and describe a model. A model whose inputs'
// shapes are all fixed is planned at load, so one whose shapes cannot agree
// is refused then, not at first run. With symbolic inputs, the outputs are
// described (symbolic shape inference of the main graph, whose failure is
// only a note) on first use of outputs() or Summary(): a session infers its
// own shapes per plan and needs only the outputs' names. The inputs are
// described on first use of inputs() (a run's checks, the C ABI's queries).
#include <map>

#include "absl/strings/str_cat.h"
#include "lib/runtime/backend.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/model_impl.h"

#include "lib/format/file_layout.h"
#include "lib/runtime/registry.h"
#include "lib/runtime/shape_inference.h"

namespace grove {
namespace internal {
namespace {

std::vector<DimInfo> DescribeShape(const ir::SymShape& shape, const std::vector<std::string>& names) {
  std::vector<DimInfo> dims;
  for (const ir::SymDim& d : shape) {
    DimInfo info;
    if (d.is_const()) {
      info.value = d.value();
    } else {
      info.value = -1;
      info.symbol = d.ToString(names);
    }
    dims.push_back(std::move(info));
  }
  return dims;
}

// A sequence or optional is described by its kind and its tensors' dtype.
TensorInfo Info(std::string name, DType dtype, std::vector<DimInfo> shape) {
  return TensorInfo{std::move(name), ir::ElemDType(dtype), std::move(shape), ir::KindOf(dtype)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelImpl>> ModelImpl::Create(std::shared_ptr<const format::ModelBytes> bytes) {
  auto impl = std::unique_ptr<ModelImpl>(new ModelImpl());
  impl->registry_ = &runtime::GlobalOpRegistry();
  absl::StatusOr<format::LoadedGraph> loaded = format::LoadGraph(*bytes, *impl->registry_);
  if (!loaded.ok()) return loaded.status();
  impl->bytes_ = std::move(bytes);
  impl->loaded_ = std::move(*loaded);
  const ir::Graph& g = impl->graph();
  impl->symbols_.reserve(g.symbols.size());
  for (const ir::Symbol& s : g.symbols) impl->symbols_.push_back(SymbolInfo{s.name, s.min, s.max});

  bool static_inputs = true;
  for (int t : g.subgraphs[0].inputs) {
    const ir::TensorDecl& d = g.tensors[t];
    // A sequence's tensors may take any shape the declaration allows.
    static_inputs = static_inputs && !ir::IsBoxed(d.dtype) && ir::IsConcrete(d.shape);
  }
  if (!static_inputs) {
    impl->output_names_.reserve(g.subgraphs[0].outputs.size());
    for (int t : g.subgraphs[0].outputs) impl->output_names_.push_back(g.tensors[t].name);
    return impl;  // outputs() describes the outputs on first use
  }
  // Every input shape is fixed: planning now is exact (it folds shape
  // arithmetic), and whatever fails here would fail every run.
  std::vector<runtime::ValueSig> sigs;
  sigs.reserve(g.subgraphs[0].inputs.size());
  for (int t : g.subgraphs[0].inputs) {
    const ir::TensorDecl& d = g.tensors[t];
    sigs.push_back(runtime::ValueSig{d.dtype, ir::ToConcrete(d.shape)});
  }
  absl::StatusOr<std::unique_ptr<runtime::ExecutionPlan>> plan =
      runtime::ExecutionPlan::Build(g, 0, sigs, {}, nullptr);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid model: shape inference failed: ", plan.status().message()));
  }
  // The plan has described the outputs already: outputs() has nothing left to do.
  const std::vector<std::string> names = g.symbol_names();
  absl::call_once(impl->outputs_once_, [&] {
    for (int v : (*plan)->output_values()) {
      const runtime::PlanValue& pv = (*plan)->values()[v];
      impl->outputs_.push_back(Info(g.tensors[pv.tensor].name, pv.dtype,
                                    DescribeShape(pv.shape_known ? ir::FromConcrete(pv.shape)
                                                                 : ir::SymShape(pv.shape.size(), ir::SymDim::Unknown()),
                                                  names)));
    }
    impl->outputs_described_.store(true, std::memory_order_release);
  });
  for (const TensorInfo& o : impl->outputs_) impl->output_names_.push_back(o.name);
  return impl;
}

void ModelImpl::DescribeOutputs() const {
  const ir::Graph& g = graph();
  const std::vector<std::string> names = g.symbol_names();
  std::vector<ir::ShapeContext::Input> ins;
  for (int t : g.subgraphs[0].inputs) {
    const ir::TensorDecl& d = g.tensors[t];
    ins.push_back(ir::ShapeContext::Input{true, d.dtype, d.shape, nullptr, d.has_shape});
  }
  // Symbolic inference is weaker than planning (values that come from shapes
  // are not known), so where it stops the model still loads: each plan infers
  // its concrete shapes exactly, and reports errors then.
  runtime::GraphInference inference(g, /*planning=*/false);
  absl::StatusOr<std::vector<ir::ShapeContext::Output>> outs = inference.Infer(0, ins);
  if (!outs.ok()) shape_note_ = std::string(outs.status().message());
  for (size_t i = 0; i < g.subgraphs[0].outputs.size(); ++i) {
    const ir::TensorDecl& d = g.tensors[g.subgraphs[0].outputs[i]];
    if (outs.ok()) {
      outputs_.push_back(Info(d.name, (*outs)[i].dtype, DescribeShape((*outs)[i].shape, names)));
    } else {
      outputs_.push_back(Info(d.name, d.dtype, d.has_shape ? DescribeShape(d.shape, names) : std::vector<DimInfo>{}));
    }
  }
  outputs_described_.store(true, std::memory_order_release);
}

const std::vector<TensorInfo>& ModelImpl::inputs() const {
  absl::call_once(inputs_once_, [this] {
    const ir::Graph& g = graph();
    const std::vector<std::string> names = g.symbol_names();
    for (int t : g.subgraphs[0].inputs) {
      const ir::TensorDecl& d = g.tensors[t];
      inputs_.push_back(Info(d.name, d.dtype, DescribeShape(d.shape, names)));
    }
  });
  return inputs_;
}

const std::vector<TensorInfo>& ModelImpl::outputs() const {
  absl::call_once(outputs_once_, &ModelImpl::DescribeOutputs, this);
  return outputs_;
}

ModelImpl::~ModelImpl() = default;

const uint8_t* ModelImpl::host_bytes() const { return bytes_->data(); }
size_t ModelImpl::host_byte_size() const { return bytes_->size(); }

absl::StatusOr<const uint8_t*> ModelImpl::DeviceBytes(runtime::Backend& backend) const {
  if (backend.host_memory()) return bytes_->data();
  std::lock_guard<std::mutex> lock(device_mu_);
  for (const auto& [key, bytes] : device_bytes_) {
    if (key == backend.device_key()) return bytes.get();
  }
  absl::StatusOr<std::shared_ptr<const uint8_t>> copy = backend.Upload(bytes_->data(), bytes_->size());
  if (!copy.ok()) return copy.status();
  device_bytes_.emplace_back(backend.device_key(), *copy);
  return copy->get();
}

ModelSummary ModelImpl::Summary() const {
  ModelSummary s;
  std::map<std::string, int> counts;
  for (const ir::Subgraph& sg : graph().subgraphs) {
    for (const ir::Node& n : sg.nodes) ++counts[n.type];
    s.num_operators += static_cast<int>(sg.nodes.size());
  }
  s.op_counts.assign(counts.begin(), counts.end());
  s.num_subgraphs = static_cast<int>(graph().subgraphs.size());
  for (const ir::TensorDecl& t : graph().tensors) {
    if (!t.is_weight) continue;
    if (t.dtype != DType::kString) {
      s.weight_bytes += t.bytes;
      continue;
    }
    // As stored in the file, not the in-memory references.
    s.weight_bytes +=
        StringWeightBytes(absl::MakeConstSpan(reinterpret_cast<const StringRef*>(t.data), t.bytes / sizeof(StringRef)));
  }
  s.format_version = loaded_.format_version;
  s.producer = loaded_.producer;
  outputs();  // the note is what describing the outputs found
  s.shape_inference_note = shape_note_;
  return s;
}

}  // namespace internal

Model::Model(std::unique_ptr<internal::ModelImpl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

absl::StatusOr<std::shared_ptr<const Model>> Model::LoadFromFile(const std::string& path) {
  absl::StatusOr<std::shared_ptr<const format::ModelBytes>> bytes = format::ModelBytes::MapFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::unique_ptr<internal::ModelImpl>> impl = internal::ModelImpl::Create(std::move(*bytes));
  if (!impl.ok()) {
    return absl::Status(impl.status().code(), absl::StrCat(path, ": ", impl.status().message()));
  }
  return std::shared_ptr<const Model>(new Model(std::move(*impl)));
}

absl::StatusOr<std::shared_ptr<const Model>> Model::LoadFromBuffer(absl::Span<const uint8_t> data) {
  absl::StatusOr<std::shared_ptr<const format::ModelBytes>> bytes = format::ModelBytes::CopyOf(data);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::unique_ptr<internal::ModelImpl>> impl = internal::ModelImpl::Create(std::move(*bytes));
  if (!impl.ok()) return impl.status();
  return std::shared_ptr<const Model>(new Model(std::move(*impl)));
}

const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs(); }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs(); }
const std::vector<std::string>& Model::output_names() const { return impl_->output_names(); }
const std::vector<SymbolInfo>& Model::symbols() const { return impl_->symbols(); }
ModelSummary Model::Summary() const { return impl_->Summary(); }

}  // namespace grove
