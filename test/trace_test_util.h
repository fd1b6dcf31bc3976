// Reading traces back in tests: a small strict JSON parser (RFC 8259: no
// trailing commas, no NaN, \u escapes with surrogate pairs) and the complete
// events of a Chrome trace event file.
#ifndef GROVE_TEST_TRACE_TEST_UTIL_H_
#define GROVE_TEST_TRACE_TEST_UTIL_H_

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace grove::testing {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  bool Has(const std::string& key) const { return kind == kObject && object.count(key) > 0; }
  const Json& operator[](const std::string& key) const {
    static const Json null;
    auto it = object.find(key);
    return it == object.end() ? null : it->second;
  }
};

class JsonParser {
 public:
  // The value `text` holds, or nullopt with *error set when it is not
  // exactly one valid JSON value.
  static std::optional<Json> Parse(const std::string& text, std::string* error) {
    JsonParser p(text);
    Json v;
    if (!p.Value(v, 0) || (p.Skip(), p.i_ != text.size())) {
      *error = p.error_.empty() ? "trailing characters at " + std::to_string(p.i_) : p.error_;
      return std::nullopt;
    }
    return v;
  }

 private:
  explicit JsonParser(const std::string& text) : s_(text) {}
  bool Fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at byte " + std::to_string(i_);
    return false;
  }
  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool Literal(const char* word) {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return Fail("bad literal");
    i_ += w.size();
    return true;
  }
  bool Hex4(uint32_t* out) {
    if (i_ + 4 > s_.size()) return Fail("short \\u escape");
    *out = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      *out <<= 4;
      if (c >= '0' && c <= '9') *out |= c - '0';
      else if (c >= 'a' && c <= 'f') *out |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') *out |= c - 'A' + 10;
      else return Fail("bad hex digit");
    }
    return true;
  }
  static void Utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  bool String(std::string& out) {
    if (s_[i_] != '"') return Fail("expected a string");
    ++i_;
    while (true) {
      if (i_ >= s_.size()) return Fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return Fail("raw control character in a string");
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        continue;
      }
      if (i_ >= s_.size()) return Fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00) {
            uint32_t low = 0;
            if (s_.compare(i_, 2, "\\u") != 0) return Fail("lone high surrogate");
            i_ += 2;
            if (!Hex4(&low) || low < 0xdc00 || low > 0xdfff) return Fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return Fail("lone low surrogate");
          }
          Utf8(cp, out);
          break;
        }
        default: return Fail("bad escape");
      }
    }
  }
  bool Number(Json& v) {
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return Fail("bad number");
    if (s_[i_] == '0' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
      return Fail("leading zero");
    }
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return Fail("bad fraction");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return Fail("bad exponent");
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    v.kind = Json::kNumber;
    v.number = std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
    return true;
  }
  bool Value(Json& v, int depth) {
    if (depth > 64) return Fail("too deep");
    Skip();
    if (i_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[i_];
    if (c == 'n') return Literal("null");
    if (c == 't') {
      v.kind = Json::kBool;
      v.boolean = true;
      return Literal("true");
    }
    if (c == 'f') {
      v.kind = Json::kBool;
      return Literal("false");
    }
    if (c == '"') {
      v.kind = Json::kString;
      return String(v.string);
    }
    if (c == '[') {
      v.kind = Json::kArray;
      ++i_;
      Skip();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      while (true) {
        v.array.emplace_back();
        if (!Value(v.array.back(), depth + 1)) return false;
        Skip();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return Fail("expected , or ]");
      }
    }
    if (c == '{') {
      v.kind = Json::kObject;
      ++i_;
      Skip();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      while (true) {
        Skip();
        std::string key;
        if (i_ >= s_.size() || !String(key)) return Fail("expected a key");
        Skip();
        if (i_ >= s_.size() || s_[i_] != ':') return Fail("expected :");
        ++i_;
        if (!Value(v.object[key], depth + 1)) return false;
        Skip();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return Fail("expected , or }");
      }
    }
    return Number(v);
  }

  const std::string& s_;
  size_t i_ = 0;
  std::string error_;
};

inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A trace's complete ("X") events, in file order; *error set (and empty
// result) when the text is not a trace.
struct TraceEventView {
  std::string cat, name;
  double ts = 0, dur = 0;
  int64_t tid = 0;
  Json args;
};
inline std::vector<TraceEventView> CompleteEvents(const std::string& text, std::string* error) {
  std::vector<TraceEventView> out;
  std::optional<Json> root = JsonParser::Parse(text, error);
  if (!root.has_value()) return out;
  if (!(*root)["traceEvents"].array.size() && (*root)["traceEvents"].kind != Json::kArray) {
    *error = "no traceEvents array";
    return out;
  }
  for (const Json& e : (*root)["traceEvents"].array) {
    if (e["ph"].string != "X") continue;
    if (e["ts"].kind != Json::kNumber || e["dur"].kind != Json::kNumber || e["name"].kind != Json::kString) {
      *error = "an X event without a numeric ts and dur or a name";
      return {};
    }
    out.push_back(TraceEventView{e["cat"].string, e["name"].string, e["ts"].number, e["dur"].number,
                                 static_cast<int64_t>(e["tid"].number), e["args"]});
  }
  return out;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_TRACE_TEST_UTIL_H_
