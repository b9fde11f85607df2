// Errors inside gyre are exceptions carrying a gyreResult_t and a sentence;
// the C ABI layer (core/api.cc) turns them into result codes and the
// thread's last error (core/last_error.h). Nothing else crosses the ABI.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "gyre/gyre.h"

namespace gyre {

class Error : public std::runtime_error {
 public:
  Error(gyreResult_t code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  gyreResult_t code() const { return code_; }

 private:
  gyreResult_t code_;
};

// A failure of a system call: the message gets strerror(err) appended.
[[noreturn]] void throwSystemError(const std::string& what, int err);
[[noreturn]] inline void throwError(gyreResult_t code, std::string message) {
  throw Error(code, std::move(message));
}

const char* resultString(gyreResult_t r);

}  // namespace gyre
