#include "lib/runtime/plan_report.h"

#include <map>
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
  Describer(const ir::Graph& graph, Backend& backend, const BucketPolicy* buckets)
      : graph_(graph), backend_(backend), buckets_(buckets) {}

  absl::Status Describe(int subgraph, const std::vector<ValueSig>& inputs, const std::vector<ValueSig>& captures,
                        const std::string& path, ExecutionInfo* info) {
    if (static_cast<int>(info->paths.size()) >= kMaxPaths) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = Plan(subgraph, inputs, captures);
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
  // The plan a session makes for these signatures: where a bucket serves
  // them (as the executor's Bucket() decides), its bound's plan first, then
  // theirs, both prepared under the bucket (Backend::SetBucketPlans, so a
  // variant chosen per bucket is the bound's); else the exact plan. A bound
  // that does not plan leaves the shapes exact, as in a session.
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> Plan(int subgraph, const std::vector<ValueSig>& inputs,
                                                      const std::vector<ValueSig>& captures) {
    std::vector<ValueSig> bound_inputs, bound_captures;
    const void* bucket = buckets_ == nullptr ? nullptr : Bucket(subgraph, inputs, captures, &bound_inputs, &bound_captures);
    if (bucket != nullptr) {
      backend_.SetBucketPlans(bucket);
      absl::StatusOr<std::unique_ptr<ExecutionPlan>> bound =
          ExecutionPlan::Build(graph_, subgraph, bound_inputs, bound_captures, &backend_);
      if (bound.ok()) {
        absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
            ExecutionPlan::Build(graph_, subgraph, inputs, captures, &backend_);
        backend_.SetBucketPlans(nullptr);
        return plan;
      }
      backend_.SetBucketPlans(nullptr);
    }
    return ExecutionPlan::Build(graph_, subgraph, inputs, captures, &backend_);
  }

  // The identity of the bucket serving these signatures (one per bound, as
  // a session keeps one family per bound), with the bound's signatures;
  // nullptr where the inputs cannot be bucketed.
  const void* Bucket(int subgraph, const std::vector<ValueSig>& inputs, const std::vector<ValueSig>& captures,
                     std::vector<ValueSig>* bound_inputs, std::vector<ValueSig>* bound_captures) {
    auto views = [](const std::vector<ValueSig>& sigs, std::vector<TensorView>* out) {
      for (const ValueSig& s : sigs) {
        if (!s.rank_known) return false;
        out->emplace_back(s.dtype, s.shape, static_cast<void*>(nullptr));
      }
      return true;
    };
    std::vector<TensorView> in, cap;
    if (!views(inputs, &in) || !views(captures, &cap)) return nullptr;
    std::vector<std::vector<int64_t>> shapes, capture_shapes;
    std::string why;
    const bool bucketed = subgraph == 0 ? cap.empty() && buckets_->BoundShapes(graph_, in, &shapes, &why)
                                        : buckets_->BoundBodyShapes(in, cap, &shapes, &capture_shapes, &why);
    if (!bucketed) return nullptr;
    std::vector<int64_t> key = {subgraph};
    auto add = [&](const std::vector<ValueSig>& sigs, const std::vector<std::vector<int64_t>>& bound,
                   std::vector<ValueSig>* out) {
      for (size_t i = 0; i < sigs.size(); ++i) {
        out->push_back(ValueSig{sigs[i].dtype, bound[i]});
        key.push_back(static_cast<int64_t>(sigs[i].dtype));
        key.push_back(static_cast<int64_t>(bound[i].size()));
        key.insert(key.end(), bound[i].begin(), bound[i].end());
      }
    };
    add(inputs, shapes, bound_inputs);
    add(captures, capture_shapes, bound_captures);
    std::unique_ptr<int>& id = buckets_made_[key];
    if (id == nullptr) id = std::make_unique<int>(0);
    return id.get();
  }

  StepInfo Step(const PlanStep& step) const {
    return StepInfo{step.node->type, step.node->name, step.backend == ir::Backend::kCuda ? "cuda" : "cpu",
                    backend_.KernelChoices(*step.node), backend_.StepLayout(*step.node)};
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
  const BucketPolicy* buckets_;  // null: exact plans only
  std::map<std::vector<int64_t>, std::unique_ptr<int>> buckets_made_;  // bound signatures -> identity
};

}  // namespace

absl::StatusOr<std::optional<BucketPolicy>> GraphSessionBuckets(const ir::Graph& graph, const SessionOptions& options) {
  if (options.cuda_graphs == GraphMode::kOff || graph.symbols.empty()) return std::nullopt;
  absl::StatusOr<BucketPolicy> policy = BucketPolicy::Make(graph, options.shape_buckets);
  if (!policy.ok()) return policy.status();
  if (policy->all_exact()) return std::nullopt;
  return std::optional<BucketPolicy>(*std::move(policy));
}

absl::StatusOr<ExecutionInfo> DescribePlans(const internal::ModelImpl& model, Backend& backend,
                                            const std::vector<std::vector<int64_t>>& input_shapes,
                                            const BucketPolicy* buckets) {
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
  Describer describer(g, backend, buckets);
  if (absl::Status s = describer.Describe(0, sigs, {}, "main", &info); !s.ok()) return s;
  return info;
}

}  // namespace grove::runtime
