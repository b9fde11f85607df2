#include "core/last_error.h"

#include <cstdio>

namespace gyre {

namespace {
thread_local std::string tlsLastError;
// When memory has run out, the sentence may not fit in a std::string: then
// it goes here, cut to size, rather than throwing out of an error path.
thread_local char tlsFallback[512];
thread_local bool tlsUseFallback = false;
}

void setLastError(const std::string& message) noexcept {
  try {
    tlsLastError = message;
    tlsUseFallback = false;
  } catch (...) {
    std::snprintf(tlsFallback, sizeof(tlsFallback), "%s", message.c_str());
    tlsUseFallback = true;
  }
}

void setLastError(const char* function, const char* what) noexcept {
  try {
    tlsLastError.assign(function).append(": ").append(what);
    tlsUseFallback = false;
  } catch (...) {
    std::snprintf(tlsFallback, sizeof(tlsFallback), "%s: %s", function, what);
    tlsUseFallback = true;
  }
}

const char* lastError() { return tlsUseFallback ? tlsFallback : tlsLastError.c_str(); }

}  // namespace gyre
