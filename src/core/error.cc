#include "core/error.h"

#include <cstdio>
#include <cstring>

namespace gyre {

namespace {
thread_local std::string tlsLastError;
// When memory has run out, the sentence may not fit in a std::string: then
// it goes here, cut to size, rather than throwing out of an error path.
thread_local char tlsFallback[512];
thread_local bool tlsUseFallback = false;
}

void throwSystemError(const std::string& what, int err) {
  throw Error(gyreSystemError, what + ": " + std::strerror(err));
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

const char* resultString(gyreResult_t r) {
  switch (r) {
    case gyreSuccess:
      return "no error";
    case gyreUnhandledCudaError:
      return "unhandled CUDA error";
    case gyreSystemError:
      return "system error";
    case gyreInternalError:
      return "internal error";
    case gyreInvalidArgument:
      return "invalid argument";
    case gyreInvalidUsage:
      return "invalid usage";
    case gyreRemoteError:
      return "remote process exited or there was a network error";
    case gyreInProgress:
      return "operation in progress";
    case gyreTimeout:
      return "timed out";
    default:
      return "unknown result code";
  }
}

}  // namespace gyre
