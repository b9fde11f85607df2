#include "base/error.h"

#include <cstring>

namespace gyre {

void throwSystemError(const std::string& what, int err) {
  throw Error(gyreSystemError, what + ": " + std::strerror(err));
}

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
