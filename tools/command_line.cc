// Flag parsing and error reporting shared by the `grove` subcommands.
#include "command_line.h"

#include <cstdio>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace grove::cli {

const std::vector<std::string>& ParsedArgs::Values(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = flags.find(name);
  return it == flags.end() ? kNone : it->second;
}

int ParseArgs(absl::Span<const std::string> args, absl::Span<const FlagSpec> specs, ParsedArgs* out,
              absl::string_view usage) {
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      out->positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(std::string(usage).c_str(), stdout);
      return kExitOk;
    }
    if (arg[1] != '-') return UsageError(absl::StrCat("unknown flag '", arg, "'"));
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (name == s.name) spec = &s;
    }
    if (spec == nullptr) return UsageError(absl::StrCat("unknown flag '--", name, "'"));
    if (spec->kind != kRepeatedValue && out->Has(name)) {
      return UsageError(absl::StrCat("--", name, " given more than once"));
    }
    std::string value;
    if (spec->kind == kSwitch) {
      if (eq != std::string::npos) return UsageError(absl::StrCat("--", name, " takes no value"));
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return UsageError(absl::StrCat("--", name, " needs a value"));
    }
    out->flags[name].push_back(std::move(value));
  }
  return -1;
}

namespace {

// The code point of the UTF-8 sequence at s[i] and its length; false when
// the bytes there are not valid UTF-8 (overlong, surrogate, past U+10FFFF,
// truncated).
bool DecodeUtf8At(absl::string_view s, size_t i, char32_t* out_cp, size_t* out_len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *out_cp = c;
    *out_len = 1;
    return true;
  }
  const size_t len = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (len == 0 || i + len > s.size()) return false;
  char32_t cp = c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return false;
    cp = (cp << 6) | (b & 0x3f);
  }
  const char32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
  *out_cp = cp;
  *out_len = len;
  return true;
}

// Characters a terminal acts on or that hide or reorder text.
bool NeedsEscape(char32_t cp) {
  return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) ||  // C0, DEL, C1 (0x9b is CSI)
         cp == 0xad ||                                             // soft hyphen
         (cp >= 0x200b && cp <= 0x200f) ||                         // zero-width, LRM, RLM
         (cp >= 0x2028 && cp <= 0x202e) ||                         // separators, bidi embeddings
         (cp >= 0x2060 && cp <= 0x206f) ||                         // word joiner, bidi isolates
         cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb);           // BOM, interlinear annotations
}

}  // namespace

std::string TerminalSafe(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    size_t len = 0;
    if (!DecodeUtf8At(text, i, &cp, &len)) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<unsigned char>(text[i])));
      ++i;
      continue;
    }
    if (!NeedsEscape(cp)) {
      out.append(text.data() + i, len);
    } else if (cp == '\n') {
      out.append("\\n");
    } else if (cp == '\t') {
      out.append("\\t");
    } else if (cp == '\r') {
      out.append("\\r");
    } else if (cp < 0x80) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<unsigned>(cp)));
    } else {
      absl::StrAppend(&out, absl::StrFormat("\\u{%04x}", static_cast<unsigned>(cp)));
    }
    i += len;
  }
  return out;
}

int Fail(absl::string_view message) {
  std::fprintf(stderr, "grove: error: %s\n", TerminalSafe(message).c_str());
  return kExitFailure;
}

int Fail(const absl::Status& status) { return Fail(status.message()); }

int UsageError(absl::string_view message) {
  std::fprintf(stderr, "grove: error: %s\nRun 'grove --help' for usage.\n", TerminalSafe(message).c_str());
  return kExitUsage;
}

std::string ShapeString(absl::Span<const int64_t> dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

std::string DeclaredType(const TensorInfo& info) {
  std::vector<std::string> dims;
  for (const DimInfo& d : info.shape) dims.push_back(d.is_symbolic() ? TerminalSafe(d.symbol) : absl::StrCat(d.value));
  const std::string tensor = absl::StrCat(DTypeName(info.dtype), "[", absl::StrJoin(dims, ","), "]");
  switch (info.kind) {
    case ValueKind::kTensor: return tensor;
    case ValueKind::kSequence: return absl::StrCat("seq(", tensor, ")");
    case ValueKind::kOptionalTensor: return absl::StrCat("optional(", tensor, ")");
    case ValueKind::kOptionalSequence: return absl::StrCat("optional(seq(", tensor, "))");
  }
  return tensor;
}

bool ParseDims(absl::string_view text, std::vector<int64_t>* out) {
  out->clear();
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t d = 0;
    if (part.empty() || part[0] == '-' || part[0] == '+' || !absl::SimpleAtoi(part, &d)) return false;
    out->push_back(d);
  }
  return true;
}

bool SplitAssignment(absl::string_view text, std::string* name, std::string* value) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) return false;
  *name = std::string(text.substr(0, eq));
  *value = std::string(text.substr(eq + 1));
  return true;
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, bytes == 1 ? " byte" : " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s (%d bytes)", v, units[u], bytes);
}

int InputShapesFromFlags(const ParsedArgs& args, const Model& model, std::vector<std::vector<int64_t>>* shapes,
                         std::vector<std::string>* unknown) {
  std::map<std::string, std::vector<int64_t>> given;
  for (const std::string& spec : args.Values("shape")) {
    std::string name, dims_text;
    std::vector<int64_t> dims;
    if (!SplitAssignment(spec, &name, &dims_text) || !ParseDims(dims_text, &dims)) {
      return UsageError(absl::StrCat("--shape wants NAME=D0xD1... (NAME= for a scalar), not '", spec, "'"));
    }
    if (!given.emplace(name, std::move(dims)).second) return UsageError(absl::StrCat("--shape ", name, " given twice"));
  }
  const std::vector<TensorInfo>& inputs = model.inputs();
  shapes->clear();
  for (const TensorInfo& info : inputs) {
    auto it = given.find(info.name);
    if (it != given.end()) {
      shapes->push_back(it->second);
      given.erase(it);
      continue;
    }
    std::vector<int64_t> dims;
    bool is_static = true;
    for (const DimInfo& d : info.shape) {
      dims.push_back(d.is_symbolic() ? -1 : d.value);
      is_static = is_static && !d.is_symbolic();
    }
    if (!is_static) unknown->push_back(absl::StrCat("'", info.name, "' ", DeclaredType(info)));
    shapes->push_back(std::move(dims));
  }
  if (!given.empty()) {
    std::vector<std::string> names;
    for (const TensorInfo& info : inputs) names.push_back(absl::StrCat("'", info.name, "'"));
    return Fail(absl::StrCat("--shape names '", given.begin()->first, "', which is not a model input (its inputs: ",
                             absl::StrJoin(names, ", "), ")"));
  }
  return -1;
}

}  // namespace grove::cli
