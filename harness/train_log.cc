#include "harness/train_log.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace gyre::harness {
namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

[[noreturn]] void failFile(const std::string& path, const std::string& what) {
  throw std::runtime_error("train log " + quoted(path) + ": " + what);
}

// ---- Writing ----

void appendString(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {  // \u00XX for a control character
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

// The shortest text that reads back to the same bits (std::to_chars).
void appendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "Infinity" : "-Infinity";
  } else {
    std::array<char, 32> buf;
    out.append(buf.data(), std::to_chars(buf.data(), buf.data() + buf.size(), v).ptr);
  }
}

// ---- Reading ----

// A value of the flat objects the log holds: a string, a number (with its
// text, so that an integer can be read exactly) or a one-level object.
struct Value {
  enum Kind { kString, kNumber, kObject } kind = kString;
  std::string text;  // the string, or the number's text
  double number = 0;
  bool integer = false;  // a number without fraction or exponent
  std::map<std::string, std::string> object;
};
using Fields = std::vector<std::pair<std::string, Value>>;

// A strict parser for one line: `{ "key": value, ... }` and nothing after
// it. Throws std::runtime_error with the problem and the column; the caller
// adds the file and the line.
class LineParser {
 public:
  explicit LineParser(std::string_view s) : s_(s) {}

  Fields parseLine() {
    skipSpace();
    Fields fields = object(0);
    skipSpace();
    if (i_ != s_.size()) fail("text after the object");
    return fields;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(what + " (column " + std::to_string(i_ + 1) + ")");
  }
  void skipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void expect(char c, const char* where) {
    if (!at(c)) fail(std::string("expected '") + c + "' " + where);
    ++i_;
  }

  Fields object(int depth) {
    expect('{', "to open an object");
    Fields fields;
    skipSpace();
    if (at('}')) {
      ++i_;
      return fields;
    }
    for (;;) {
      skipSpace();
      if (!at('"')) fail("expected a quoted key");
      std::string key = string();
      for (const auto& [k, v] : fields)
        if (k == key) fail("duplicate key '" + key + "'");
      skipSpace();
      expect(':', "after a key");
      skipSpace();
      fields.emplace_back(std::move(key), value(depth));
      skipSpace();
      if (at('}')) {
        ++i_;
        return fields;
      }
      expect(',', "or '}' after a value");
    }
  }

  Value value(int depth) {
    Value v;
    if (at('"')) {
      v.text = string();
    } else if (at('{')) {
      if (depth > 0) fail("an object nested in an object");
      v.kind = Value::kObject;
      for (auto& [key, inner] : object(depth + 1)) v.object[key] = std::move(inner.text);
    } else {
      v.kind = Value::kNumber;
      number(v);
    }
    return v;
  }

  std::string string() {
    expect('"', "to open a string");
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      // JSON's escapes: the character after the backslash, and what it stands for.
      static constexpr std::string_view kEscaped = "\"\\/bfnrt", kMeant = "\"\\/\b\f\n\r\t";
      const char e = s_[i_++];
      if (e == 'u') {
        appendUtf8(out, codePoint());
      } else if (const size_t k = kEscaped.find(e); k != std::string_view::npos) {
        out += kMeant[k];
      } else {
        fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  // After "\u": four hex digits, and a second "\uXXXX" for a surrogate pair.
  uint32_t codePoint() {
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (s_.substr(i_, 2) != "\\u") fail("a high surrogate without its low half");
      i_ += 2;
      const uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate without its low half");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    return cp;
  }
  uint32_t hex4() {
    uint32_t v = 0;
    const auto r = std::from_chars(s_.data() + i_, s_.data() + std::min(i_ + 4, s_.size()), v, 16);
    if (r.ptr != s_.data() + i_ + 4) fail("expected four hex digits after '\\u'");
    i_ += 4;
    return v;
  }
  static void appendUtf8(std::string& out, uint32_t cp) {
    auto byte = [&](uint32_t b) { out += static_cast<char>(b); };
    if (cp < 0x80) {
      byte(cp);
    } else if (cp < 0x800) {
      byte(0xC0 | cp >> 6), byte(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      byte(0xE0 | cp >> 12), byte(0x80 | (cp >> 6 & 0x3F)), byte(0x80 | (cp & 0x3F));
    } else {
      byte(0xF0 | cp >> 18), byte(0x80 | (cp >> 12 & 0x3F));
      byte(0x80 | (cp >> 6 & 0x3F)), byte(0x80 | (cp & 0x3F));
    }
  }

  // JSON's number grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
  // or one of NaN, Infinity, -Infinity.
  void number(Value& v) {
    const size_t start = i_;
    for (const auto& [word, value] :
         {std::pair<std::string_view, double>{"NaN", std::numeric_limits<double>::quiet_NaN()},
          {"Infinity", std::numeric_limits<double>::infinity()},
          {"-Infinity", -std::numeric_limits<double>::infinity()}}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        v.text = word, v.number = value;
        return;
      }
    }
    auto digits = [&](const char* missing) {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == from) fail(missing);
    };
    if (at('-')) ++i_;
    if (at('0')) {
      ++i_;
    } else {
      digits("expected a value");
    }
    v.integer = true;
    if (at('.')) {
      ++i_;
      digits("expected digits after '.'");
      v.integer = false;
    }
    if (at('e') || at('E')) {
      ++i_;
      if (at('+') || at('-')) ++i_;
      digits("expected the exponent's digits");
      v.integer = false;
    }
    v.text = std::string(s_.substr(start, i_ - start));
    const auto r = std::from_chars(v.text.data(), v.text.data() + v.text.size(), v.number);
    if (r.ec != std::errc()) fail("number out of range: " + v.text);
  }

  std::string_view s_;
  size_t i_ = 0;
};

[[noreturn]] void failField(const std::string& key, const std::string& what) {
  throw std::runtime_error("field '" + key + "' " + what);
}

StepRecord stepOf(const Fields& fields) {
  StepRecord r;
  const std::array<std::pair<const char*, double*>, 7> doubles = {{
      {"loss", &r.loss},
      {"lr", &r.lr},
      {"tokens_per_s", &r.tokensPerSecond},
      {"step_s", &r.stepSeconds},
      {"comm_s", &r.commSeconds},
      {"bubble_s", &r.bubbleSeconds},
      {"grad_norm", &r.gradNorm},
  }};
  for (const auto& [key, v] : fields) {
    if (v.kind != Value::kNumber) failField(key, "is not a number");
    if (key == "step") {
      const auto res = std::from_chars(v.text.data(), v.text.data() + v.text.size(), r.step);
      if (!v.integer || res.ec != std::errc()) failField(key, "is not a 64-bit integer");
      continue;
    }
    bool known = false;
    for (const auto& [name, target] : doubles) {
      if (key == name) {
        *target = v.number;
        known = true;
      }
    }
    if (!known) failField(key, "is not a step record's");
  }
  if (fields.size() != doubles.size() + 1)
    throw std::runtime_error(
        "a step line needs the 8 fields step, loss, lr, tokens_per_s, "
        "step_s, comm_s, bubble_s and grad_norm; it has " +
        std::to_string(fields.size()));
  return r;
}

}  // namespace

TrainLog::TrainLog(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "w")) {
  if (!file_) failFile(path_, std::string("cannot open for writing: ") + std::strerror(errno));
}

TrainLog::TrainLog(const std::string& path, const std::string& runName,
                   const std::map<std::string, std::string>& config)
    : TrainLog(path) {
  std::string line = "{\"run\":";
  appendString(line, runName);
  line += ",\"config\":{";
  for (const auto& [key, value] : config) {
    if (line.back() != '{') line += ',';
    appendString(line, key);
    line += ':';
    appendString(line, value);
  }
  writeLine(line + "}}");
}

void TrainLog::write(const StepRecord& r) {
  std::string line = "{\"step\":" + std::to_string(r.step);
  for (const auto& [key, v] : {std::pair<const char*, double>{"loss", r.loss},
                               {"lr", r.lr},
                               {"tokens_per_s", r.tokensPerSecond},
                               {"step_s", r.stepSeconds},
                               {"comm_s", r.commSeconds},
                               {"bubble_s", r.bubbleSeconds},
                               {"grad_norm", r.gradNorm}}) {
    line += ",\"";
    line += key;
    line += "\":";
    appendNumber(line, v);
  }
  writeLine(line + "}");
}

void TrainLog::writeLine(const std::string& line) {
  if (std::fputs((line + "\n").c_str(), file_.get()) == EOF || std::fflush(file_.get()) != 0)
    failFile(path_, std::string("cannot write: ") + std::strerror(errno));
}

std::vector<StepRecord> readTrainLog(const std::string& path, std::string* runName,
                                     std::map<std::string, std::string>* config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) failFile(path, std::string("cannot open: ") + std::strerror(errno));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) failFile(path, "cannot read");
  if (runName) runName->clear();
  if (config) config->clear();

  std::vector<StepRecord> steps;
  size_t begin = 0;
  for (int lineNo = 1; begin < text.size(); ++lineNo) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();  // a last line without its newline
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    try {
      if (line.find_first_not_of(" \t\r") == std::string_view::npos)
        throw std::runtime_error("empty line");
      const Fields fields = LineParser(line).parseLine();
      bool runLine = false;
      for (const auto& field : fields) runLine |= field.first == "run" || field.first == "config";
      if (!runLine) {
        steps.push_back(stepOf(fields));
        continue;
      }
      if (lineNo != 1) throw std::runtime_error("a run line after the first line");
      bool named = false;
      for (const auto& [key, v] : fields) {
        if (key == "run" && v.kind == Value::kString) {
          named = true;
          if (runName) *runName = v.text;
        } else if (key == "config" && v.kind == Value::kObject) {
          if (config) *config = v.object;
        } else {
          failField(key, "is not a run line's (a string 'run' and an object 'config')");
        }
      }
      if (!named) throw std::runtime_error("a run line without its 'run' name");
    } catch (const std::runtime_error& e) {
      failFile(path, "line " + std::to_string(lineNo) + ": " + e.what());
    }
  }
  return steps;
}

}  // namespace gyre::harness
