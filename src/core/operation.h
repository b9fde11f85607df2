// One call of the API, captured so that it can run now, at the end of a
// group, or in the background (nonblocking): everything it needs, with the
// caller's arrays (AllToAllv counts) copied.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/plan.h"
#include "collectives/planner.h"
#include "collectives/moe_route.h"
#include "collectives/seq_layout.h"
#include "device/staging_pool.h"
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

// A call enqueued on CUDA streams (docs/gpu.md): where each stream it runs
// on had got to when it was enqueued (an event the proxy waits for) and the
// gate that holds the stream after it until the call is done. Made by
// enqueue(), released by the communicator's worker.
class ProxyEngine;

struct DeviceCall {
  struct Point {
    gyreStream_t stream = nullptr;
    void* ready = nullptr;  // the stream's event: the inputs are written
    void* gate = nullptr;   // holds the stream until the call is done
  };
  std::vector<Point> points;  // one per stream the call (or its group) uses
  // The pinned blocks its device buffers are staged in, and the events
  // behind the copies out of them (one per stream): the blocks go back to
  // the pool once those are done, if the streams reached the call at all.
  std::vector<device::StagingPool::Block> staging;
  std::vector<void*> stagingDone;
  // A single call's input, copied in pieces (docs/gpu.md, "Pipelined
  // staging"): the stream's event after each piece but the first (the
  // first's is points[0].ready), and how many input bytes are staged by
  // then. The call starts after the first; its steps wait for the others.
  struct Piece {
    size_t bytesEnd;
    void* event;
  };
  std::vector<Piece> inputPieces;
  // Its output, copied out in pieces: the gate each piece's copy waits
  // behind (before the call's own gate, which then holds only what comes
  // after the call), opened as soon as no step writes the piece any more.
  struct OutPiece {
    size_t bytesEnd;
    void* gate;
    bool open;
  };
  std::vector<OutPiece> outputPieces;
  // A direct device call (docs/gpu.md, "Direct device calls"): nothing is
  // staged; the proxy runs the plan (single-copy, or with device messages)
  // on the device buffers of GPU `device` with `engine` (the
  // communicator's for that GPU, set by the worker).
  bool direct = false;
  int device = -1;
  ProxyEngine* engine = nullptr;
};

// A blocking host call's arguments as the API got them (before any rank's
// reading of them: a broadcast's sendbuff off the root is still the
// caller's pointer). The communicator keeps the last such call's plan and
// arguments, and a call with the same key runs on them past the checks
// that call passed (call_repeat.cc). Unset: never repeated.
struct CallKey {
  bool set = false;
  collectives::OpKind kind = collectives::OpKind::AllReduce;
  int dtype = 0;
  int redop = 0;
  int root = -1;
  size_t count = 0;
  const void* sendbuff = nullptr;
  const void* recvbuff = nullptr;
  bool operator==(const CallKey&) const = default;
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
  // A compressed call (docs/compression.md): its codec (kernels::Codec; 0:
  // none) and the compressor's error-feedback residuals (by
  // collectives::Residual; null: none kept).
  uint8_t codec = 0;
  float* residuals[3] = {nullptr, nullptr, nullptr};
  std::vector<size_t> vcounts;  // AllToAllv: sendcounts, sdispls, recvcounts, rdispls (n each)
  collectives::SeqLayout seq;   // the sequence exchanges (count: its code), tokens copied
  // A mixture-of-experts exchange (docs/moe.md; count: its shape code): the
  // routing, shared with the caller's handle (a dispatch whose counts were
  // not known yet writes them into it), the rows' elements, a dispatch's
  // per-slot input and the rows its output holds, a combine's weights.
  std::shared_ptr<collectives::MoeRoute> moe;
  size_t moeHidden = 0;
  size_t moeRows = 0;
  bool moePerSlot = false;
  bool moeCountsKnown = false;  // when the call was made: the counts travel ahead of the rows otherwise
  const float* moeWeights = nullptr;
  std::shared_ptr<RequestState> request;  // nonblocking calls only
  // The bytes the call reads from sendbuff and writes to recvbuff (their
  // extents: classification and device staging use them).
  size_t sendBytes = 0;
  size_t recvBytes = 0;
  gyreStream_t stream = nullptr;  // a call on a device stream
  // On a stream: which buffers are device (or managed) memory, staged
  // through host memory (classified once, by bindStream).
  bool stageSend = false, stageRecv = false;
  // ... and which of those are device memory (of the stream's GPU; not
  // managed): what a direct device call may hand to peers.
  bool sendOnDevice = false, recvOnDevice = false;
  std::shared_ptr<DeviceCall> device;  // set when enqueued on its stream(s)
  // Set by the proxy while it runs a call whose input arrives in pieces.
  collectives::InputArrival* inputArrival = nullptr;
  collectives::OutputDeparture* outputDeparture = nullptr;
  std::vector<Operation> members;  // a group enqueued on streams as one unit
  CallKey key;  // a blocking host call of the API's: what a repeat of it gives
};

}  // namespace gyre::core
