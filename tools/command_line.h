// What every `grove` subcommand shares: its entry point's signature, flag
// parsing, and the two ways of failing (exit 1 for a failed operation, exit 2
// for a command line that makes no sense).
//
//   ParsedArgs args;
//   if (int rc = ParseArgs(argv, {{"repeat", kValue}}, &args, kRunUsage); rc >= 0) return rc;
#ifndef GROVE_TOOLS_COMMAND_LINE_H_
#define GROVE_TOOLS_COMMAND_LINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "grove/npy.h"

namespace grove::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A subcommand: gets the arguments after its name.
using CommandMain = int (*)(absl::Span<const std::string> args);
int RunMain(absl::Span<const std::string> args);
int InspectMain(absl::Span<const std::string> args);
int ImportMain(absl::Span<const std::string> args);
int CompileMain(absl::Span<const std::string> args);
int BenchMain(absl::Span<const std::string> args);
int TuneMain(absl::Span<const std::string> args);

class JsonWriter;

enum FlagKind { kSwitch, kValue, kRepeatedValue };
struct FlagSpec {
  const char* name;  // without the leading "--"
  FlagKind kind;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> flags;  // a switch maps to {""}

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  // The flag's values; empty when it was not given.
  const std::vector<std::string>& Values(const std::string& name) const;
};

// Parses `--name value`, `--name=value` and switches; "--" ends the flags.
// Returns -1 to continue, or the exit code to return right away: 0 after
// printing `usage` for --help, 2 after a usage error.
int ParseArgs(absl::Span<const std::string> args, absl::Span<const FlagSpec> specs, ParsedArgs* out,
              absl::string_view usage);

// `text` (a name or message from an untrusted model, input or path) safe to
// print on a terminal: valid UTF-8 is kept, but control characters (C0, DEL,
// C1), invisible and bidirectional formatting characters and bytes that are
// not UTF-8 are escaped (\n, \x1b, \u{202e}), so a crafted name cannot
// move the cursor, recolour the terminal or hide text. Every name the CLI
// prints goes through here; Fail and UsageError apply it to the whole message.
std::string TerminalSafe(absl::string_view text);

// Prints "grove: error: <message>" and returns 1.
int Fail(absl::string_view message);
int Fail(const absl::Status& status);
// Prints "grove: error: <message>" and a pointer to the help, and returns 2.
int UsageError(absl::string_view message);

// "[3,16]"; "[]" for rank 0.
std::string ShapeString(absl::Span<const int64_t> dims);

// A declared input or output: "f32[batch,16]", symbolic dims by name.
std::string DeclaredType(const TensorInfo& info);

// Parses a dims list "3x16" ("" is rank 0) into `out`; false if malformed.
bool ParseDims(absl::string_view text, std::vector<int64_t>* out);

// Splits "NAME=VALUE" at the first '='; false if there is none or NAME is empty.
bool SplitAssignment(absl::string_view text, std::string* name, std::string* value);

// One shape per model input from repeated `--shape NAME=D0xD1...` flags, the
// declared shape for inputs not named (their symbolic dims as -1, listed in
// `unknown`). Returns -1, or the exit code of a bad flag.
int InputShapesFromFlags(const ParsedArgs& args, const Model& model, std::vector<std::vector<int64_t>>* shapes,
                         std::vector<std::string>* unknown);

// --sweep SYMBOL=LO:HI[:STEP]: one symbol's values (bench, tune).
inline constexpr int64_t kMaxSweepPoints = 10000;
struct Sweep {
  std::string symbol;
  std::vector<int64_t> values;
};
// "seq=8:64:8" -> seq, {8, 16, ..., 64}; -1 or the exit code of a bad value.
int ParseSweep(const std::string& spec, Sweep* out);
// The input shapes of each point: --shape and the declared dims, with the
// swept symbol's value put into every dim declared with it (one point
// without a sweep). A symbolic dim with no value, a sweep outside the
// symbol's range or of no symbol is an error. Returns -1, or the exit code.
int ShapePointsFromFlags(const ParsedArgs& args, const Model& model, const std::optional<Sweep>& sweep,
                         std::vector<std::vector<std::vector<int64_t>>>* out_points);

// "768 bytes", "2.6 KiB (2704 bytes)".
std::string HumanBytes(uint64_t bytes);

// --- What `run` and `bench` share -------------------------------------------

// SessionOptions from --device, --strict-device, --gemm-math, --graphs,
// --threads, --trace, --trace-runs, --log and --kernel-table (those given; --log prints the
// session's messages at that level or above to stderr); --device emulated-cuda sets *emulated_cuda (and kCuda).
// Returns -1, or the exit code of a bad value.
int SessionOptionsFromFlags(const ParsedArgs& args, SessionOptions* options, bool* emulated_cuda);

// Loads `model_path` and makes a session (on the emulated CUDA device when
// `emulated_cuda`); a CUDA session that could not be had is an error naming
// the reason. Returns -1, or the exit code after printing the error.
int LoadModelAndSession(const std::string& model_path, const SessionOptions& options, bool emulated_cuda,
                        std::shared_ptr<const Model>* out_model, std::unique_ptr<Session>* out_session);

// The file a model input or output NAME is read from or written to: only
// [A-Za-z0-9_.-] is kept (anything else becomes '_'), a leading '.' gets a
// '_' before it, long names are cut; then ".npy". It never leaves its
// directory whatever the model calls its values.
std::string NpyFileName(const std::string& name);

// Symbol name -> (value, the input that bound it), filled as input files are
// checked so two inputs that disagree on a symbol are refused.
using BoundSymbols = std::map<std::string, std::pair<int64_t, std::string>>;

// Reads a tensor input from `file`, checking its header against `info`
// (dtype, rank, fixed dims, symbol ranges and `bound`) before any data is
// read; an f32 file for a bf16 input is rounded. Errors name the input and
// the file.
absl::StatusOr<Tensor> ReadInputNpy(const std::string& file, const TensorInfo& info, const Model& model,
                                    BoundSymbols* bound);
// Checks a header as ReadInputNpy does (a sequence's items: the dtype).
absl::Status CheckInputHeader(const NpyHeader& h, const TensorInfo& info, const std::vector<SymbolInfo>& symbols,
                              BoundSymbols* bound);

// The inputs of a case directory: NpyFileName(NAME) for each model input,
// in model order. A missing file, a .npy file that is no model input, a
// sequence or optional input (not supported in a directory), an unreadable
// file or one of the wrong dtype or shape is an error naming the directory
// and the file.
absl::StatusOr<std::vector<Tensor>> ReadCaseDir(const std::string& dir, const Model& model);

// The counters of what happened between two reads of a session's stats
// (runs, plans, kernels, copies, syncs, graphs); the gauges (graphs_held,
// graph_nodes, graph_bytes) and graph_fallback_reason are `after`'s.
SessionStats StatsSince(const SessionStats& before, const SessionStats& after);

// The counters `run --json` and `bench --json` print, as keys of the object
// `w` is in: graphs_captured, graph_replays, graph_refreshes, launches_outside_graphs,
// copies {device_to_host_reads, bytes_host_to_device, bytes_device_to_host},
// syncs (device_synchronizations), plans_created, kernels_run, segments_run,
// cpu_fallback_steps.
void WriteCounters(const SessionStats& s, JsonWriter* w);

}  // namespace grove::cli

#endif  // GROVE_TOOLS_COMMAND_LINE_H_
