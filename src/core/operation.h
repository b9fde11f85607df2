// One call of the API, captured so that it can run now, at the end of a
// group, or in the background (nonblocking): everything it needs, with the
// caller's arrays (AllToAllv counts) copied.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/plan.h"
#include "collectives/planner.h"
#include "gyre/gyre.h"

namespace gyre::core {

// A nonblocking call's completion, shared by the caller's request handle
// and the communicator that runs it.
struct RequestState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  gyreResult_t result = gyreSuccess;
  std::string message;  // the failure's sentence, for the waiter's last error

  void complete(gyreResult_t r, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    result = r;
    message = why;
    cv.notify_all();
  }
};

struct Operation {
  collectives::OpKind kind = collectives::OpKind::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // as the API counts it for this operation
  gyreDataType_t dtype = gyreFloat32;
  int redop = gyreSum;  // a built-in op, or a PreMulSum op's number
  // A PreMulSum op's scalar, bound when the call is made, so that the op may
  // be destroyed (and its number reused) before a queued call runs.
  bool premul = false;
  const void* premulPointer = nullptr;  // gyreScalarDevice: read when the call runs
  unsigned char premulValue[8] = {};    // gyreScalarHostImmediate: the value
  int root = -1;        // collectives with a root
  int peer = -1;        // point to point
  bool isSend = false;  // point to point
  std::vector<size_t> vcounts;  // AllToAllv: sendcounts, sdispls, recvcounts, rdispls (n each)
  std::shared_ptr<RequestState> request;  // nonblocking calls only
};

}  // namespace gyre::core
