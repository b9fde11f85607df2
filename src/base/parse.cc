#include "base/parse.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "base/error.h"

namespace gyre {

uint64_t parseSize(const std::string& text, const std::string& what) {
  auto bad = [&] {
    throwError(gyreInvalidArgument,
               what + "=" + text + " is not a size (digits with an optional K, M or G)");
  };
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) bad();
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno) bad();
  unsigned shift = 0;
  if (*end) {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        bad();
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (*end) bad();
  }
  if (shift && v > (UINT64_MAX >> shift)) bad();
  return static_cast<uint64_t>(v) << shift;
}

int64_t parseInt(const std::string& text, const std::string& what, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno || *end || v < lo || v > hi)
    throwError(gyreInvalidArgument, what + "=" + text + " must be an integer from " +
                                        std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

}  // namespace gyre
