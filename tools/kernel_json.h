// A CUDA step's kernel choices as JSON, with the cost model's ranking behind
// each (grove/kernel_ranking.h): `grove compile --json` and
// `grove inspect --device cuda --json` write them alike.
#ifndef GROVE_TOOLS_KERNEL_JSON_H_
#define GROVE_TOOLS_KERNEL_JSON_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "json_writer.h"

namespace grove::cli {

// The ranked variants listed per choice unless a flag says otherwise.
inline constexpr int kDefaultRankedShown = 5;

// --top-k K: 0 (all) to 1000; -1, or the exit code of a bad value.
int ParseTopK(const std::string& value, const char* command, int* out);

// One choice as an object: config, source, problem, bucket, estimate_us,
// measured_us, then "cost_model": {modeled, valid_variants, pick_rank, pick
// (the config's own terms), ranked (the top `top_k`, cheapest first; every
// one with top_k <= 0)}. Each variant's terms: config, occupancy, waste,
// bytes, flops, estimate_us. A choice the model cannot read gets
// "cost_model": {"error": ...}.
void WriteKernelChoice(JsonWriter& w, const KernelChoiceInfo& choice, absl::string_view arch, int top_k);

// Choices as steps, in order: adjacent choices of one step (same op and
// node) go together: [{"op", "node", "kernels": [...]}].
void WriteKernelSteps(JsonWriter& w, absl::Span<const KernelChoiceInfo> choices, absl::string_view arch, int top_k);

}  // namespace grove::cli

#endif  // GROVE_TOOLS_KERNEL_JSON_H_
