#include "harness/json.h"

#include <cstdio>

namespace gyre::harness::json {
namespace {

// Deeper nesting than the index ever has is refused rather than recursed
// into, so a damaged file cannot exhaust the stack.
constexpr int kMaxDepth = 32;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skipSpace();
    if (pos_ != text_.size()) fail("unexpected text after the end of the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw ParseError(line_, what); }

  void skipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') ++line_;
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      ++pos_;
    }
  }

  char peek() {
    skipSpace();
    if (pos_ == text_.size()) fail("unexpected end of the document");
    return text_[pos_];
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    const char c = peek();
    Value v;
    v.line = line_;
    if (c == '{') {
      v.type = Value::Type::Object;
      object(v, depth);
    } else if (c == '[') {
      v.type = Value::Type::Array;
      array(v, depth);
    } else if (c == '"') {
      v.type = Value::Type::String;
      v.string = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = Value::Type::Integer;
      v.integer = integer();
    } else {
      fail(std::string("expected a value (an object, array, string or integer), found '") + c +
           "'");
    }
    return v;
  }

  void object(Value& v, int depth) {
    expect('{');
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      if (peek() != '"') fail("expected a member name in double quotes");
      std::string key = string();
      if (v.find(key) != nullptr) fail("duplicate member \"" + key + "\"");
      expect(':');
      v.members.emplace_back(std::move(key), value(depth + 1));
      if (peek() == '}') {
        ++pos_;
        return;
      }
      expect(',');
    }
  }

  void array(Value& v, int depth) {
    expect('[');
    if (peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      v.items.push_back(value(depth + 1));
      if (peek() == ']') {
        ++pos_;
        return;
      }
      expect(',');
    }
  }

  // A decimal integer that fits int64_t: no fraction, no exponent, no
  // leading zeros.
  int64_t integer() {
    const bool negative = text_[pos_] == '-';
    if (negative) ++pos_;
    const size_t start = pos_;
    uint64_t magnitude = 0;
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (magnitude > (limit - digit) / 10) fail("integer out of the range of int64");
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail("expected digits after '-'");
    if (pos_ - start > 1 && text_[start] == '0') fail("integer with a leading zero");
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
      fail("expected an integer, found a number with a fraction or an exponent");
    return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  }

  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (pos_ == text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ == text_.size()) fail("unterminated string");
      switch (const char e = text_[pos_++]) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          utf8(out, hex4());
          break;
        default:
          fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  unsigned hex4() {
    if (text_.size() - pos_ < 4) fail("truncated \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) fail("bad hex digit in a \\u escape");
      code = code * 16 + static_cast<unsigned>(d);
    }
    return code;
  }

  // The index's writer escapes only control characters, so a code point
  // outside the Basic Multilingual Plane (a surrogate pair) is not supported.
  void utf8(std::string& out, unsigned code) {
    if (code >= 0xd800 && code <= 0xdfff) fail("surrogate \\u escapes are not supported");
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

const Value* Value::find(std::string_view key) const {
  for (const auto& [name, v] : members)
    if (name == key) return &v;
  return nullptr;
}

Value parse(std::string_view text) { return Parser(text).document(); }

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace gyre::harness::json
