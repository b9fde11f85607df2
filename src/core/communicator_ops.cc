// Running the API's calls: now, in a group, or in the background; and
// turning each into the planner's request.
#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "collectives/call.h"
#include "collectives/peer_average.h"
#include "collectives/point_to_point.h"
#include "core/communicator.h"
#include "core/trace.h"
#include "core/trace_steps.h"
#include "transport/connection_manager.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/scale.h"
#include "topology/affinity.h"

namespace gyre::core {

namespace {

using collectives::OpKind;

bool reduces(OpKind k) {
  return k == OpKind::AllReduce || k == OpKind::Reduce || k == OpKind::ReduceScatter;
}

}  // namespace

void Communicator::submit(Operation&& op) {
  ActiveScope active(activeCalls_);  // until the Turn below has let go of *this
  checkUsable();
  if (op.stream) return enqueueOnStreams(std::move(op));  // device_calls.cc
  uint32_t nobody = 0;
  if (!op.request && turn_.compare_exchange_strong(nobody, kBusy)) {
    // The common case: nothing queued ahead, nobody running or waiting:
    // run on the caller's thread.
    Turn turn{*this};
    execute(op);
    return;
  }
  // Queued: a nonblocking call, or a blocking one waiting its turn.
  std::unique_lock<std::mutex> lock(queueMu_);
  std::shared_ptr<RequestState> waitFor;
  if (!op.request) op.request = waitFor = std::make_shared<RequestState>();
  pushToWorker(std::move(op));
  lock.unlock();
  if (!waitFor) return;
  std::unique_lock<std::mutex> wait(waitFor->mu);
  waitFor->cv.wait(wait, [&] { return waitFor->done; });
  if (waitFor->result != gyreSuccess) throw Error(waitFor->result, waitFor->message);
}

void Communicator::pushToWorker(Operation op) {
  queue_.push_back(std::move(op));
  turn_.fetch_add(kOther);
  if (!worker_.joinable()) worker_ = std::thread([this] { workerLoop(); });
  queueCv_.notify_all();
}

void Communicator::releaseTurn() {
  uint32_t onlyUs = kBusy;
  if (turn_.compare_exchange_strong(onlyUs, 0)) return;  // nobody to wake
  std::lock_guard<std::mutex> l(queueMu_);
  turn_.fetch_and(~kBusy);
  queueCv_.notify_all();
}

void Communicator::waitForTurn() {
  std::unique_lock<std::mutex> lock(queueMu_);
  turn_.fetch_add(kOther);  // counted before looking: a release now wakes us
  queueCv_.wait(lock, [&] { return queue_.empty() && !busy(); });
  turn_.fetch_sub(kOther - kBusy);  // no longer waiting, and busy (kBusy was clear)
}

void Communicator::workerLoop() {
  log::setThreadRank(rank_);
  topology::bindCurrentThreadToPreferredNuma();  // no-op on one NUMA node or with GYRE_TOPO_AFFINITY=0
  for (;;) {
    std::unique_lock<std::mutex> lock(queueMu_);
    queueCv_.wait(lock, [&] { return (!queue_.empty() && !busy()) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;  // stopping, nothing left
    Operation op = std::move(queue_.front());
    queue_.pop_front();
    turn_.fetch_sub(kOther - kBusy);  // no longer queued, and busy (kBusy was clear)
    lock.unlock();
    if (op.device) {
      runOnDevice(op);  // never throws: a failure breaks the communicator
      releaseTurn();
      continue;
    }
    gyreResult_t result = gyreSuccess;
    std::string why;
    try {
      checkUsable();
      execute(op);
    } catch (const Error& e) {
      result = e.code();
      why = e.what();
    } catch (const std::exception& e) {
      result = gyreInternalError;
      why = std::string("internal error: ") + e.what();
    }
    releaseTurn();
    op.request->complete(result, why);
  }
}

void Communicator::drainQueue() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stopping_ = true;
    queueCv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

void Communicator::finalize() {
  ActiveScope active(activeCalls_);
  // Taking a turn means everything queued before has run.
  waitForTurn();
  Turn turn{*this};
  checkUsable();
}

void Communicator::runGroup(std::vector<Operation>& ops) {
  ActiveScope active(activeCalls_);
  // A group on streams is enqueued as one unit, all its calls or none on
  // streams (a host call's result is due when gyreGroupEnd returns).
  size_t onStreams = 0;
  for (const Operation& op : ops) onStreams += op.stream != nullptr;
  if (onStreams) {
    if (onStreams != ops.size())
      throwError(gyreInvalidUsage, "a group mixes calls on CUDA streams with host calls (NULL stream): " +
                                       std::to_string(onStreams) + " of its " + std::to_string(ops.size()) +
                                       " calls on this communicator have a stream");
    checkUsable();
    Operation group;
    group.kind = ops.front().kind;
    group.members = std::move(ops);
    ops.clear();
    enqueueOnStreams(std::move(group));
    return;
  }
  // The group's calls run on this thread, after anything queued before.
  waitForTurn();
  Turn turn{*this};
  gyreResult_t result = gyreSuccess;
  std::string why;
  try {
    checkUsable();
    runGroupMembers(ops);
  } catch (const Error& e) {
    result = e.code();
    why = e.what();
  }
  for (Operation& op : ops)
    if (op.request) op.request->complete(result, why);
  if (result != gyreSuccess) throw Error(result, why);
}

void Communicator::runGroupMembers(std::vector<Operation>& ops) {
  // Every rank runs its group the same way: all sends and receives first,
  // progressed together (so no order of them can deadlock, and none waits
  // behind a collective that its peer runs later in its group), then the
  // collectives in call order.
  std::vector<Operation> p2p;
  for (Operation& op : ops)
    if (op.kind == OpKind::SendRecv) p2p.push_back(op);
  if (!p2p.empty()) {
    // Run together, so each is counted and traced over the whole batch.
    const CallClock clock = startCall();
    try {
      executePointToPoint(p2p);
    } catch (const Error& e) {
      for (const Operation& op : p2p) noteCall(op, clock, &e);
      throw;
    }
    for (const Operation& op : p2p) noteCall(op, clock, nullptr);
  }
  for (Operation& op : ops)
    if (op.kind != OpKind::SendRecv) execute(op);
}

// The start's clock serves the rate limit of the stall questions' look at
// a call's start (every 10 ms): the kernel's tick (1-4 ms) is enough for
// it, and exact time only a traced call needs (the failure reports' look
// reads the clock itself, where a peer reports through the network). Its
// length, for the statistics, is counted in cycles. Two full clock reads
// were a quarter of a small call's own time (one rank, 64 B AllReduce:
// 28 ns each in this VM, the counter 11).
Communicator::CallClock Communicator::startCall() {
  const CallClock c{traceRow_ ? nowNs() : coarseNowNs(), cycleCount()};
  callStartNs_ = c.startNs;
  return c;
}

void Communicator::execute(Operation& op) {
  const CallClock clock = startCall();
  try {
    if (op.kind == OpKind::SendRecv) {
      executePointToPoint(std::span<Operation>(&op, 1));
    } else if (collectives::isMoeExchange(op.kind)) {
      executeMoe(op);
    } else {
      executeCollective(op);
    }
  } catch (const Error& e) {
    noteCall(op, clock, &e);
    throw;
  }
  noteCall(op, clock, nullptr);
}

void Communicator::noteCall(const Operation& op, const CallClock& clock, const Error* failure) {
  const bool failed = failure != nullptr;
  if (traceRow_) traceCall(op, clock.startNs, failed ? gyreGetErrorString(failure->code()) : "ok");
  countCall(std::max(op.sendBytes, op.recvBytes), clock, failed);
  if (op.kind == OpKind::SendRecv && op.isSend && !failed && op.peer >= 0 && op.peer < nranks_ && stats_.sentToPeer)
    StatCounters::add(stats_.sentToPeer[op.peer], op.sendBytes);
}

void Communicator::countCall(uint64_t bytes, const CallClock& clock, bool failed) {
  StatCounters::add(stats_.calls, 1);
  if (failed) StatCounters::add(stats_.failed, 1);
  StatCounters::add(stats_.bytes, bytes);
  const uint64_t end = cycleCount();  // (a counter another CPU's may trail: never less than nothing)
  StatCounters::add(stats_.cycles, end > clock.startCycles ? end - clock.startCycles : 0);
}

void Communicator::countSent(const collectives::Plan& plan, size_t elemSize) {
  for (const collectives::Step& s : plan.steps)
    if (sendsToPeer(s)) StatCounters::add(stats_.sentToPeer[s.sendPeer], s.count * elemSize);
}

Communicator::Stats Communicator::stats() const {
  Stats s;
  s.calls = stats_.calls.load(std::memory_order_relaxed);
  s.failed = stats_.failed.load(std::memory_order_relaxed);
  s.bytes = stats_.bytes.load(std::memory_order_relaxed);
  s.seconds = static_cast<double>(stats_.cycles.load(std::memory_order_relaxed)) * cycleRate_.nsPerCycle() / 1e9;
  s.sentToPeer.resize(static_cast<size_t>(nranks_));
  if (stats_.sentToPeer)
    for (int p = 0; p < nranks_; ++p) s.sentToPeer[p] = stats_.sentToPeer[p].load(std::memory_order_relaxed);
  return s;
}

std::string Communicator::peerTransport(int peer) const {
  if (peer == rank_ || !connections_) return "";
  transport::Connection* conn = connections_->connection(peer);
  return conn ? conn->transport().name() : "";
}

void Communicator::traceCall(const Operation& op, int64_t startNs, const char* result) {
  trace::Call c;
  const bool p2p = op.kind == OpKind::SendRecv;
  c.name = p2p ? (op.isSend ? "send" : "recv") : collectives::opKindName(op.kind);
  c.seq = opSeq_;
  c.startNs = startNs;
  c.endNs = nowNs();
  c.bytes = std::max(op.sendBytes, op.recvBytes);
  c.dtype = kernels::dtypeName(static_cast<kernels::DType>(op.dtype));
  c.algorithm = p2p || collectives::isMoeExchange(op.kind) ? "" : planCache_.algorithm;
  c.result = result;
  // The transports to the call's peers (every peer but for a send or receive).
  std::vector<std::string> names;
  for (int p = 0; p < nranks_; ++p) {
    if (p2p && p != op.peer) continue;
    const std::string name = peerTransport(p);
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  for (const std::string& n : names) c.transports += (c.transports.empty() ? "" : "+") + n;
  trace::record(traceRow_, c);
  if (traceSteps_) traceSteps_->flush(traceRow_);
}

void Communicator::bindPreMulSum(Operation& op) const {
  if (op.redop < gyreNumOps || !isRedOp(op.redop)) return;
  const PreMulSum& p = premulOps_[static_cast<size_t>(op.redop - gyreNumOps)];
  op.premul = true;
  op.premulPointer = p.residence == gyreScalarHostImmediate ? nullptr : p.pointer;
  std::memcpy(op.premulValue, p.value, sizeof(op.premulValue));
}

const void* Communicator::premultiplied(const Operation& op, size_t elems) {
  const auto dt = static_cast<kernels::DType>(op.dtype);
  const size_t bytes = elems * kernels::dtypeSize(dt);
  if (premulBuffer_.size() < bytes) premulBuffer_.resize(bytes);
  const void* scalar = op.premulPointer ? op.premulPointer : op.premulValue;
  kernels::scale(dt, premulBuffer_.data(), op.sendbuff, elems, scalar);
  return premulBuffer_.data();
}

void Communicator::executeCollective(Operation& op) {
  ActiveScope active(activeCalls_);
  repeat_.valid = false;  // plan_ and the scratch are this call's from here
  checkUsable();
  const auto dt = static_cast<kernels::DType>(op.dtype);
  collectives::CallRequest req;
  req.desc.kind = op.kind;
  req.desc.dtype = static_cast<uint8_t>(op.dtype);
  req.desc.root = op.root;
  req.desc.count = op.kind == OpKind::AllToAllv ? 0 : op.count;
  req.elemSize = kernels::dtypeSize(dt);
  beginCollective(req, op.kind);
  collectives::CallArgs args;
  args.dtype = dt;
  args.elemSize = req.elemSize;
  args.input = op.sendbuff;
  args.output = op.recvbuff;
  if (reduces(op.kind)) {
    const bool premul = op.redop >= gyreNumOps;
    req.desc.redop = static_cast<uint8_t>(premul ? gyreNumOps : op.redop);
    args.op = premul || op.redop == gyreAvg ? kernels::Op::Sum : static_cast<kernels::Op>(op.redop);
    args.divisor = op.redop == gyreAvg ? static_cast<uint32_t>(nranks_) : 1;
    if (premul) {
      const size_t inputElems = op.kind == OpKind::ReduceScatter ? op.count * nranks_ : op.count;
      if (op.inputArrival) op.inputArrival->waitFor(~size_t{0});  // it reads all of the input now
      if (op.count) args.input = premultiplied(op, inputElems);
    }
  }
  if (op.kind == OpKind::PeerAverage) {  // (peer_average.h)
    req.desc.redop = static_cast<uint8_t>(op.redop);
    const auto peers = collectives::averagingPeers(static_cast<collectives::PeerSelection>(op.redop),
                                                   static_cast<uint64_t>(op.root), nranks_, rank_);
    args.op = kernels::Op::Sum;
    args.divisor = static_cast<uint32_t>(peers.size() + 1);
  }
  // In place as each operation defines it (NCCL's rules).
  const size_t block = op.count * req.elemSize;
  auto offset = [](const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; };
  switch (op.kind) {
    case OpKind::AllGather:
      req.inPlace = args.input == offset(args.output, size_t(rank_) * block);
      break;
    case OpKind::ReduceScatter:
      req.inPlace = args.output == offset(args.input, size_t(rank_) * block);
      break;
    case OpKind::Gather:
      req.inPlace = rank_ == op.root && args.input == offset(args.output, size_t(op.root) * block);
      break;
    case OpKind::Scatter:
      req.inPlace = rank_ == op.root && args.output == offset(args.input, size_t(op.root) * block);
      break;
    default:
      req.inPlace = args.input == args.output && args.input != nullptr;
  }
  // A device call's input arriving in pieces: the executor's steps wait for
  // what they read. In place, the output is the input: all of it first.
  // (PreMulSum's scaled copy waited already.)
  if (op.inputArrival) {
    if (req.inPlace || args.input != op.sendbuff) {
      op.inputArrival->waitFor(~size_t{0});
    } else {
      args.inputArrival = op.inputArrival;
    }
  }
  if (!req.inPlace) args.outputDeparture = op.outputDeparture;  // (in place, its gates open at the end)
  if (collectives::isSeqExchange(op.kind)) req.seq = &op.seq;
  if (op.kind == OpKind::AllToAllv) {
    const size_t n = static_cast<size_t>(nranks_);
    req.sendCounts = op.vcounts.data();
    req.sendDispls = op.vcounts.data() + n;
    req.recvCounts = op.vcounts.data() + 2 * n;
    req.recvDispls = op.vcounts.data() + 3 * n;
  }
  // Outputs larger than the cache are streamed past it.
  size_t outElems = op.count;
  if (op.kind == OpKind::AllGather || op.kind == OpKind::AllToAll || op.kind == OpKind::Gather)
    outElems = op.count * nranks_;
  if (op.kind == OpKind::AllToAllv)  // its count is 0: the blocks say how much arrives
    outElems = collectives::CallRequest::totalCount(req.recvCounts, nranks_);
  if (req.seq) outElems = op.recvBytes / req.elemSize;  // (its count is its layout's code)
  args.streamOutput = outElems * req.elemSize >= kernels::streamingThresholdBytes();
  if (op.count == 0 && op.kind != OpKind::Barrier && op.kind != OpKind::AllToAllv) return;
  if (op.codec) {
    // A compressed call's plan is a byte plan of its codec's messages
    // (collectives/compressed.h): bytes move, the codec steps read values.
    if (args.inputArrival) args.inputArrival->waitFor(~size_t{0});
    args.inputArrival = nullptr;
    args.outputDeparture = nullptr;
    req.desc.codec = op.codec;
    req.values = dt;
    req.elemSize = 1;
    args.values = dt;
    args.dtype = kernels::DType::Uint8;
    args.elemSize = 1;
    std::copy(std::begin(op.residuals), std::end(op.residuals), std::begin(args.residuals));
  }
  // A direct device call's buffers are the GPU's: moved by the proxy's
  // engine, never by the host.
  if (op.device && op.device->engine) {
    args.engine = op.device->engine;
    args.streamOutput = false;
  }
  runCall(req, args, op.stream ? directOnDevice(op) : nullptr);  // (a host call: never)
  if (op.key.set) rememberRepeat(op, args);
}

void Communicator::executePointToPoint(std::span<Operation> ops) {
  ActiveScope active(activeCalls_);
  repeat_.valid = false;  // (plan_ becomes the messages')
  checkUsable();
  std::vector<collectives::P2PMessage> messages;
  std::vector<void*> buffers;
  std::vector<collectives::CallTag> tags;
  // A send to ourselves meets the receive from ourselves in the same place
  // of the group: copied directly, after checking that they agree.
  std::vector<Operation*> selfSends, selfRecvs;
  for (Operation& op : ops) {
    const size_t bytes = op.count * kernels::dtypeSize(static_cast<kernels::DType>(op.dtype));
    if (op.peer == rank_) {
      (op.isSend ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    collectives::CallDesc d;
    d.kind = OpKind::SendRecv;
    d.dtype = static_cast<uint8_t>(op.dtype);
    d.count = op.count;
    d.root = op.isSend ? rank_ : op.peer;
    d.seq = ++(op.isSend ? sendSeq_ : recvSeq_)[static_cast<size_t>(op.peer)];
    tags.push_back(collectives::makeTag(d));
    buffers.push_back(op.isSend ? const_cast<void*>(op.sendbuff) : op.recvbuff);
    messages.push_back(collectives::P2PMessage{op.isSend, op.peer, bytes, static_cast<uint16_t>(tags.size() - 1),
                                               static_cast<uint16_t>(buffers.size() - 1)});
  }
  if (selfSends.size() != selfRecvs.size())
    throwError(gyreInvalidUsage, "rank " + std::to_string(rank_) + " sends itself " + std::to_string(selfSends.size()) +
                                     " message(s) but receives " + std::to_string(selfRecvs.size()) +
                                     " from itself in this group");
  // A point-to-point call (or group) on a stream that runs on the device
  // (Communicator::messagesOnDevice): its buffers are the GPU's, moved by the
  // proxy's engine as device messages.
  collectives::DeviceEngine* engine = ops.front().device ? ops.front().device->engine : nullptr;
  for (size_t i = 0; i < selfSends.size(); ++i) {
    const Operation& s = *selfSends[i];
    const Operation& r = *selfRecvs[i];
    if (s.count != r.count || s.dtype != r.dtype)
      throwError(gyreInvalidUsage, "rank " + std::to_string(rank_) + " sends itself " + std::to_string(s.count) +
                                       " elements of one type but receives " + std::to_string(r.count) +
                                       " elements of another");
    const size_t bytes = s.count * kernels::dtypeSize(static_cast<kernels::DType>(s.dtype));
    if (engine) {
      engine->copy(r.recvbuff, s.sendbuff, bytes);  // (flushed with the call's last work)
    } else {
      kernels::copy(r.recvbuff, s.sendbuff, bytes);
    }
  }
  if (messages.empty()) return;
  opName_ = "send/recv";
  opSeq_ = messages.front().send ? sendSeq_[messages.front().peer] : recvSeq_[messages.front().peer];
  checkReports();
  try {
    planCache_.invalidate();
    collectives::buildPointToPoint(messages, *this, plan_);
    plan_.tags = tags;
    collectives::CallArgs args;
    args.dtype = kernels::DType::Uint8;
    args.elemSize = 1;
    args.extra = buffers.data();
    args.engine = engine;
    if (traceSteps_) {
      traceSteps_->beginPlan(args.elemSize);
      args.stepObserver = traceSteps_.get();
    }
    collectives::execute(plan_, args, *this);
  } catch (const Error& e) {
    throw fail(e);
  }
}

void Communicator::exchangeForSplit(void* data, size_t bytesPerRank, OpKind as) {
  ActiveScope active(activeCalls_);
  collectives::CallRequest req;
  req.desc.kind = OpKind::AllGather;
  req.desc.dtype = static_cast<uint8_t>(gyreUint8);
  req.desc.count = bytesPerRank;
  req.elemSize = 1;
  req.inPlace = true;
  beginCollective(req, as);  // a collective call like any other: every rank makes it here
  try {
    collectives::CallArgs args;
    args.dtype = kernels::DType::Uint8;
    args.elemSize = 1;
    args.output = data;
    args.input = static_cast<unsigned char*>(data) + size_t(rank_) * bytesPerRank;
    collectives::Plan plan;  // plan_ stays the user's last call's
    collectives::planCall(req, *this, collectives::AlgoOverrides(), plan);
    collectives::CallTag tag = collectives::makeTag(req.desc);
    tag.op = static_cast<uint8_t>(as);  // what a rank making another call is told
    plan.tags.assign(1, tag);
    args.scratch = plan.scratchElems ? scratch(plan.scratchElems) : nullptr;
    collectives::execute(plan, args, *this);
  } catch (const Error& e) {
    throw fail(e);
  }
}

int Communicator::createPreMulSum(const void* scalar, gyreDataType_t dtype, gyreScalarResidence_t residence) {
  size_t slot = 0;
  while (slot < premulOps_.size() && premulOps_[slot].used) ++slot;
  if (slot == premulOps_.size()) premulOps_.emplace_back();
  PreMulSum& p = premulOps_[slot];
  p.used = true;
  p.dtype = dtype;
  p.residence = residence;
  p.pointer = scalar;
  std::memcpy(p.value, scalar, kernels::dtypeSize(static_cast<kernels::DType>(dtype)));
  return gyreNumOps + static_cast<int>(slot);
}

bool Communicator::isRedOp(int op) const {
  if (op >= 0 && op < gyreNumOps) return true;
  const size_t slot = static_cast<size_t>(op - gyreNumOps);
  return op >= gyreNumOps && slot < premulOps_.size() && premulOps_[slot].used;
}

void Communicator::destroyRedOp(int op) {
  if (op < gyreNumOps || !isRedOp(op))
    throwError(gyreInvalidArgument, "op " + std::to_string(op) + " was not made by gyreRedOpCreatePreMulSum on this communicator");
  premulOps_[static_cast<size_t>(op - gyreNumOps)].used = false;
}

}  // namespace gyre::core
