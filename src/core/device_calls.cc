// Device calls: classification on the caller's thread (bindStream), the
// enqueue on the stream (Communicator::enqueueOnStreams), and the proxy's
// side, on the communicator's worker thread (Communicator::runOnDevice).
//
// The mechanism (docs/gpu.md, "Streams"): a call on a stream enqueues on it
// copies of its device inputs into pinned host staging, records an event
// (the inputs are staged), a gate (a wait on a word the host will write),
// and the copies of the results back; then it returns. The worker, in call
// order with the communicator's other calls, waits for the event, runs the
// call as a host call on the staging memory, and opens the gate: the stream
// copies the results back, and work enqueued after the call runs after it.
// The copies are the stream's own, so they overlap the worker's calls and
// the caller's kernels. A failure (a dead peer, an abort, the timeout, a stream
// that failed) opens the gate too, and breaks the communicator, which the
// next call and gyreCommGetAsyncError report: the stream never hangs on gyre.
#include "core/device_calls.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <tuple>

#include "base/clock.h"
#include "base/error.h"
#include "base/function_ref.h"
#include "base/log.h"
#include "core/communicator.h"
#include "core/device_engine.h"
#include "device/backend.h"
#include "transport/connection_manager.h"

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
  // No device here: every buffer is host memory, and NULL and the legacy
  // stream both mean a host call (first: the common case's only test).
  if (!b && (!stream || stream == GYRE_STREAM_LEGACY)) return;
  const Buffer buffers[] = {{op.sendbuff, op.sendBytes, "sendbuff"}, {op.recvbuff, op.recvBytes, "recvbuff"}};
  if (stream == GYRE_STREAM_LEGACY) {
    // NCCL's NULL: the legacy default stream for device memory, now for host
    // memory.
    bool onDevice = false;
    for (const Buffer& x : buffers)  // (b is there: returned above otherwise)
      if (x.p && x.bytes) {
        const device::MemoryKind k = b->classify(x.p).kind;
        onDevice |= k == device::MemoryKind::Device || k == device::MemoryKind::Managed;
      }
    if (!onDevice) stream = nullptr;
  }
  if (!stream) {  // (b is there: returned above otherwise)
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
    // The host reads pinned host memory where it is; device and managed
    // memory come through staging.
    const bool staged = m.kind == device::MemoryKind::Device || m.kind == device::MemoryKind::Managed;
    (&x == &buffers[0] ? op.stageSend : op.stageRecv) = staged;
    (&x == &buffers[0] ? op.sendOnDevice : op.recvOnDevice) = m.kind == device::MemoryKind::Device;
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

namespace {

// Every operation a (possibly grouped) call runs.
std::vector<Operation*> operationsOf(Operation& op) {
  std::vector<Operation*> ops;
  if (op.members.empty()) {
    ops.push_back(&op);
  } else {
    for (Operation& m : op.members) ops.push_back(&m);
  }
  return ops;
}

// A copy from staging back to a device buffer, enqueued once the stream is
// past the call's gate.
struct CopyOut {
  void* dst;
  const void* src;
  size_t bytes;
  gyreStream_t stream;
  bool inPieces;  // a single call's output: each piece behind a gate of its own
};

constexpr size_t kStagingAlign = 256;
size_t alignUp(size_t n) { return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

// A single call's input is copied in in pieces (at most kMaxInputPieces,
// each at least GYRE_DEVICE_PIECE_BYTES) with an event after each, so that the
// call starts on the first piece while the stream copies the rest; its
// output goes out in pieces of the same size, each behind a gate opened
// once no step writes it. Smaller buffers go whole: a piece's event, gate
// and wait cost more than they save.
constexpr size_t kMaxInputPieces = 16;
bool inPieces(size_t bytes, size_t minPiece) { return minPiece && bytes >= 2 * minPiece; }
// Calls f(offset, length) for each piece of a buffer of `bytes` that goes in
// pieces (inPieces).
template <class F>
void forEachPiece(size_t bytes, size_t minPiece, F&& f) {
  const size_t piece = std::max(minPiece, alignUp((bytes + kMaxInputPieces - 1) / kMaxInputPieces));
  for (size_t off = 0; off < bytes; off += piece) f(off, std::min(piece, bytes - off));
}

// Puts o's device buffers in a staging block: copies in on o's stream
// (before the call's event, so the event means "the inputs are staged"),
// notes the copies out, and points o at the block. In place stays in place
// (one region for both buffers, with their offsets kept). pieces (may be
// null): where o's input may come in pieces, their events; minPiece: the
// smallest piece (0: whole).
void stageOperation(device::Backend& b, device::StagingPool& pool, Operation& o, FunctionRef<void()> whileWaiting,
                    std::vector<device::StagingPool::Block>& blocks, std::vector<CopyOut>& outs,
                    std::vector<DeviceCall::Piece>* pieces, size_t minPiece) {
  const bool sendIn = o.stageSend, recvIn = o.stageRecv;
  if (!sendIn && !recvIn) return;
  // AllToAllv writes only its blocks of the receive buffer: the gaps must
  // come back as they were, so that buffer comes in too.
  const bool writesAllOfRecv = o.kind != collectives::OpKind::AllToAllv;
  const auto s = reinterpret_cast<uintptr_t>(o.sendbuff), r = reinterpret_cast<uintptr_t>(o.recvbuff);
  const size_t sb = o.sendBytes, rb = o.recvBytes;
  unsigned char* hostSend = nullptr;
  unsigned char* hostRecv = nullptr;
  const bool overlap = sendIn && recvIn && s < r + rb && r < s + sb;
  if (overlap) {
    const uintptr_t lo = std::min(s, r), hi = std::max(s + sb, r + rb);
    blocks.push_back(pool.acquire(hi - lo, whileWaiting, blocks.empty()));
    unsigned char* base = blocks.back().p;
    hostSend = base + (s - lo);
    hostRecv = base + (r - lo);
    if (writesAllOfRecv) {
      b.copyOnStream(hostSend, o.sendbuff, sb, o.stream);
    } else {
      b.copyOnStream(base, reinterpret_cast<const void*>(lo), hi - lo, o.stream);
    }
  } else {
    blocks.push_back(pool.acquire((sendIn ? alignUp(sb) : 0) + (recvIn ? rb : 0), whileWaiting, blocks.empty()));
    unsigned char* base = blocks.back().p;
    if (recvIn) {
      hostRecv = base + (sendIn ? alignUp(sb) : 0);
      if (!writesAllOfRecv) b.copyOnStream(hostRecv, o.recvbuff, rb, o.stream);
    }
    if (sendIn) {
      hostSend = base;
      if (pieces && inPieces(sb, minPiece)) {
        const auto* from = static_cast<const unsigned char*>(o.sendbuff);
        forEachPiece(sb, minPiece, [&](size_t off, size_t len) {
          b.copyOnStream(hostSend + off, from + off, len, o.stream);
          pieces->push_back({off + len, nullptr});
          pieces->back().event = b.recordEvent(o.stream);
        });
      } else {
        b.copyOnStream(hostSend, o.sendbuff, sb, o.stream);
      }
    }
  }
  const bool outInPieces = pieces && writesAllOfRecv && !overlap && inPieces(rb, minPiece);
  if (recvIn) outs.push_back({o.recvbuff, hostRecv, rb, o.stream, outInPieces});
  if (sendIn) o.sendbuff = hostSend;
  if (recvIn) o.recvbuff = hostRecv;
}

// The proxy's view of a call's output leaving in pieces: a piece's gate
// opens once no step writes it.
class StagedOutput final : public collectives::OutputDeparture {
 public:
  StagedOutput(device::Backend& b, std::vector<DeviceCall::OutPiece>& pieces) : b_(b), pieces_(pieces) {
    for (const DeviceCall::OutPiece& p : pieces) ends_.push_back(p.bytesEnd);
  }
  const std::vector<size_t>& pieceEnds() const override { return ends_; }
  void pieceFinal(size_t k) override {
    DeviceCall::OutPiece& p = pieces_[k];
    if (p.open) return;
    // The output may have been written with non-temporal stores: they must
    // be visible before the copy (another agent: a DMA engine, or the
    // emulated stream's thread) reads them.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    b_.openGate(p.gate);
    p.open = true;
  }

 private:
  device::Backend& b_;
  std::vector<DeviceCall::OutPiece>& pieces_;
  std::vector<size_t> ends_;
};

// The proxy's view of a call's input arriving in pieces: a step waits for
// the pieces it reads.
class StagedInput final : public collectives::InputArrival {
 public:
  // check(start): throws to end a wait begun at start (an abort, the timeout).
  StagedInput(device::Backend& b, const std::vector<DeviceCall::Piece>& pieces, FunctionRef<void(int64_t)> check)
      : b_(b), pieces_(pieces), check_(check) {}

  size_t waitFor(size_t bytes) override {
    while (next_ < pieces_.size() && ready_ < bytes) {
      const DeviceCall::Piece& p = pieces_[next_];
      if (p.event) {  // (the first piece's the proxy waited for)
        const int64_t start = nowNs();
        awaitEvent(b_, p.event, [&] { check_(start); });
      }
      ready_ = p.bytesEnd;
      ++next_;
    }
    return next_ == pieces_.size() ? ~size_t{0} : ready_;
  }

 private:
  device::Backend& b_;
  const std::vector<DeviceCall::Piece>& pieces_;
  FunctionRef<void(int64_t)> check_;
  size_t next_ = 0, ready_ = 0;
};

// At most this much pinned staging per communicator while calls are in
// flight (a single larger call still gets its own); past it, the caller's
// next call waits for its streams to catch up.
constexpr size_t kStagingLimit = size_t{256} << 20;

}  // namespace

// A wait on streams (begun at startNs) ends with an abort or the timeout;
// `what` says what did not happen in time.
void Communicator::checkStreamWait(int64_t startNs, const char* what) const {
  if (abortRequested_.load())
    throw Error(gyreInvalidUsage, stoppedSentence());
  if (config_.timeoutMs > 0 && nowNs() - startNs > config_.timeoutMs * int64_t{1'000'000})
    throw Error(gyreTimeout, "rank " + std::to_string(rank_) + ": " + what + " in " +
                                 std::to_string(config_.timeoutMs) + " ms (GYRE_TIMEOUT_MS)");
}

const collectives::Algorithm* Communicator::directOnDevice(const Operation& op) const {
  // (A compressed call's plan is its codec's, staged.)
  if (!op.stream || !config_.deviceDirect || !localReads_ || nranks_ < 2 || op.premul || op.codec) return nullptr;
  const size_t count = op.kind == collectives::OpKind::AllToAllv ? 0 : op.count;
  if (overrides_.find(op.kind, count * kernels::dtypeSize(static_cast<kernels::DType>(op.dtype)))) return nullptr;
  // AllReduce and ReduceScatter reduce each slice from all ranks in one
  // pass where the ranks are few enough for one kernel (direct_multi).
  const bool multi = nranks_ <= kernels::kMaxReduceAll &&
                     (op.kind == collectives::OpKind::AllReduce || op.kind == collectives::OpKind::ReduceScatter);
  for (const char* name : {multi ? "direct_multi" : "direct", "direct"})
    for (const collectives::Algorithm& a : collectives::algorithms())
      if (a.op == op.kind && std::strcmp(a.name, name) == 0) return &a;
  return nullptr;  // an operation without a single-copy algorithm
}

bool Communicator::messagesOnDevice(const Operation& op) const {
  if (!op.stream || !config_.deviceDirect || !deviceMessages_ || nranks_ < 2 || op.premul || op.codec) return false;
  switch (op.kind) {
    case collectives::OpKind::SendRecv:
    case collectives::OpKind::AllReduce:
    case collectives::OpKind::AllGather:
    case collectives::OpKind::ReduceScatter:
    case collectives::OpKind::Broadcast:
    case collectives::OpKind::Reduce:
    case collectives::OpKind::Gather:
    case collectives::OpKind::Scatter:
    case collectives::OpKind::AllToAll:
    case collectives::OpKind::AllToAllv:
      return true;
    default:  // (the sequence and expert exchanges' views, the codecs', peer averaging: staged)
      return false;
  }
}

namespace {

// A call that runs on the device does so on its own buffers where each is
// device memory of the stream's GPU (as bindStream classified it); a
// single-copy plan's must also be memory that peers can map (CUDA IPC),
// where device messages need not be (only their slots are shared).
// Otherwise (pinned host or managed memory, a pool allocation without IPC
// for a single-copy plan) it is staged, and runs the same plan on the host.
bool buffersOnDevice(device::Backend& b, const Operation& op, bool shared) {
  const std::tuple<const void*, size_t, bool> buffers[] = {{op.sendbuff, op.sendBytes, op.sendOnDevice},
                                                           {op.recvbuff, op.recvBytes, op.recvOnDevice}};
  for (const auto& [p, bytes, onDevice] : buffers) {
    if (!p || !bytes) continue;
    if (!onDevice) return false;
    if (!shared) continue;
    try {
      b.exportMemory(p);
    } catch (const Error&) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool Communicator::runsOnDevice(device::Backend& b, const Operation& op) const {
  if (directOnDevice(op)) return buffersOnDevice(b, op, true);
  return messagesOnDevice(op) && buffersOnDevice(b, op, false);
}

ProxyEngine& Communicator::engineFor(int device) {
  std::unique_ptr<ProxyEngine>& e = engines_[device];
  if (!e) {
    e = std::make_unique<ProxyEngine>(*device::backend(), device, [this](int64_t start) {
      checkStreamWait(start, "the GPU did not finish the call's copies and reductions");
    });
    GYRE_INFO("rank %d: calls on streams of GPU %d run on device buffers, single-copy where the "
              "operation has such a plan, device to device messages otherwise (GYRE_DEVICE_DIRECT=1)",
              rank_, device);
    // From now on peers' messages may come into device slots of ours: made
    // here, at the first call on the device, so that a peer's messages go
    // device to device from its next call on (the executor also accepts
    // them on a connection made later, at its first device message).
    for (int p = 0; p < nranks_; ++p)
      if (transport::Connection* c = p == rank_ ? nullptr : connections_->connection(p);
          c && c->can(transport::kDeviceMessages))
        c->acceptDeviceMessages(device);
  }
  return *e;
}

// On the caller's thread: stage the device buffers through pinned host
// memory with copies on the streams, mark where each stream is, gate it,
// enqueue the copies back behind the gate, and queue the call (or the
// group) for the worker. Returns at once.
void Communicator::enqueueOnStreams(Operation op) {
  device::Backend& b = *device::backend();
  if (!staging_) staging_ = std::make_unique<device::StagingPool>(b, kStagingLimit);
  auto call = std::make_shared<DeviceCall>();
  const std::vector<Operation*> ops = operationsOf(op);
  for (Operation* o : ops) {
    bool known = false;
    for (const DeviceCall::Point& p : call->points) known = known || p.stream == o->stream;
    if (!known) call->points.push_back({o->stream, nullptr, nullptr});
  }
  const int64_t start = nowNs();
  auto whileWaiting = [&] {
    checkStreamWait(start, "the streams of earlier calls did not give their staging memory back");
  };
  // A single collective's input may come in pieces. Not a group's (its
  // calls run one after another, each reading all it has), a PreMulSum's
  // (scaled whole before the call) or point to point's.
  const bool pieces = op.members.empty() && !op.premul && op.kind != collectives::OpKind::SendRecv;
  // A call that runs on its device buffers stages nothing; so does a
  // group of such calls (FSDP's and coalesced all-gathers and all-reduces,
  // a pipeline stage's sends and receives), all on one GPU, run by the
  // proxy as host groups run.
  bool direct = !ops.empty();
  const int device = b.streamDevice(ops.front()->stream);
  for (const Operation* o : ops) direct = direct && b.streamDevice(o->stream) == device && runsOnDevice(b, *o);
  if (direct) {
    call->direct = true;
    call->device = device;
    for (Operation* o : ops) o->stageSend = o->stageRecv = false;
  }
  std::vector<CopyOut> outs;
  try {
    for (Operation* o : ops)
      stageOperation(b, *staging_, *o, whileWaiting, call->staging, outs, pieces ? &call->inputPieces : nullptr,
                     config_.devicePieceBytes);
    for (DeviceCall::Point& p : call->points) {
      if (call->inputPieces.empty()) {
        p.ready = b.recordEvent(p.stream);
      } else {  // one stream: the call starts after the first piece
        std::swap(p.ready, call->inputPieces.front().event);
      }
      for (const CopyOut& c : outs) {
        if (!c.inPieces || c.stream != p.stream) continue;
        forEachPiece(c.bytes, config_.devicePieceBytes, [&](size_t off, size_t len) {
          call->outputPieces.push_back({off + len, b.makeGate(), false});
          b.waitGate(p.stream, call->outputPieces.back().gate);
          b.copyOnStream(static_cast<unsigned char*>(c.dst) + off, static_cast<const unsigned char*>(c.src) + off,
                         len, c.stream);
        });
      }
      p.gate = b.makeGate();
      b.waitGate(p.stream, p.gate);
    }
    for (const CopyOut& c : outs)
      if (!c.inPieces) b.copyOnStream(c.dst, c.src, c.bytes, c.stream);
    if (!call->staging.empty())
      for (const DeviceCall::Point& p : call->points) call->stagingDone.push_back(b.recordEvent(p.stream));
  } catch (...) {
    retireStaging(*call, false);
    releaseStreams(*call);
    throw;
  }
  op.device = std::move(call);
  std::lock_guard<std::mutex> lock(queueMu_);
  pushToWorker(std::move(op));
}

// Once the call is done. Where every stream reached it, all that is left on
// them of it is the copies out (its gates are open): the blocks go back to
// the pool once the events behind those are done. A stream that did not
// reach the call (held by the caller's work, failed) may still write its
// blocks at any time: they are left to it, never reused or freed.
void Communicator::retireStaging(DeviceCall& call, bool streamsReachedIt) noexcept {
  device::Backend& b = *device::backend();
  if (call.staging.empty()) return;
  if (!streamsReachedIt) {
    // A call that failed before it looked (a broken communicator) may find
    // its streams there all the same.
    streamsReachedIt = true;
    for (const DeviceCall::Point& p : call.points) {
      try {
        streamsReachedIt = streamsReachedIt && p.ready && b.eventDone(p.ready);
      } catch (const std::exception&) {
        streamsReachedIt = false;
      }
    }
  }
  if (streamsReachedIt && call.stagingDone.size() == call.points.size()) {
    staging_->retire(std::move(call.staging), std::move(call.stagingDone));
  } else {
    for (void* e : call.stagingDone) b.destroyEvent(e);
    staging_->abandon(call.staging);
  }
  call.staging.clear();
  call.stagingDone.clear();
}

void Communicator::releaseStreams(DeviceCall& call) noexcept {
  device::Backend* b = device::backend();
  for (DeviceCall::Piece& p : call.inputPieces)
    if (p.event) b->destroyEvent(p.event);
  call.inputPieces.clear();
  for (DeviceCall::OutPiece& p : call.outputPieces) {
    if (!p.open) b->openGate(p.gate);
    b->destroyGate(p.gate);
  }
  call.outputPieces.clear();
  for (DeviceCall::Point& p : call.points) {
    if (p.gate) {
      b->openGate(p.gate);
      b->destroyGate(p.gate);
    }
    if (p.ready) b->destroyEvent(p.ready);
    p.gate = p.ready = nullptr;
  }
}

// On the worker: the proxy's side of one enqueued call (or group). Its
// inputs are in host memory once its events are done.
void Communicator::runOnDevice(Operation& op) {
  device::Backend& b = *device::backend();
  DeviceCall& call = *op.device;
  // However the call ends, its streams are released and its staging
  // retired.
  struct Finish {
    Communicator& c;
    DeviceCall& call;
    bool reached = false;
    ~Finish() {
      // A direct call that failed may have work of its own still on the
      // proxy's stream, writing the caller's buffers: it runs out first.
      if (call.engine) call.engine->drain();
      c.retireStaging(call, reached);
      releaseStreams(call);
    }
  } finish{*this, call};
  try {
    checkUsable();
    // Until every stream has reached the call; an abort or the timeout ends
    // the wait (the stream may be held up by work of the caller's).
    const int64_t start = nowNs();
    for (const DeviceCall::Point& p : call.points)
      awaitEvent(b, p.ready, [&] { checkStreamWait(start, "the stream did not reach the enqueued call"); });
    finish.reached = true;
    // A PreMulSum scalar in device memory is read now, once the stream has
    // written it.
    for (Operation* o : operationsOf(op))
      if (o->premul && o->premulPointer && b.classify(o->premulPointer).kind != device::MemoryKind::Host) {
        b.copy(o->premulValue, o->premulPointer, kernels::dtypeSize(static_cast<kernels::DType>(o->dtype)));
        o->premulPointer = nullptr;
      }
    if (op.members.empty()) {
      // The rest of a pipelined input arrives while the call runs; each wait
      // for a piece has the timeout to itself.
      auto check = [&](int64_t since) { checkStreamWait(since, "the stream did not copy in the call's input"); };
      StagedInput input(b, call.inputPieces, check);  // (a FunctionRef: check must outlive it)
      if (!call.inputPieces.empty()) op.inputArrival = &input;
      StagedOutput output(b, call.outputPieces);
      if (!call.outputPieces.empty()) op.outputDeparture = &output;
      if (call.direct) call.engine = &engineFor(call.device);
      execute(op);
      // The results are in place before the gate lets the stream go on.
      if (call.engine) call.engine->flush();
      op.inputArrival = nullptr;
      op.outputDeparture = nullptr;
    } else {
      if (call.direct) {
        call.engine = &engineFor(call.device);
        for (Operation& m : op.members) m.device = op.device;  // each member runs with the engine
      }
      runGroupMembers(op.members);
      if (call.engine) call.engine->flush();
    }
  } catch (const Error& e) {
    // Recorded for gyreCommGetAsyncError and the next call (fail() is
    // idempotent: a call's own failure was recorded already).
    fail(e);
  } catch (const std::exception& e) {
    fail(Error(gyreInternalError, std::string("internal error: ") + e.what()));
  }
}

}  // namespace gyre::core
