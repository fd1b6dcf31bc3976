// The --json writer of the `grove` subcommands.
#include "json_writer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "command_line.h"

namespace grove::cli {

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(out, absl::StrFormat("\\u%04x", c));
      ++i;
      continue;
    }
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    bool valid = len > 0 && c <= 0xf4 && i + len <= s.size();
    for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (valid && len >= 3) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
      if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) ||
          (c == 0xf4 && c1 >= 0x90)) {
        valid = false;
      }
    }
    if (!valid) {
      out->append("\\ufffd");
      ++i;
      continue;
    }
    if (TerminalSafe(s.substr(i, len)).size() != len) {
      // A C1 control or a formatting character: valid JSON either way, but
      // escaped so that printing the JSON cannot drive a terminal.
      char32_t cp = c & (0x7f >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      if (cp > 0xffff) {  // a surrogate pair
        cp -= 0x10000;
        absl::StrAppend(out, absl::StrFormat("\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (cp >> 10)),
                                             static_cast<unsigned>(0xdc00 + (cp & 0x3ff))));
      } else {
        absl::StrAppend(out, absl::StrFormat("\\u%04x", static_cast<unsigned>(cp)));
      }
    } else {
      out->append(s.data() + i, len);
    }
    i += len;
  }
  out->push_back('"');
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  first_.push_back(true);
}

void JsonWriter::EndObject() {
  out_.push_back('}');
  first_.pop_back();
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  first_.push_back(true);
}

void JsonWriter::EndArray() {
  out_.push_back(']');
  first_.pop_back();
}

void JsonWriter::Key(absl::string_view name) {
  BeforeValue();
  AppendJsonString(&out_, name);
  out_.push_back(':');
  after_key_ = true;
}

void JsonWriter::String(absl::string_view s) {
  BeforeValue();
  AppendJsonString(&out_, s);
}

void JsonWriter::Int(int64_t v) {
  BeforeValue();
  absl::StrAppend(&out_, v);
}

void JsonWriter::Uint(uint64_t v) {
  BeforeValue();
  absl::StrAppend(&out_, v);
}

void JsonWriter::Double(double v) {
  BeforeValue();
  if (std::isfinite(v)) {
    absl::StrAppend(&out_, absl::StrFormat("%.9g", v));
  } else {
    out_.append("null");
  }
}

void JsonWriter::Bool(bool v) {
  BeforeValue();
  out_.append(v ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
}

void JsonWriter::IntArray(absl::Span<const int64_t> values) {
  BeginArray();
  for (int64_t v : values) Int(v);
  EndArray();
}

std::string JsonWriter::TakeText() {
  std::string text = std::move(out_);
  out_.clear();
  first_.clear();
  after_key_ = false;
  return text;
}

}  // namespace grove::cli
