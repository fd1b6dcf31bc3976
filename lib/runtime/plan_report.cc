#include "lib/runtime/plan_report.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/binding.h"
#include "lib/runtime/execution_plan.h"

namespace grove::runtime {
namespace {

// Paths beyond this many (nested bodies of bodies) are not described.
constexpr int kMaxPaths = 256;

class Describer {
 public:
  Describer(const ir::Graph& graph, Backend& backend) : graph_(graph), backend_(backend) {}

  absl::Status Describe(int subgraph, const std::vector<ValueSig>& inputs, const std::vector<ValueSig>& captures,
                        const std::string& path, ExecutionInfo* info) {
    if (static_cast<int>(info->paths.size()) >= kMaxPaths) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
        ExecutionPlan::Build(graph_, subgraph, inputs, captures, &backend_);
    if (!plan.ok() && subgraph != 0) {
      // A branch the data never takes with these shapes (Silero's 8 kHz
      // branch at 16 kHz shapes) may not plan for them: say so, go on.
      info->paths.push_back(PathInfo{path, {}, {}, {},
                                     absl::StrCat("not plannable for these shapes: ", plan.status().message())});
      return absl::OkStatus();
    }
    if (!plan.ok()) return plan.status();
    const ExecutionPlan& p = **plan;
    PathInfo out;
    out.path = path;
    for (const PlanStep& step : p.steps()) out.steps.push_back(Step(step));
    for (const PlanSegment& seg : p.segments()) {
      SegmentInfo s;
      s.first_step = seg.first;
      s.end_step = seg.end;
      for (int i = seg.first; i < seg.end; ++i) {
        if (!p.steps()[i].outputs_empty) s.steps.push_back(out.steps[i]);
      }
      out.segments.push_back(std::move(s));
    }
    for (size_t i = 0; i < p.steps().size(); ++i) {
      const PlanStep& step = p.steps()[i];
      if (step.host_reason.empty()) continue;
      out.host_steps.push_back(
          HostStepInfo{static_cast<int>(i), out.steps[i].op, out.steps[i].node, step.host_reason});
    }
    info->paths.push_back(std::move(out));
    for (const PlanStep& step : p.steps()) {
      if (step.outputs_empty) continue;
      for (const ir::AttrSpec& a : step.node->def->attrs) {
        if (a.kind != ir::AttrKind::kSubgraph) continue;
        const int body = step.node->attrs.GetSubgraph(a.name);
        if (body <= 0 || body >= static_cast<int>(graph_.subgraphs.size())) continue;
        const std::string body_path = absl::StrCat(path, " / ", step.node->type, " '", step.node->name, "' / ", a.name);
        if (absl::Status s = DescribeBody(p, step, body, body_path, info); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  StepInfo Step(const PlanStep& step) const {
    return StepInfo{step.node->type, step.node->name, step.backend == ir::Backend::kCuda ? "cuda" : "cpu",
                    backend_.KernelChoices(*step.node)};
  }

  // A body's input and capture signatures as its first run sees them: If's
  // branches take none; Loop's body takes the trip count, the condition and
  // the carried values' initial values.
  absl::Status DescribeBody(const ExecutionPlan& outer, const PlanStep& step, int body, const std::string& path,
                            ExecutionInfo* info) {
    const ir::Subgraph& sg = graph_.subgraphs[body];
    std::string unknown;
    auto sig_of_value = [&](int v, std::vector<ValueSig>* sigs) {
      const PlanValue& pv = outer.values()[v];
      if (ir::IsBoxed(pv.dtype)) {
        sigs->push_back(ValueSig{pv.dtype, {}, false});
      } else if (!pv.shape_known) {
        unknown = graph_.tensors[pv.tensor].name;
      } else {
        sigs->push_back(ValueSig{pv.dtype, pv.shape});
      }
    };
    std::vector<ValueSig> inputs, captures;
    if (step.node->type == "Loop") {
      if (sg.inputs.size() < 2) return absl::OkStatus();
      inputs.push_back(ValueSig{DType::kI64, {}});
      inputs.push_back(ValueSig{DType::kBool, {}});
      for (size_t i = 2; i < step.inputs.size() && inputs.size() < sg.inputs.size(); ++i) {
        if (step.inputs[i] < 0) return absl::OkStatus();
        sig_of_value(step.inputs[i], &inputs);
      }
    } else if (!sg.inputs.empty()) {
      info->paths.push_back(PathInfo{path, {}, {}, {}, "planned when run (its inputs are made by the op)"});
      return absl::OkStatus();
    }
    for (int t : sg.captures) {
      const int v = outer.ValueOf(t);
      if (v < 0) return absl::OkStatus();
      sig_of_value(v, &captures);
    }
    if (!unknown.empty() || inputs.size() != sg.inputs.size()) {
      info->paths.push_back(PathInfo{
          path, {}, {}, {}, absl::StrCat("planned when run ('", unknown, "' has a shape known only then)")});
      return absl::OkStatus();
    }
    return Describe(body, inputs, captures, path, info);
  }

  const ir::Graph& graph_;
  Backend& backend_;
};

}  // namespace

absl::StatusOr<ExecutionInfo> DescribePlans(const internal::ModelImpl& model, Backend& backend,
                                            const std::vector<std::vector<int64_t>>& input_shapes) {
  const ir::Graph& g = model.graph();
  const ir::Subgraph& main = g.subgraphs[0];
  if (input_shapes.size() != main.inputs.size()) return InputCountError(g, input_shapes.size());
  std::vector<TensorView> views;
  std::vector<ValueSig> sigs;
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    const ir::TensorDecl& d = g.tensors[main.inputs[i]];
    views.emplace_back(d.dtype, input_shapes[i], static_cast<void*>(nullptr));
    sigs.push_back(ValueSig{d.dtype, input_shapes[i]});
  }
  if (absl::Status s = TensorsOnly(g, {}); !s.ok()) return s;
  if (absl::Status s = ValidateMainInputs(g, views, false); !s.ok()) return s;
  ExecutionInfo info;
  info.device = backend.Describe();
  Describer describer(g, backend);
  if (absl::Status s = describer.Describe(0, sigs, {}, "main", &info); !s.ok()) return s;
  return info;
}

}  // namespace grove::runtime
