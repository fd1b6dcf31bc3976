// `grove inspect`: a model's signature, symbols, content and, for given input
// shapes, its memory plan; as text or as one JSON object.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "command_line.h"
#include "json_writer.h"
#include "kernel_json.h"

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove inspect MODEL.grove [--shape NAME=D0xD1... ...] [--device cpu|cuda] [--arch sm_XY] [--json]\n"
    "\n"
    "Prints the model's inputs and outputs (symbolic dims by name), symbols and\n"
    "their ranges, operator counts, weight bytes and subgraphs. With a --shape\n"
    "for every input that has symbolic dims, also prints the memory plan for\n"
    "those shapes: arena bytes, the lower bound (most bytes live at one step),\n"
    "the tensors live at the peak and the output shapes. With --device, also\n"
    "prints how the model runs on that backend, per control-flow path (the main\n"
    "graph, each If branch and Loop body): its steps and which backend runs\n"
    "each, its straight-line segments, and each step that needs the host and\n"
    "so ends a segment (control flow, a CPU fallback, shapes or values read\n"
    "back), with the reason, and each attention chain fused into one step\n"
    "(\"fused attention: ...\"; GROVE_FUSE_ATTENTION=0 keeps them apart).\n"
    "--device cuda needs no GPU.\n"
    "\n"
    "Flags:\n"
    "  --shape NAME=3x16  an input's shape; NAME= is a scalar (repeatable)\n"
    "  --device D         cpu or cuda: print the segments of each path\n"
    "  --arch sm_XY       the CUDA arch planned for with --device cuda (default sm_90)\n"
    "  --kernel-table FILE  with --device cuda: a kernel dispatch table (grove tune);\n"
    "                     each CUDA step shows the kernel variant it chose and\n"
    "                     whether from a table, the cost model or generic\n"
    "  --json             print one JSON object instead of text (segments under \"segments\";\n"
    "                     with --device cuda each kernel choice has \"cost_model\": the\n"
    "                     variants its family's cost model ranked for the step, cheapest\n"
    "                     first, with occupancy, waste, bytes, flops and estimate_us, and\n"
    "                     the pick's own terms and rank)\n"
    "  --top-k K          ranked variants listed per kernel choice in --json (default 5;\n"
    "                     0: all)\n";

constexpr size_t kPeakTensorsShown = 8;

struct Plan {
  std::vector<std::vector<int64_t>> input_shapes;
  std::string arch = "sm_90";  // --device cuda: the arch planned for
  int top_k = kDefaultRankedShown;  // --json: ranked variants shown per kernel choice
  std::vector<std::vector<int64_t>> output_shapes;
  MemoryReport report;
  std::optional<ExecutionInfo> execution;  // with --device
};

// The op of a step the attention plan pass made (lib/runtime/attention_fusion.h).
constexpr char kFusedAttention[] = "FusedAttention";

int FusedAttentionSteps(const PathInfo& path) {
  return static_cast<int>(std::count_if(path.steps.begin(), path.steps.end(),
                                        [](const StepInfo& st) { return st.op == kFusedAttention; }));
}

std::string StepName(const std::string& op, const std::string& node) {
  return node.empty() ? TerminalSafe(op) : absl::StrCat(TerminalSafe(op), " '", TerminalSafe(node), "'");
}

std::string ExecutionText(const ExecutionInfo& info) {
  std::string out = absl::StrCat("execution on ", TerminalSafe(info.device), ":\n");
  for (const PathInfo& path : info.paths) {
    absl::StrAppend(&out, "  path ", TerminalSafe(path.path), ": ");
    if (!path.note.empty()) {
      absl::StrAppend(&out, TerminalSafe(path.note), "\n");
      continue;
    }
    absl::StrAppend(&out, path.steps.size(), " steps, ", path.segments.size(),
                    path.segments.size() == 1 ? " segment, " : " segments, ", path.host_steps.size(),
                    path.host_steps.size() == 1 ? " step needs the host\n" : " steps need the host\n");
    for (const StepInfo& st : path.steps) {
      if (st.op == kFusedAttention) absl::StrAppend(&out, "    fused attention: ", TerminalSafe(st.node), "\n");
    }
    for (size_t i = 0; i < path.steps.size(); ++i) {
      if (!path.steps[i].layout.empty()) {
        absl::StrAppend(&out, "    step ", i, " ", StepName(path.steps[i].op, path.steps[i].node), ": ",
                        path.steps[i].layout, "\n");
      }
      for (const KernelChoiceInfo& k : path.steps[i].kernels) {
        absl::StrAppend(&out, "    step ", i, " ", StepName(path.steps[i].op, path.steps[i].node), ": kernel ",
                        TerminalSafe(k.config), " (", k.source, ", ", TerminalSafe(k.problem), ")\n");
      }
    }
    size_t h = 0;
    for (size_t k = 0; k <= path.segments.size(); ++k) {
      const int until = k < path.segments.size() ? path.segments[k].first_step : static_cast<int>(path.steps.size());
      for (; h < path.host_steps.size() && path.host_steps[h].step < until; ++h) {
        const HostStepInfo& hs = path.host_steps[h];
        absl::StrAppend(&out, "    step ", hs.step, " ", StepName(hs.op, hs.node), " (",
                        path.steps[hs.step].backend, "): needs the host: ", TerminalSafe(hs.reason), "\n");
      }
      if (k == path.segments.size()) break;
      const SegmentInfo& seg = path.segments[k];
      std::vector<std::string> steps;
      for (const StepInfo& st : seg.steps) steps.push_back(absl::StrCat(StepName(st.op, st.node), " (", st.backend, ")"));
      absl::StrAppend(&out, "    segment ", k, ": steps ", seg.first_step, "..", seg.end_step - 1, ": ",
                      steps.empty() ? std::string("(all empty)") : absl::StrJoin(steps, ", "), "\n");
      if (!seg.pinned.empty()) {
        absl::StrAppend(&out, "      pinned to exact shapes (a graph per shape, not per bucket): ",
                        TerminalSafe(seg.pinned), "\n");
      }
    }
  }
  return out;
}

std::string JsonString(absl::string_view s);

// A finite number as JSON (non-finite ones as 0: JSON has no NaN).
std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "0"; }

std::string ExecutionJson(const ExecutionInfo& info, const std::string& arch, int top_k) {
  auto step_json = [&](const StepInfo& st) {
    std::vector<std::string> kernels;
    for (const KernelChoiceInfo& k : st.kernels) {
      JsonWriter w;
      WriteKernelChoice(w, k, arch, top_k);
      kernels.push_back(w.TakeText());
    }
    return absl::StrCat("{\"op\":", JsonString(st.op), ",\"node\":", JsonString(st.node),
                        ",\"backend\":", JsonString(st.backend), ",\"layout\":", JsonString(st.layout),
                        ",\"kernels\":[", absl::StrJoin(kernels, ","), "]}");
  };
  std::vector<std::string> paths;
  for (const PathInfo& path : info.paths) {
    std::vector<std::string> steps, segments, host;
    for (const StepInfo& st : path.steps) steps.push_back(step_json(st));
    for (const SegmentInfo& seg : path.segments) {
      std::vector<std::string> ss;
      for (const StepInfo& st : seg.steps) ss.push_back(step_json(st));
      segments.push_back(absl::StrCat("{\"first_step\":", seg.first_step, ",\"end_step\":", seg.end_step,
                                      ",\"pinned\":", JsonString(seg.pinned), ",\"steps\":[",
                                      absl::StrJoin(ss, ","), "]}"));
    }
    for (const HostStepInfo& hs : path.host_steps) {
      host.push_back(absl::StrCat("{\"step\":", hs.step, ",\"op\":", JsonString(hs.op), ",\"node\":",
                                  JsonString(hs.node), ",\"reason\":", JsonString(hs.reason), "}"));
    }
    paths.push_back(absl::StrCat("{\"path\":", JsonString(path.path), ",\"note\":", JsonString(path.note),
                                 ",\"num_fused_attention\":", FusedAttentionSteps(path), ",\"steps\":[", absl::StrJoin(steps, ","), "],\"segments\":[",
                                 absl::StrJoin(segments, ","), "],\"host_steps\":[", absl::StrJoin(host, ","), "]}"));
  }
  return absl::StrCat("{\"device\":", JsonString(info.device), ",\"paths\":[", absl::StrJoin(paths, ","), "]}");
}

double Ratio(const MemoryReport& r) {
  return r.lower_bound_bytes == 0 ? 1.0
                                  : static_cast<double>(r.arena_bytes) / static_cast<double>(r.lower_bound_bytes);
}

std::string JsonString(absl::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

std::string JsonDims(const std::vector<int64_t>& dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

std::string JsonTensorInfos(const std::vector<TensorInfo>& infos) {
  std::vector<std::string> items;
  for (const TensorInfo& info : infos) {
    std::vector<std::string> dims;
    for (const DimInfo& d : info.shape) dims.push_back(d.is_symbolic() ? JsonString(d.symbol) : absl::StrCat(d.value));
    items.push_back(absl::StrCat("{\"name\":", JsonString(info.name), ",\"kind\":", JsonString(ValueKindName(info.kind)),
                                 ",\"dtype\":", JsonString(DTypeName(info.dtype)), ",\"shape\":[",
                                 absl::StrJoin(dims, ","), "]}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string Json(const std::string& path, const Model& model, const Plan* plan) {
  const ModelSummary summary = model.Summary();
  std::string out = absl::StrCat("{\"model\":", JsonString(path), ",\"format_version\":", summary.format_version,
                                 ",\"producer\":", JsonString(summary.producer),
                                 ",\"inputs\":", JsonTensorInfos(model.inputs()),
                                 ",\"outputs\":", JsonTensorInfos(model.outputs()), ",\"symbols\":[");
  for (size_t i = 0; i < model.symbols().size(); ++i) {
    const SymbolInfo& s = model.symbols()[i];
    absl::StrAppend(&out, i ? "," : "", "{\"name\":", JsonString(s.name), ",\"min\":", s.min, ",\"max\":", s.max, "}");
  }
  absl::StrAppend(&out, "],\"num_subgraphs\":", summary.num_subgraphs, ",\"num_operators\":", summary.num_operators,
                  ",\"op_counts\":{");
  for (size_t i = 0; i < summary.op_counts.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", JsonString(summary.op_counts[i].first), ":", summary.op_counts[i].second);
  }
  absl::StrAppend(&out, "},\"weight_bytes\":", summary.weight_bytes,
                  ",\"shape_inference_note\":", JsonString(summary.shape_inference_note));
  if (plan == nullptr) {
    absl::StrAppend(&out, ",\"input_shapes\":null,\"arena_bytes\":null,\"lower_bound_bytes\":null,\"ratio\":null,"
                          "\"peak_step\":null,\"peak_tensors\":null,\"output_shapes\":null}");
    return out;
  }
  const MemoryReport& r = plan->report;
  absl::StrAppend(&out, ",\"input_shapes\":{");
  for (size_t i = 0; i < plan->input_shapes.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", JsonString(model.inputs()[i].name), ":", JsonDims(plan->input_shapes[i]));
  }
  absl::StrAppend(&out, "},\"arena_bytes\":", r.arena_bytes, ",\"lower_bound_bytes\":", r.lower_bound_bytes,
                  absl::StrFormat(",\"ratio\":%.6g", Ratio(r)), ",\"peak_step\":", r.peak_step,
                  ",\"num_steps\":", r.num_steps, ",\"num_arena_tensors\":", r.num_arena_tensors,
                  ",\"num_folded_tensors\":", r.num_folded_tensors,
                  ",\"num_dynamic_tensors\":", r.num_dynamic_tensors, ",\"peak_tensors\":[");
  for (size_t i = 0; i < r.peak_tensors.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", "{\"name\":", JsonString(r.peak_tensors[i].name),
                    ",\"bytes\":", r.peak_tensors[i].bytes, "}");
  }
  absl::StrAppend(&out, "],\"output_shapes\":{");
  for (size_t i = 0; i < plan->output_shapes.size() && i < model.outputs().size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", JsonString(model.outputs()[i].name), ":", JsonDims(plan->output_shapes[i]));
  }
  absl::StrAppend(&out, "}");
  if (plan->execution.has_value()) {
    absl::StrAppend(&out, ",\"segments\":", ExecutionJson(*plan->execution, plan->arch, plan->top_k));
  }
  absl::StrAppend(&out, "}");
  return out;
}

std::string Text(const std::string& path, const Model& model, const Plan* plan) {
  const ModelSummary summary = model.Summary();
  std::string out = absl::StrCat("model: ", TerminalSafe(path), "\n  format version ", summary.format_version);
  if (!summary.producer.empty()) absl::StrAppend(&out, ", producer \"", TerminalSafe(summary.producer), "\"");
  absl::StrAppend(&out, "\ninputs:\n");
  for (const TensorInfo& info : model.inputs()) {
    absl::StrAppend(&out, "  ", TerminalSafe(info.name), "  ", DeclaredType(info), "\n");
  }
  absl::StrAppend(&out, "outputs:\n");
  for (const TensorInfo& info : model.outputs()) {
    absl::StrAppend(&out, "  ", TerminalSafe(info.name), "  ", DeclaredType(info), "\n");
  }
  absl::StrAppend(&out, "symbols:", model.symbols().empty() ? " none\n" : "\n");
  for (const SymbolInfo& s : model.symbols()) absl::StrAppend(&out, "  ", TerminalSafe(s.name), "  ", s.min, "..", s.max, "\n");
  std::vector<std::string> counts;
  for (const auto& [op, n] : summary.op_counts) counts.push_back(absl::StrCat(TerminalSafe(op), " ", n));
  absl::StrAppend(&out, "subgraphs: ", summary.num_subgraphs, "\noperators: ", summary.num_operators, " (",
                  absl::StrJoin(counts, ", "), ")\nweights: ", HumanBytes(summary.weight_bytes), "\n");
  if (!summary.shape_inference_note.empty()) {
    absl::StrAppend(&out, "note: symbolic shapes stop at: ", TerminalSafe(summary.shape_inference_note),
                    "\n      (plans infer concrete shapes exactly; give --shape to see them)\n");
  }
  if (plan == nullptr) {
    bool tensors_only = true;
    for (const TensorInfo& info : model.inputs()) tensors_only &= info.kind == ValueKind::kTensor;
    absl::StrAppend(&out, tensors_only ? "memory plan: give --shape NAME=D0xD1... for each input with symbolic dims\n"
                                       : "memory plan: made when run (an input is a sequence or optional)\n");
    return out;
  }
  const MemoryReport& r = plan->report;
  std::vector<std::string> shapes;
  for (size_t i = 0; i < plan->input_shapes.size(); ++i) {
    shapes.push_back(absl::StrCat(TerminalSafe(model.inputs()[i].name), "=", ShapeString(plan->input_shapes[i])));
  }
  absl::StrAppend(&out, "memory plan for ", absl::StrJoin(shapes, " "), ":\n");
  absl::StrAppend(&out, "  arena: ", HumanBytes(r.arena_bytes), "\n");
  absl::StrAppend(&out, "  lower bound: ", HumanBytes(r.lower_bound_bytes), "\n");
  absl::StrAppend(&out, absl::StrFormat("  ratio: %.3f\n", Ratio(r)));
  absl::StrAppend(&out, "  steps: ", r.num_steps, "; tensors: ", r.num_arena_tensors, " in the arena, ",
                  r.num_folded_tensors, " folded, ", r.num_dynamic_tensors, " dynamic\n");
  if (!r.peak_tensors.empty()) {
    absl::StrAppend(&out, "  live at the peak (step ", r.peak_step, "):\n");
    for (size_t i = 0; i < r.peak_tensors.size() && i < kPeakTensorsShown; ++i) {
      absl::StrAppend(&out, "    ", TerminalSafe(r.peak_tensors[i].name), "  ", HumanBytes(r.peak_tensors[i].bytes), "\n");
    }
    if (r.peak_tensors.size() > kPeakTensorsShown) {
      absl::StrAppend(&out, "    ... and ", r.peak_tensors.size() - kPeakTensorsShown, " more\n");
    }
  }
  absl::StrAppend(&out, "  output shapes:\n");
  for (size_t i = 0; i < plan->output_shapes.size() && i < model.outputs().size(); ++i) {
    absl::StrAppend(&out, "    ", TerminalSafe(model.outputs()[i].name), "  ", ShapeString(plan->output_shapes[i]),
                    std::find(plan->output_shapes[i].begin(), plan->output_shapes[i].end(), -1) !=
                            plan->output_shapes[i].end()
                        ? "  (-1: depends on the data)\n"
                        : "\n");
  }
  if (plan->execution.has_value()) absl::StrAppend(&out, ExecutionText(*plan->execution));
  return out;
}

}  // namespace

int InspectMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"shape", kRepeatedValue}, {"device", kValue},       {"arch", kValue},
      {"json", kSwitch},         {"kernel-table", kValue}, {"top-k", kValue}};
  ParsedArgs args;
  if (int rc = ParseArgs(argv, kFlags, &args, kUsage); rc >= 0) return rc;
  if (args.positional.size() != 1) {
    return UsageError(args.positional.empty()
                          ? "inspect: missing MODEL.grove"
                          : absl::StrCat("inspect: unexpected argument '", args.positional[1], "'"));
  }
  std::optional<Device> device;
  if (args.Has("device")) {
    absl::StatusOr<Device> d = ParseDevice(args.Values("device")[0]);
    if (!d.ok() || *d == Device::kAuto) {
      return UsageError(absl::StrCat("inspect: --device must be cpu or cuda, not '", args.Values("device")[0], "'"));
    }
    device = *d;
  }
  if (args.Has("arch") && device != Device::kCuda) return UsageError("inspect: --arch goes with --device cuda");
  if (args.Has("kernel-table") && device != Device::kCuda) {
    return UsageError("inspect: --kernel-table goes with --device cuda");
  }
  int top_k = kDefaultRankedShown;
  if (args.Has("top-k")) {
    if (device != Device::kCuda || !args.Has("json")) return UsageError("inspect: --top-k goes with --device cuda --json");
    if (int rc = ParseTopK(args.Values("top-k")[0], "inspect", &top_k); rc >= 0) return rc;
  }
  const std::string& path = args.positional[0];
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromFile(path);
  if (!model.ok()) return Fail(absl::StrCat("cannot load model ", path, ": ", model.status().message()));

  // Plan when every input's shape is known: given, or fully static.
  std::unique_ptr<Plan> plan = std::make_unique<Plan>();
  std::vector<std::string> unknown;
  if (int rc = InputShapesFromFlags(args, **model, &plan->input_shapes, &unknown); rc >= 0) return rc;
  const bool shapes_requested = args.Has("shape");
  // A sequence's or optional's tensors have no one shape to plan for.
  for (const TensorInfo& info : (*model)->inputs()) {
    if (info.kind == ValueKind::kTensor) continue;
    if (shapes_requested) {
      return Fail(absl::StrCat("memory plans take tensor inputs; input '", info.name, "' is ", DeclaredType(info)));
    }
    plan.reset();
  }
  if (!unknown.empty()) {
    if (shapes_requested) return Fail(absl::StrCat("missing --shape for ", absl::StrJoin(unknown, ", ")));
    plan.reset();
  }
  if (plan != nullptr) {
    // The plan is backend-free; inspecting must not need a GPU.
    SessionOptions options;
    options.device = Device::kCpu;
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*model, options);
    if (!session.ok()) return Fail(absl::StrCat("cannot create a session: ", session.status().message()));
    absl::StatusOr<MemoryReport> report = (*session)->Reshape(plan->input_shapes, &plan->output_shapes);
    if (!report.ok()) return Fail(absl::StrCat("cannot plan these shapes: ", report.status().message()));
    plan->report = *std::move(report);
    if (device.has_value()) {
      ExecutionInfoOptions eo;
      eo.device = *device;
      if (args.Has("arch")) eo.arch = args.Values("arch")[0];
      plan->arch = eo.arch;
      plan->top_k = top_k;
      if (args.Has("kernel-table")) eo.kernel_table = args.Values("kernel-table")[0];
      eo.input_shapes = plan->input_shapes;
      absl::StatusOr<ExecutionInfo> info = DescribeExecution(**model, eo);
      if (!info.ok()) return Fail(absl::StrCat("cannot plan these shapes: ", info.status().message()));
      plan->execution = *std::move(info);
    }
  } else if (device.has_value()) {
    return Fail("--device shows the plans of given shapes: give --shape NAME=D0xD1... for each input with symbolic dims");
  }

  const std::string out = args.Has("json") ? Json(path, **model, plan.get()) + "\n" : Text(path, **model, plan.get());
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace grove::cli
