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
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"

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

// "768 bytes", "2.6 KiB (2704 bytes)".
std::string HumanBytes(uint64_t bytes);

}  // namespace grove::cli

#endif  // GROVE_TOOLS_COMMAND_LINE_H_
