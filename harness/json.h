// A minimal, strict JSON reader and the string quoting its writers need: just
// enough for the checkpoint index (harness/checkpoint.h) and the training
// log (harness/train_log.h), which the harness writes and reads itself
// rather than depend on a JSON library. It accepts objects, arrays, strings
// and numbers: an integer is kept exactly (int64), any other number as a
// double, and NaN, Infinity and -Infinity are numbers too (the log's
// extension, which Python's json module reads and writes); true, false and
// null are refused, as are duplicate keys and anything after the top-level
// value. Every value remembers the line it starts on, so a caller can say
// where a field is wrong.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gyre::harness::json {

// A syntax error: what was expected and on which line (1-based).
class ParseError : public std::runtime_error {
 public:
  ParseError(int line, const std::string& what)
      : std::runtime_error("line " + std::to_string(line) + ": " + what),
        line_(line),
        what_(what) {}
  int line() const { return line_; }
  // The problem without its line, for a caller that names the line itself.
  const std::string& problem() const { return what_; }

 private:
  int line_;
  std::string what_;
};

struct Value {
  enum class Type { Integer, Number, String, Array, Object };
  Type type = Type::Integer;
  int line = 0;
  int64_t integer = 0;  // an Integer's value
  double number = 0;    // an Integer's or a Number's value
  std::string string;
  std::vector<Value> items;                            // an array's
  std::vector<std::pair<std::string, Value>> members;  // an object's, in file order

  // Out of line (json.cc): clang with libstdc++ cannot instantiate them here,
  // where pair<string, Value> is still incomplete.
  Value();
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;
  ~Value();

  // The member called `key`, or nullptr.
  const Value* find(std::string_view key) const;
};

// Parses a whole document whose first line is firstLine; throws ParseError.
Value parse(std::string_view text, int firstLine = 1);

// `s` as a JSON string literal, quotes included (control characters, '"' and
// '\' escaped; other bytes, UTF-8 included, as they are).
std::string quote(std::string_view s);

}  // namespace gyre::harness::json
