#include "bench/gyre_bench/json.h"

#include <cstdio>
#include <cstdlib>

namespace gyre::bench::json {

const Value& Value::operator[](const std::string& key) const {
  static const Value null;
  for (size_t i = 0; kind == Object && i < keys.size(); ++i)
    if (keys[i] == key) return members[i];
  return null;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}

  bool document(Value& v, std::string& error) {
    bool ok = value(v, 0);
    skipSpace();
    if (ok && at_ != t_.size()) ok = fail("text after the document");
    if (!ok) error = error_;
    return ok;
  }

 private:
  bool fail(const std::string& why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(at_);
    return false;
  }
  void skipSpace() {
    while (at_ < t_.size() && (t_[at_] == ' ' || t_[at_] == '\n' || t_[at_] == '\r' || t_[at_] == '\t')) ++at_;
  }
  bool literal(const char* word) {
    const std::string w = word;
    if (t_.compare(at_, w.size(), w) != 0) return fail("unexpected text");
    at_ += w.size();
    return true;
  }

  bool value(Value& v, int depth) {
    if (depth > 64) return fail("nesting too deep");
    skipSpace();
    if (at_ >= t_.size()) return fail("unexpected end");
    const char c = t_[at_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') return v.kind = Value::String, string(v.string);
    if (c == 't') return v.kind = Value::Bool, v.boolean = true, literal("true");
    if (c == 'f') return v.kind = Value::Bool, v.boolean = false, literal("false");
    if (c == 'n') return v.kind = Value::Null, literal("null");
    return number(v);
  }

  bool number(Value& v) {
    const char* begin = t_.c_str() + at_;
    char* end;
    v.number = std::strtod(begin, &end);
    if (end == begin) return fail("expected a value");
    v.kind = Value::Number;
    at_ += static_cast<size_t>(end - begin);
    return true;
  }

  bool string(std::string& s) {
    ++at_;  // the opening quote
    while (at_ < t_.size() && t_[at_] != '"') {
      char c = t_[at_++];
      if (c != '\\') {
        s += c;
        continue;
      }
      if (at_ >= t_.size()) break;
      c = t_[at_++];
      switch (c) {
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'u': {
          if (at_ + 4 > t_.size()) return fail("short \\u escape");
          const unsigned code = static_cast<unsigned>(std::strtoul(t_.substr(at_, 4).c_str(), nullptr, 16));
          at_ += 4;
          // UTF-8 for the basic plane; surrogate pairs are not needed here.
          if (code < 0x80) s += static_cast<char>(code);
          else if (code < 0x800) s += static_cast<char>(0xc0 | (code >> 6)), s += static_cast<char>(0x80 | (code & 0x3f));
          else
            s += static_cast<char>(0xe0 | (code >> 12)), s += static_cast<char>(0x80 | ((code >> 6) & 0x3f)),
                s += static_cast<char>(0x80 | (code & 0x3f));
          break;
        }
        default: s += c; break;  // \" \\ \/
      }
    }
    if (at_ >= t_.size()) return fail("unterminated string");
    ++at_;
    return true;
  }

  bool array(Value& v, int depth) {
    v.kind = Value::Array;
    ++at_;
    skipSpace();
    if (at_ < t_.size() && t_[at_] == ']') return ++at_, true;
    for (;;) {
      v.array.emplace_back();
      if (!value(v.array.back(), depth + 1)) return false;
      skipSpace();
      if (at_ < t_.size() && t_[at_] == ',') { ++at_; continue; }
      if (at_ < t_.size() && t_[at_] == ']') return ++at_, true;
      return fail("expected , or ]");
    }
  }

  bool object(Value& v, int depth) {
    v.kind = Value::Object;
    ++at_;
    skipSpace();
    if (at_ < t_.size() && t_[at_] == '}') return ++at_, true;
    for (;;) {
      skipSpace();
      if (at_ >= t_.size() || t_[at_] != '"') return fail("expected a member name");
      v.keys.emplace_back();
      if (!string(v.keys.back())) return false;
      skipSpace();
      if (at_ >= t_.size() || t_[at_] != ':') return fail("expected :");
      ++at_;
      v.members.emplace_back();
      if (!value(v.members.back(), depth + 1)) return false;
      skipSpace();
      if (at_ < t_.size() && t_[at_] == ',') { ++at_; continue; }
      if (at_ < t_.size() && t_[at_] == '}') return ++at_, true;
      return fail("expected , or }");
    }
  }

  const std::string& t_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace

bool parse(const std::string& text, Value& out, std::string& error) {
  out = Value();
  return Parser(text).document(out, error);
}

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') q += '\\', q += static_cast<char>(c);
    else if (c == '\n') q += "\\n";
    else if (c == '\t') q += "\\t";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      q += buf;
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "\"";
}

}  // namespace gyre::bench::json
