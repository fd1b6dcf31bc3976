#include "tools/onnx/opset_upgrade.h"

#include <cstdint>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

namespace grove::onnx_import {
namespace {

bool IsDefault(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// The ai.onnx op types of a graph and of the graphs nested in its nodes.
void CollectOps(const ::onnx::GraphProto& graph, std::set<std::string>* ops) {
  for (const ::onnx::NodeProto& node : graph.node()) {
    if (IsDefault(node.domain())) ops->insert(node.op_type());
    for (const ::onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) CollectOps(a.g(), ops);
      for (const ::onnx::GraphProto& g : a.graphs()) CollectOps(g, ops);
    }
  }
}

// The since_version of `op`'s definition in effect at `opset`, or -1.
int SinceVersion(const std::string& op, int opset) {
  const ::onnx::OpSchema* schema = ::onnx::OpSchemaRegistry::Schema(op, opset, "");
  return schema == nullptr ? -1 : schema->since_version();
}

absl::Status ConverterFailed(const ::onnx::ModelProto& model, int from, int to, const std::string& what) {
  std::set<std::string> ops;
  CollectOps(model.graph(), &ops);
  std::string prefix = absl::StrCat("opset ", from, " is below the ", 11,
                                    " grove imports, and ONNX's version converter failed to convert the model to "
                                    "opset ",
                                    to);
  for (const std::string& op : ops) {
    // The converter's own messages end with the op it lacks an adapter for.
    if (absl::StrContains(what, absl::StrCat(" for ", op)) || absl::StrContains(what, absl::StrCat("For ", op))) {
      return absl::UnimplementedError(absl::StrCat(prefix, " at op ", op, ": ", what));
    }
  }
  std::vector<std::string> changed;
  for (const std::string& op : ops) {
    const int a = SinceVersion(op, from);
    const int b = SinceVersion(op, to);
    if (a < 0) {
      changed.push_back(absl::StrCat(op, " (not in opset ", from, ")"));
    } else if (a != b) {
      changed.push_back(b < 0 ? absl::StrCat(op, " (removed by opset ", to, ")")
                              : absl::StrCat(op, " (", a, " -> ", b, ")"));
    }
  }
  return absl::UnimplementedError(
      absl::StrCat(prefix, ": ", what, changed.empty() ? "" : "; the ops it had to convert: ",
                   absl::StrJoin(changed, ", ")));
}

// PRelu before opset 7 applied a 1-D slope of C > 1 values per channel
// (axis 1), as early PyTorch exports write it; from opset 7 the slope
// broadcasts from the trailing dims, and the version converter leaves the
// slope as it is. A 1-D slope initializer of such a PRelu, used by it alone,
// whose input has a known rank r >= 3, becomes [C, 1, ...] (r - 1 dims), which
// applies it per channel under the new broadcasting.
void ReshapeLegacyPReluSlopes(::onnx::ModelProto* model) {
  ::onnx::GraphProto* graph = model->mutable_graph();
  std::map<std::string, int> rank;
  auto note = [&](const ::onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) {
      rank[v.name()] = v.type().tensor_type().shape().dim_size();
    }
  };
  for (const ::onnx::ValueInfoProto& v : graph->input()) note(v);
  for (const ::onnx::ValueInfoProto& v : graph->value_info()) note(v);
  std::map<std::string, int> uses;
  for (const ::onnx::NodeProto& node : graph->node()) {
    for (const std::string& in : node.input()) ++uses[in];
  }
  for (const ::onnx::NodeProto& node : graph->node()) {
    if (!IsDefault(node.domain()) || node.op_type() != "PRelu" || node.input_size() != 2) continue;
    const auto r = rank.find(node.input(0));
    if (r == rank.end() || r->second < 3 || uses[node.input(1)] != 1) continue;
    for (::onnx::TensorProto& init : *graph->mutable_initializer()) {
      if (init.name() != node.input(1) || init.dims_size() != 1 || init.dims(0) <= 1) continue;
      const int64_t channels = init.dims(0);
      init.clear_dims();
      init.add_dims(channels);
      for (int i = 0; i < r->second - 2; ++i) init.add_dims(1);
      // Models of IR version < 4 list initializers among the graph's inputs.
      for (::onnx::ValueInfoProto& v : *graph->mutable_input()) {
        if (v.name() != init.name() || !v.type().has_tensor_type()) continue;
        ::onnx::TensorShapeProto* shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (int64_t d : init.dims()) shape->add_dim()->set_dim_value(d);
      }
    }
  }
}

}  // namespace

int DefaultDomainOpset(const ::onnx::ModelProto& model) {
  int opset = -1;
  for (const ::onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (IsDefault(o.domain())) opset = static_cast<int>(o.version());
  }
  return opset;
}

absl::StatusOr<::onnx::ModelProto> UpgradeOpset(const ::onnx::ModelProto& model, int from, int to) {
  try {
    // Some adapters (Add and Gemm 6 -> 7, to broadcasting) need the shapes
    // of their inputs, which the converter does not infer itself.
    ::onnx::ModelProto shaped = model;
    try {
      ::onnx::shape_inference::InferShapes(shaped);
    } catch (const std::exception&) {
      shaped = model;  // convert without the shapes; an adapter that needs one says so
    }
    if (from < 7) ReshapeLegacyPReluSlopes(&shaped);
    return ::onnx::version_conversion::ConvertVersion(shaped, to);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory while converting the model from opset ", from, " to ", to));
  } catch (const std::exception& e) {
    return ConverterFailed(model, from, to, e.what());
  } catch (...) {
    return ConverterFailed(model, from, to, "an unknown exception");
  }
}

}  // namespace grove::onnx_import
