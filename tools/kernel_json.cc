#include "kernel_json.h"

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "command_line.h"
#include "grove/kernel_ranking.h"

namespace grove::cli {
namespace {

void WriteEstimate(JsonWriter& w, const KernelVariantEstimate& e) {
  w.BeginObject();
  w.Key("config");
  w.String(e.config);
  w.Key("occupancy");
  w.Double(e.occupancy);
  w.Key("waste");
  w.Double(e.waste);
  w.Key("bytes");
  w.Double(e.bytes);
  w.Key("flops");
  w.Double(e.flops);
  w.Key("estimate_us");
  w.Double(e.estimate_us);
  w.EndObject();
}

}  // namespace

int ParseTopK(const std::string& value, const char* command, int* out) {
  if (!absl::SimpleAtoi(value, out) || *out < 0 || *out > 1000) {
    return UsageError(absl::StrCat(command, ": --top-k wants 0 (all) to 1000, not '", value, "'"));
  }
  return -1;
}

void WriteKernelChoice(JsonWriter& w, const KernelChoiceInfo& choice, absl::string_view arch, int top_k) {
  w.BeginObject();
  w.Key("config");
  w.String(choice.config);
  w.Key("source");
  w.String(choice.source);
  w.Key("problem");
  w.String(choice.problem);
  w.Key("bucket");
  w.String(choice.bucket);
  w.Key("estimate_us");
  w.Double(choice.estimate_us);
  w.Key("measured_us");
  w.Double(choice.measured_us);
  w.Key("cost_model");
  w.BeginObject();
  absl::StatusOr<KernelRanking> r = RankKernelVariants(choice, arch, top_k);
  if (!r.ok()) {
    w.Key("error");
    w.String(r.status().message());
  } else {
    w.Key("modeled");
    w.Bool(r->modeled);
    if (r->modeled) {
      w.Key("valid_variants");
      w.Int(r->valid_variants);
      w.Key("pick_rank");
      w.Int(r->pick_rank);
      w.Key("pick");
      WriteEstimate(w, r->pick);
      w.Key("ranked");
      w.BeginArray();
      for (const KernelVariantEstimate& e : r->ranked) WriteEstimate(w, e);
      w.EndArray();
    }
  }
  w.EndObject();
  w.EndObject();
}

void WriteKernelSteps(JsonWriter& w, absl::Span<const KernelChoiceInfo> choices, absl::string_view arch, int top_k) {
  w.BeginArray();
  for (size_t i = 0; i < choices.size();) {
    size_t end = i + 1;
    while (end < choices.size() && choices[end].op == choices[i].op && choices[end].node == choices[i].node) ++end;
    w.BeginObject();
    w.Key("op");
    w.String(choices[i].op);
    w.Key("node");
    w.String(choices[i].node);
    w.Key("kernels");
    w.BeginArray();
    for (size_t k = i; k < end; ++k) WriteKernelChoice(w, choices[k], arch, top_k);
    w.EndArray();
    w.EndObject();
    i = end;
  }
  w.EndArray();
}

}  // namespace grove::cli
