// A small JSON reader and the string quoting gyre-bench's writer needs: just
// enough to read back the result files gyre-bench (or a peer's driver)
// wrote, for `gyre-bench plot` and the tests. No library is assumed present.
#pragma once

#include <string>
#include <vector>

namespace gyre::bench::json {

struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  // An object's members in file order (two vectors: the standard allows a
  // vector, not a map, of a still-incomplete type).
  std::vector<std::string> keys;
  std::vector<Value> members;

  bool isNull() const { return kind == Null; }
  // Member `key` of an object, or a shared null value when absent.
  const Value& operator[](const std::string& key) const;
  double num(double otherwise = 0) const { return kind == Number ? number : otherwise; }
  std::string str(const std::string& otherwise = "") const { return kind == String ? string : otherwise; }
};

// Parses a whole document; on malformed text returns false and says where in `error`.
bool parse(const std::string& text, Value& out, std::string& error);

// "s" with JSON escapes.
std::string quote(const std::string& s);

}  // namespace gyre::bench::json
