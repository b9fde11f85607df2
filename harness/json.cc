#include "harness/json.h"

#include <charconv>
#include <cstdio>
#include <limits>

namespace gyre::harness::json {
namespace {

// Deeper nesting than the index ever has is refused rather than recursed
// into, so a damaged file cannot exhaust the stack.
constexpr int kMaxDepth = 32;

class Parser {
 public:
  Parser(std::string_view text, int firstLine) : text_(text), line_(firstLine) {}

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
    } else if (c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I') {
      number(v);
    } else {
      fail(std::string("expected a value (an object, array, string or number), found '") + c + "'");
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

  // JSON's number grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, or
  // NaN, Infinity, -Infinity. Without a fraction or an exponent it is an
  // Integer, exact, and must fit int64_t.
  void number(Value& v) {
    for (const auto& [word, value] :
         {std::pair<std::string_view, double>{"NaN", std::numeric_limits<double>::quiet_NaN()},
          {"Infinity", std::numeric_limits<double>::infinity()},
          {"-Infinity", -std::numeric_limits<double>::infinity()}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        v.type = Value::Type::Number;
        v.number = value;
        return;
      }
    }
    const size_t start = pos_;
    auto digits = [&](const char* missing) {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      if (pos_ == from) fail(missing);
    };
    if (text_[pos_] == '-') ++pos_;
    const size_t first = pos_;
    digits("expected digits after '-'");
    if (pos_ - first > 1 && text_[first] == '0') fail("a number with a leading zero");
    bool integral = true;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      digits("expected digits after '.'");
      integral = false;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      digits("expected the exponent's digits");
      integral = false;
    }
    const char* begin = text_.data() + start;
    const char* end = text_.data() + pos_;
    // The double from the text itself, so that -0 keeps its sign and an
    // integer beyond int64 is still the number it says.
    if (std::from_chars(begin, end, v.number).ec != std::errc())
      fail("number out of range: " + std::string(begin, end));
    const bool exact = integral && std::from_chars(begin, end, v.integer).ec == std::errc();
    v.type = exact ? Value::Type::Integer : Value::Type::Number;
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
          utf8(out, codePoint());
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

  // After "\u": four hex digits, and for a code point beyond the Basic
  // Multilingual Plane a second "\uXXXX", the low half of a surrogate pair.
  unsigned codePoint() {
    unsigned code = hex4();
    if (code >= 0xdc00 && code <= 0xdfff) fail("a lone low surrogate in a \\u escape");
    if (code >= 0xd800 && code <= 0xdbff) {
      if (text_.substr(pos_, 2) != "\\u") fail("a high surrogate without its low half");
      pos_ += 2;
      const unsigned low = hex4();
      if (low < 0xdc00 || low > 0xdfff) fail("a high surrogate without its low half");
      code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
    }
    return code;
  }

  static void utf8(std::string& out, unsigned code) {
    auto byte = [&](unsigned b) { out += static_cast<char>(b); };
    if (code < 0x80) {
      byte(code);
    } else if (code < 0x800) {
      byte(0xc0 | (code >> 6));
      byte(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      byte(0xe0 | (code >> 12));
      byte(0x80 | ((code >> 6) & 0x3f));
      byte(0x80 | (code & 0x3f));
    } else {
      byte(0xf0 | (code >> 18));
      byte(0x80 | ((code >> 12) & 0x3f));
      byte(0x80 | ((code >> 6) & 0x3f));
      byte(0x80 | (code & 0x3f));
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_;
};

}  // namespace

Value::Value() = default;
Value::Value(const Value&) = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) = default;
Value& Value::operator=(Value&&) noexcept = default;
Value::~Value() = default;

const Value* Value::find(std::string_view key) const {
  for (const auto& [name, v] : members)
    if (name == key) return &v;
  return nullptr;
}

Value parse(std::string_view text, int firstLine) { return Parser(text, firstLine).document(); }

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
