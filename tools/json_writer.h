// A small streaming JSON writer for the `grove` subcommands' --json output:
// commas and nesting are tracked, strings escaped so the output always
// parses (invalid UTF-8 from an untrusted model becomes U+FFFD) and cannot
// drive a terminal (what TerminalSafe escapes is \u-escaped here).
//
//   JsonWriter w;
//   w.BeginObject();
//   w.Key("runs"); w.BeginArray(); w.Int(3); w.EndArray();
//   w.Key("case"); w.Null();
//   w.EndObject();
//   std::string text = w.TakeText();  // {"runs":[3],"case":null}
#ifndef GROVE_TOOLS_JSON_WRITER_H_
#define GROVE_TOOLS_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace grove::cli {

class JsonWriter {
 public:
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // The next value's name; only inside an object.
  void Key(absl::string_view name);

  void String(absl::string_view s);
  void Int(int64_t v);
  void Uint(uint64_t v);
  // A finite number with up to 9 significant digits; NaN and infinities
  // (which JSON has no word for) are written as null.
  void Double(double v);
  void Bool(bool v);
  void Null();
  // [1,2,3]
  void IntArray(absl::Span<const int64_t> values);

  // The text so far; the writer is empty after.
  std::string TakeText();

 private:
  void BeforeValue();
  std::string out_;
  std::vector<bool> first_;  // per open object or array: no element written yet
  bool after_key_ = false;
};

// Appends `s` as a JSON string literal (see JsonWriter).
void AppendJsonString(std::string* out, absl::string_view s);

}  // namespace grove::cli

#endif  // GROVE_TOOLS_JSON_WRITER_H_
