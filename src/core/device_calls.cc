// Device calls: classification on the caller's thread (bindStream), the
// enqueue on the stream (Communicator::enqueueOnStreams), and the proxy's
// side, on the communicator's worker thread (Communicator::runOnDevice).
//
// The mechanism (docs/gpu.md, "Streams"): a call on a stream records an
// event on it (the point its inputs are written) and enqueues a gate behind
// it (a wait on a word the host will write), then returns. The worker, in
// call order with the communicator's other calls, waits for the event,
// copies the device buffers to host staging, runs the call as a host call,
// copies the results back, and opens the gate: work enqueued after the call
// runs after it. A failure (a dead peer, an abort, the timeout, a stream
// that failed) opens the gate too, and breaks the communicator, which the
// next call and gyreCommGetAsyncError report: the stream never hangs on gyre.
#include "core/device_calls.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "core/communicator.h"
#include "device/backend.h"

namespace gyre::core {

namespace {

std::string deviceName(const device::MemoryInfo& m) {
  return std::string(device::kindName(m.kind)) + (m.device >= 0 ? " of GPU " + std::to_string(m.device) : "");
}

struct Buffer {
  const void* p;
  size_t bytes;
  const char* name;
};

}  // namespace

void bindStream(Operation& op, gyreStream_t stream) {
  device::Backend* b = device::backend();
  const Buffer buffers[] = {{op.sendbuff, op.sendBytes, "sendbuff"}, {op.recvbuff, op.recvBytes, "recvbuff"}};
  if (stream == GYRE_STREAM_LEGACY) {
    // NCCL's NULL: the legacy default stream for device memory, now for host
    // memory.
    bool onDevice = false;
    if (b)
      for (const Buffer& x : buffers)
        if (x.p && x.bytes) {
          const device::MemoryKind k = b->classify(x.p).kind;
          onDevice |= k == device::MemoryKind::Device || k == device::MemoryKind::Managed;
        }
    if (!onDevice) stream = nullptr;
  }
  if (!stream) {
    if (!b) return;  // no device here: every buffer is host memory
    for (const Buffer& x : buffers) {
      if (!x.p || !x.bytes) continue;
      const device::MemoryInfo m = b->classify(x.p);
      if (m.kind == device::MemoryKind::Device)
        throwError(gyreInvalidArgument, std::string(x.name) + " is " + deviceName(m) +
                                            ", but stream is NULL: a call on device memory is enqueued on the "
                                            "CUDA stream its work belongs to");
    }
    return;
  }
  if (!b) {
    std::string why;
    device::backend(&why);
    throwError(gyreInvalidArgument, "a stream was given, but there is no GPU to run on (" + why + ")");
  }
  const int sd = b->streamDevice(stream);
  for (const Buffer& x : buffers) {
    if (!x.p || !x.bytes) continue;
    const device::MemoryInfo m = b->classify(x.p);
    if (m.kind == device::MemoryKind::Host)
      throwError(gyreInvalidArgument, std::string(x.name) + " is pageable host memory, which the stream's GPU " +
                                          std::to_string(sd) +
                                          " cannot reach: use device or pinned host memory, or a NULL stream "
                                          "for a host call");
    if ((m.kind == device::MemoryKind::Device || m.kind == device::MemoryKind::Managed) && m.device != sd)
      throwError(gyreInvalidArgument, std::string(x.name) + " is " + deviceName(m) + ", but the stream is GPU " +
                                          std::to_string(sd) + "'s");
  }
  op.stream = stream;
}

// On the caller's thread: mark where each stream is, gate it, and queue the
// call (or the group) for the worker. Returns at once.
void Communicator::enqueueOnStreams(Operation op) {
  device::Backend& b = *device::backend();
  auto call = std::make_shared<DeviceCall>();
  auto addStream = [&](gyreStream_t s) {
    for (const DeviceCall::Point& p : call->points)
      if (p.stream == s) return;
    call->points.push_back({s, nullptr, nullptr});
  };
  if (op.members.empty()) {
    addStream(op.stream);
  } else {
    for (const Operation& m : op.members) addStream(m.stream);
  }
  try {
    for (DeviceCall::Point& p : call->points) {
      p.ready = b.recordEvent(p.stream);
      p.gate = b.makeGate();
      b.waitGate(p.stream, p.gate);
    }
  } catch (...) {
    releaseStreams(*call);
    throw;
  }
  op.device = std::move(call);
  std::lock_guard<std::mutex> lock(queueMu_);
  pushToWorker(std::move(op));
}

void Communicator::releaseStreams(DeviceCall& call) noexcept {
  device::Backend* b = device::backend();
  for (DeviceCall::Point& p : call.points) {
    if (p.gate) {
      b->openGate(p.gate);
      b->destroyGate(p.gate);
    }
    if (p.ready) b->destroyEvent(p.ready);
    p.gate = p.ready = nullptr;
  }
}

namespace {

// A call's device buffers in host memory for the run: one block per
// buffer, or one for both when they overlap (in place), keeping their
// offsets so in-place stays in place.
class Staging {
 public:
  Staging(device::Backend& b, Operation& op) : b_(b), op_(op) {
    const auto s = reinterpret_cast<uintptr_t>(op.sendbuff), r = reinterpret_cast<uintptr_t>(op.recvbuff);
    const size_t sb = op.sendbuff ? op.sendBytes : 0, rb = op.recvbuff ? op.recvBytes : 0;
    if (sb && rb && s < r + rb && r < s + sb) {
      const uintptr_t lo = std::min(s, r), hi = std::max(s + sb, r + rb);
      one_.assign(hi - lo, 0);
      b_.copy(one_.data(), reinterpret_cast<const void*>(lo), hi - lo);
      hostSend_ = one_.data() + (s - lo);
      hostRecv_ = one_.data() + (r - lo);
    } else {
      if (sb) {
        send_.resize(sb);
        b_.copy(send_.data(), op.sendbuff, sb);
        hostSend_ = send_.data();
      }
      if (rb) {
        // The receive buffer comes in too: some calls write only part of it
        // (AllToAllv's gaps), and the rest must stay as it was.
        recv_.resize(rb);
        b_.copy(recv_.data(), op.recvbuff, rb);
        hostRecv_ = recv_.data();
      }
    }
    deviceRecv_ = op.recvbuff;
    if (sb) op.sendbuff = hostSend_;
    if (rb) op.recvbuff = hostRecv_;
  }
  void copyOut() {
    if (deviceRecv_ && op_.recvBytes) b_.copy(deviceRecv_, hostRecv_, op_.recvBytes);
  }

 private:
  device::Backend& b_;
  Operation& op_;
  std::vector<unsigned char> one_, send_, recv_;
  unsigned char* hostSend_ = nullptr;
  unsigned char* hostRecv_ = nullptr;
  void* deviceRecv_ = nullptr;
};

}  // namespace

// On the worker: the proxy's side of one enqueued call (or group).
void Communicator::runOnDevice(Operation& op) {
  device::Backend& b = *device::backend();
  DeviceCall& call = *op.device;
  try {
    checkUsable();
    // Until every stream has reached the call; an abort or the timeout ends
    // the wait (the stream may be held up by work of the caller's).
    const int64_t start = nowNs();
    for (int spins = 0;; ++spins) {
      bool all = true;
      for (const DeviceCall::Point& p : call.points) all = all && b.eventDone(p.ready);
      if (all) break;
      if (abortRequested_.load())
        throw Error(gyreInvalidUsage, "rank " + std::to_string(rank_) + " was aborted with gyreCommAbort");
      if (config_.timeoutMs > 0 && nowNs() - start > config_.timeoutMs * int64_t{1'000'000})
        throw Error(gyreTimeout, "rank " + std::to_string(rank_) + ": the stream did not reach the enqueued call in " +
                                     std::to_string(config_.timeoutMs) + " ms (GYRE_TIMEOUT_MS)");
      if (spins < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    std::vector<Operation*> ops;
    if (op.members.empty()) {
      ops.push_back(&op);
    } else {
      for (Operation& m : op.members) ops.push_back(&m);
    }
    // A PreMulSum scalar in device memory is read now, once the stream has
    // written it.
    for (Operation* o : ops)
      if (o->premul && o->premulPointer && b.classify(o->premulPointer).kind != device::MemoryKind::Host) {
        b.copy(o->premulValue, o->premulPointer, kernels::dtypeSize(static_cast<kernels::DType>(o->dtype)));
        o->premulPointer = nullptr;
      }
    std::vector<std::unique_ptr<Staging>> staged;
    for (Operation* o : ops) staged.push_back(std::make_unique<Staging>(b, *o));
    if (op.members.empty()) {
      execute(op);
    } else {
      runGroupMembers(op.members);
    }
    for (auto& s : staged) s->copyOut();
  } catch (const Error& e) {
    // Recorded for gyreCommGetAsyncError and the next call (fail() is
    // idempotent: a call's own failure was recorded already).
    releaseStreams(call);
    fail(e);
    return;
  } catch (const std::exception& e) {
    releaseStreams(call);
    fail(Error(gyreInternalError, std::string("internal error: ") + e.what()));
    return;
  }
  releaseStreams(call);
}

}  // namespace gyre::core
