#include "core/error.h"

#include <cstring>

namespace gyre {

namespace {
thread_local std::string tlsLastError;
}

void throwSystemError(const std::string& what, int err) {
  throw Error(gyreSystemError, what + ": " + std::strerror(err));
}

void setLastError(const std::string& message) { tlsLastError = message; }
const char* lastError() { return tlsLastError.c_str(); }

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
