// What a gyre::Error thrown by f says; empty when f throws none.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"

namespace gyre::test {

inline std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace gyre::test
