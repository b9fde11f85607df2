#include "collectives/executor.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "collectives/call.h"
#include "collectives/seq_layout.h"
#include "collectives/view.h"
#include "kernels/cpu/reduce.h"

namespace gyre::collectives {

namespace {

using transport::Connection;
using WaitItem = ExecContext::WaitItem;
using Waiting = ExecContext::Waiting;

enum class Outcome { Done, Blocked };

// In the tag of the single-copy algorithms' address messages: a data
// message is never taken for addresses (or the reverse), whatever its size.
constexpr uint8_t kAddressesFlag = 1;

struct LaneState {
  uint32_t next = 0;
  uint32_t end = 0;
  uint8_t phase = 0;     // how far the current step has got (multi-part steps)
  bool partial = false;  // a part of the current step was done since the last report
  int64_t stepStartNs = 0;  // the current step's first attempt (CallArgs::stepObserver only)
  WaitItem blocked{nullptr, Waiting::ForData};
  // A viewed step's runs of memory, for a connection that moves them itself
  // (kGatherIO): kept while the step is under way, as the transport may.
  std::vector<iovec> runs;
};

// A view whose runs average at least this many bytes is sent and received
// as runs where the connection moves them itself (kGatherIO); smaller runs
// are packed through the transport's buffer, one copy in cache. Over TCP
// on 4 ranks (gyre-seq-ab), heads-to-seq with runs of 1 KiB took 1.23-1.29x
// an AllToAll read straight into the runs and 1.02-1.15x packed; with runs
// of 4-8 KiB the runs won (64 MiB, 2 ranks: 1.05-1.06x against 1.14-1.16x).
constexpr size_t kMinRunBytes = 2048;
// How much of each run a gather, or a send of runs, asks for ahead (gather).
constexpr size_t kPrefetchBytes = 512;
// A device ReduceFromAll with a peer whose memory only the host reaches
// goes in pieces of this many bytes through the pinned bounce buffer.
constexpr size_t kDeviceBounceBytes = 4 << 20;

class Runner {
 public:
  Runner(const Plan& plan, const CallArgs& args, ExecContext& ctx)
      : plan_(plan),
        args_(args),
        ctx_(ctx),
        plain_(!args.inputArrival && !args.engine && !args.stepObserver && !args.outputDeparture) {
    if (args_.outputDeparture) countOutputWriters();
  }
  // The call is over (or failed): what we registered for peers, which they
  // have said they no longer read, is released, and so are the keys they
  // sent us.
  ~Runner() {
    for (const Registration& r : registered_) {
      try {
        r.to->deregisterMemory(r.where.src);
        r.to->deregisterMemory(r.where.dst);
      } catch (const std::exception&) {
        // A failing connection: the transport's shutdown releases the rest.
      }
    }
    for (size_t p = 0; p < peerAddresses_.size(); ++p) release(static_cast<int>(p));
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  const Plan& plan() const { return plan_; }

  // Runs the lane's steps until one cannot go on, or (oneMessage) until it
  // has sent or received one message; true if anything moved. Beside other
  // lanes a lane moves one message per pass: run to its end, a send lane
  // kept our peers' FIFOs full while the messages they had sent us waited,
  // and the two directions took turns instead of flowing together (2 ranks,
  // AllToAll, 16-64 MiB: 1.3x slower). Local copies and reductions do not
  // count: they wait for nobody.
  bool advance(LaneState& l, bool oneMessage) {
    bool moved = false;
    while (l.next < l.end) {
      if (plan_.steps[l.next].prim == Prim::Resolve) {
        // (the resolver appends to the plan: no reference to a step is held across it)
        if (!args_.resolver) throwError(gyreInternalError, std::string("plan ") + plan_.algorithm + " resolves without a resolver");
        const Step s = plan_.steps[l.next];
        const LaneResolver::Range r = args_.resolver->resolve(s);
        if (!r.ready) {  // (other lanes' receives will make it so: nothing of its own to wait on)
          l.blocked = WaitItem{nullptr, Waiting::ForData};
          return moved;
        }
        l.next = r.begin;
        l.end = r.end;
        moved = true;
        continue;
      }
      Outcome o = Outcome::Blocked;
      if (!plain_ && args_.stepObserver && l.stepStartNs == 0) l.stepStartNs = nowNs();
      try {
        const Step& s = plan_.steps[l.next];
        if (!plain_ || !tryPlainStep(s, l, o)) o = tryStep(s, l);
      } catch (const transport::MessageMismatch& m) {
        explain(plan_.steps[l.next], m);
        throw;
      }
      if (o == Outcome::Blocked) {
        moved |= l.partial;
        l.partial = false;
        return moved;
      }
      moved = true;
      l.phase = 0;
      l.partial = false;
      if (!plain_) {
        if (args_.outputDeparture) outputWritten(plan_.steps[l.next]);
        if (args_.stepObserver) tellStepDone(l);
      }
      const Prim done = plan_.steps[l.next++].prim;
      if (oneMessage && !isLocal(done)) return true;
    }
    return moved;
  }

  // A mismatch that a receiving step can say more about than the
  // communicator's account (two calls, or one call "with a different
  // size"): AllToAllv counts that disagree between a block's two ends, or
  // ranks that disagree on whether a message is data or a buffer's address
  // (different algorithms, or different single-copy thresholds). Throws the
  // clearer error; returns when it has nothing to add.
  void explain(const Step& s, const transport::MessageMismatch& m) const {
    const CallTag got = fromWire(m.got), want = fromWire(m.expected);
    explainTokens(got, want, m.peer());
    if (got.call != want.call || got.op != want.op || got.dtype != want.dtype || got.redop != want.redop ||
        got.root != want.root)
      return;  // another call altogether: the communicator names both
    const std::string p = std::to_string(m.peer());
    const std::string me = plan_.rank >= 0 ? "rank " + std::to_string(plan_.rank) : std::string("this rank");
    // Short: peers get it through a fixed-size notice (255 characters).
    const std::string call = std::string(opKindName(static_cast<OpKind>(want.op))) + " #" + std::to_string(want.call);
    const std::string type = kernels::dtypeName(static_cast<kernels::DType>(want.dtype));
    const char* const same = "; every rank must make the same calls in the same order";
    // (A sequence exchange's count is its layout: the communicator names both.)
    const bool block = s.blockCount != kNoBlock && !countIsShape(static_cast<OpKind>(want.op));
    if (block && got.count != want.count) {
      throw transport::ConnectionError(
          gyreInvalidUsage, m.peer(),
          "rank " + p + " sends " + me + " a block of " + std::to_string(got.count) + " x " + type + " in " + call +
              ", but " + me + "'s recvcounts[" + p + "] is " + std::to_string(want.count) + " (" +
              std::to_string(got.count * args_.elemSize) + " bytes sent, " +
              std::to_string(want.count * args_.elemSize) + " expected): recvcounts must match the senders' sendcounts" +
              same);
    }
    if (codecOf(got) != codecOf(want)) {
      auto how = [](kernels::Codec c) {
        return c == kernels::Codec::None ? std::string("uncompressed")
                                         : std::string("compressed as ") + kernels::codecName(c);
      };
      throw transport::ConnectionError(gyreInvalidUsage, m.peer(),
                                       "rank " + p + " sends " + call + " " + how(codecOf(got)) + " where " + me +
                                           " expects it " + how(codecOf(want)) +
                                           ": every rank must use the same codec" + same);
    }
    if ((got.flags ^ want.flags) & kAddressesFlag) {
      const bool offered = got.flags & kAddressesFlag;
      throw transport::ConnectionError(
          gyreInvalidUsage, m.peer(),
          "rank " + p + (offered ? " offered a single-copy read" : " sent data through the connection") + " in " +
              call + " where " + me + " expected " + (offered ? "data" : "a single-copy read") +
              ": the ranks chose different algorithms or thresholds (GYRE_ALGO, GYRE_MAPPED_BUFFERS, tuner model)" +
              same);
    }
  }

  // A sequence exchange's ranks that agree on everything but the tokens
  // (whose fingerprint is in the layout's code, seq_layout.h). Throws naming
  // the entry where this block's count differs (seq to heads: a block has
  // its sender's tokens; heads to seq: its receiver's); returns otherwise.
  void explainTokens(const CallTag& got, const CallTag& want, int peer) const {
    if (!isSeqExchange(static_cast<OpKind>(want.op)) || got.op != want.op || got.call != want.call ||
        got.dtype != want.dtype || plan_.rank < 0)
      return;
    if (got.count != want.count && !seqTokensDiffer(got.count, want.count)) return;
    if (got.count == want.count && got.root == want.root) return;
    const bool toHeads = static_cast<OpKind>(want.op) == OpKind::SeqToHeads;
    const std::string p = std::to_string(peer), me = std::to_string(plan_.rank);
    const std::string call = std::string(opKindName(static_cast<OpKind>(want.op))) + " #" + std::to_string(want.call);
    const char* const same = ": every rank must pass the same layout (tokens and seqLen)";
    if (got.root != want.root)
      throw transport::ConnectionError(gyreInvalidUsage, peer,
                                       "rank " + p + " and rank " + me + " disagree on the layout's tokens[" +
                                           (toHeads ? p : me) + "] in " + call + " (" + std::to_string(got.root) +
                                           " on rank " + p + ", " + std::to_string(want.root) + " on rank " + me +
                                           ")" + same);
    throw transport::ConnectionError(gyreInvalidUsage, peer,
                                     "rank " + p + " and rank " + me + " pass different layout->tokens in " + call +
                                         " (this block's count, " + std::to_string(got.root) +
                                         ", agrees; another rank's does not)" + same);
  }

  // The plan's tag on the wire, with the block's count (AllToAllv) and the
  // flag of an address message. Most steps send the plan's tag as it is: a
  // straight copy of its 24 bytes. Built in place and read back whole, a
  // tag changed in a field stalls the read on the field's store (the
  // store cannot be forwarded to a wider load): half of tryStep's own time
  // in a 4-rank 64 B AllToAll went to those reads (perf annotate).
  transport::MessageTag wireTagOf(const Step& s) const {
    const CallTag& planned = plan_.tags[s.tag];
    const bool addresses = s.prim == Prim::SendAddresses || s.prim == Prim::RecvAddresses;
    if (s.blockCount == kNoBlock && !addresses) return toWire(planned);
    CallTag t = planned;
    if (s.blockCount != kNoBlock) setBlockCount(t, s.blockCount);
    if (addresses) t.flags |= kAddressesFlag;
    return toWire(t);
  }

  // GYRE_TRACE_STEPS: the lane's current step is done.
  void tellStepDone(LaneState& l) {
    const std::less<const LaneState*> before;  // (the prologue's and epilogue's lanes are apart)
    const bool ofLanes = lanes_ && !before(&l, lanes_) && before(&l, lanes_ + nlanes_);
    args_.stepObserver->stepDone(plan_.steps[l.next], l.next, ofLanes ? static_cast<size_t>(&l - lanes_) : 0,
                                 l.stepStartNs, nowNs());
    l.stepStartNs = 0;
  }

  // The lanes' states while they run (execute), for Await steps.
  void setLanes(const LaneState* lanes, size_t n) {
    lanes_ = lanes;
    nlanes_ = n;
  }
  void lanesFinished() {
    lanes_ = nullptr;
    nlanes_ = 0;
    lanesFinished_ = true;
  }

 private:
  static bool isLocal(Prim p) {
    switch (p) {
      case Prim::Copy:
      case Prim::Reduce:
      case Prim::Encode:
      case Prim::Decode:
      case Prim::Widen:
      case Prim::Divide:
      case Prim::Await:
      case Prim::Resolve:
        return true;
      default:
        return false;
    }
  }

  // Whether plan step `index` is done: steps before the first lane (the
  // prologue) are; a lane's are once the lane has passed them.
  bool stepDone(size_t index) const {
    if (lanesFinished_ || plan_.lanes.empty() || index < plan_.lanes.front().begin) return true;
    for (size_t i = 0; i < plan_.lanes.size() && i < nlanes_; ++i)
      if (index >= plan_.lanes[i].begin && index < plan_.lanes[i].end) return lanes_[i].next > index;
    throwError(gyreInternalError, std::string("plan ") + plan_.algorithm + " awaits a step outside its lanes");
  }

  // A codec step's residual (null where none is kept), from its element.
  float* residualOf(const Step& s) const {
    float* r = args_.residuals[static_cast<size_t>(s.residual)];
    return r ? r + s.remoteOffset : nullptr;
  }
  // The values' type in a buffer: the caller's, or float32 in Scratch.
  kernels::DType valuesIn(BufId b) const { return b == BufId::Scratch ? kernels::DType::Float32 : args_.values; }

  // The usual steps of a plain call (plain_: host buffers, nothing to
  // watch), in the lane's own loop: a send, a receive or a copy straight to
  // the transport or the copy kernel, past tryStep's tests that cannot
  // hold and its call. False: not one of them, tryStep's.
  [[gnu::always_inline]] bool tryPlainStep(const Step& s, LaneState& l, Outcome& o) {
    if (s.srcView || s.dstView) return false;
    switch (s.prim) {
      case Prim::Send:
        o = sendFrom(s, l, pointer(s.src, s.srcOffset), s.count * args_.elemSize, wireTagOf(s));
        return true;
      case Prim::Recv:
        o = recvInto(ctx_.connection(s.recvPeer), pointer(s.dst, s.dstOffset), s.count * args_.elemSize,
                     wireTagOf(s), s.dst == BufId::Output, l);
        return true;
      case Prim::Copy:
        if (s.finalReduce) return false;  // a copy that divides (avg)
        copyStep(s, pointer(s.src, s.srcOffset), pointer(s.dst, s.dstOffset));
        o = Outcome::Done;
        return true;
      default:
        return false;
    }
  }

  // A Send step's message, from src.
  Outcome sendFrom(const Step& s, LaneState& l, const void* src, size_t bytes, const transport::MessageTag& tag) {
    Connection& out = ctx_.connection(s.sendPeer);
    return out.trySendFrom(src, bytes, tag) ? Outcome::Done : blocked(l, out, Waiting::ForRoom);
  }

  // A Copy step that does not divide, src to dst (its buffers' pointers).
  void copyStep(const Step& s, const void* src, void* dst) {
    if (src == dst) return;
    const size_t bytes = s.count * args_.elemSize;
    if (args_.engine) {
      args_.engine->copy(dst, src, bytes);
    } else {
      kernels::copy(dst, src, bytes, s.dst == BufId::Output && args_.streamOutput);
    }
  }

  Outcome tryStep(const Step& s, LaneState& l) {
    if (args_.inputArrival) awaitInput(s);
    if (args_.engine) deviceStepBegins(s);
    const size_t bytes = s.count * args_.elemSize;
    const transport::MessageTag tag = wireTagOf(s);
    if ((s.srcView || s.dstView) && s.count) {
      if (args_.engine)
        throwError(gyreInternalError, std::string("plan ") + plan_.algorithm +
                                          " gathers a view, which a call on device buffers cannot");
      return tryViewStep(s, l, tag);
    }
    const void* src = pointer(s.src, s.srcOffset);
    void* dst = pointer(s.dst, s.dstOffset);
    const uint32_t divisor = s.finalReduce ? args_.divisor : 1;
    if (args_.engine && bytes && carriesData(s.prim)) return tryDeviceMessageStep(s, l, tag, src, dst, divisor);
    switch (s.prim) {
      case Prim::Copy:
        if (divisor == 1) {
          // Straight to the copy kernel: through the reduce dispatch (a
          // task built, the table looked up, the copy picked out of it) a
          // small call's block copy cost ~80 instructions more
          // (tools/call_instructions.py).
          copyStep(s, src, dst);
        } else {
          reduce(dst, nullptr, src, nullptr, s, divisor, s.dst == BufId::Output);
        }
        return Outcome::Done;
      case Prim::Reduce:  // dst = dst (+) src, dst on the left when recvFirst
        reduce(dst, nullptr, dst, src, s, divisor, false);
        return Outcome::Done;
      case Prim::Send:
        return sendFrom(s, l, src, bytes, tag);
      case Prim::Recv:
        return recvInto(ctx_.connection(s.recvPeer), dst, bytes, tag, s.dst == BufId::Output, l);
      case Prim::RecvReduce: {
        Connection& in = ctx_.connection(s.recvPeer);
        const void* data = in.tryRecvBuffer(bytes, tag);
        if (!data) return blocked(l, in, Waiting::ForData);
        reduce(dst, nullptr, data, src, s, divisor, s.dst == BufId::Output);
        in.recvRelease(bytes);
        return Outcome::Done;
      }
      case Prim::RecvReduceSend: {
        Connection& in = ctx_.connection(s.recvPeer);
        Connection& out = ctx_.connection(s.sendPeer);
        const void* data = in.tryRecvBuffer(bytes, tag);
        if (!data) return blocked(l, in, Waiting::ForData);
        void* room = out.trySendBuffer(bytes);
        if (!room) return blocked(l, out, Waiting::ForRoom);
        reduce(room, nullptr, data, src, s, divisor, false);
        out.sendCommit(bytes, tag);
        in.recvRelease(bytes);
        return Outcome::Done;
      }
      case Prim::RecvReduceCopySend: {
        Connection& in = ctx_.connection(s.recvPeer);
        Connection& out = ctx_.connection(s.sendPeer);
        if (l.phase == 0) {
          const void* data = in.tryRecvBuffer(bytes, tag);
          if (!data) return blocked(l, in, Waiting::ForData);
          if (out.can(transport::kDirectIO)) {
            // Reduce once into place (cached: the socket reads it next),
            // then send from there.
            reduce(dst, nullptr, data, src, s, divisor, false);
            in.recvRelease(bytes);
            l.phase = 1;
            l.partial = true;
          } else {
            // One pass writes both our result and the peer's slot.
            void* room = out.trySendBuffer(bytes);
            if (!room) return blocked(l, out, Waiting::ForRoom);
            reduce(dst, room, data, src, s, divisor, s.dst == BufId::Output);
            out.sendCommit(bytes, tag);
            in.recvRelease(bytes);
            return Outcome::Done;
          }
        }
        return out.trySendFrom(dst, bytes, tag) ? Outcome::Done : blocked(l, out, Waiting::ForRoom);
      }
      case Prim::RecvCopySend: {
        Connection& in = ctx_.connection(s.recvPeer);
        Connection& out = ctx_.connection(s.sendPeer);
        if (l.phase == 0) {
          if (in.can(transport::kDirectIO) || out.can(transport::kDirectIO)) {
            // Land in dst first, then send from there: cached stores.
            Outcome o = recvInto(in, dst, bytes, tag, false, l);
            if (o != Outcome::Done) return o;
            l.phase = 1;
            l.partial = true;
          } else {
            const void* data = in.tryRecvBuffer(bytes, tag);
            if (!data) return blocked(l, in, Waiting::ForData);
            void* room = out.trySendBuffer(bytes);
            if (!room) return blocked(l, out, Waiting::ForRoom);
            kernels::copy2(dst, room, data, bytes);
            out.sendCommit(bytes, tag);
            in.recvRelease(bytes);
            return Outcome::Done;
          }
        }
        return out.trySendFrom(dst, bytes, tag) ? Outcome::Done : blocked(l, out, Waiting::ForRoom);
      }
      case Prim::CopySend: {
        // Our own block into our output and to the next rank: one read of
        // the input instead of a copy and then a send that reads it again
        // (from memory, once the output is too large for cache).
        Connection& out = ctx_.connection(s.sendPeer);
        if (out.can(transport::kDirectIO)) {  // the socket reads the copy, in cache
          if (l.phase == 0) {
            reduce(dst, nullptr, src, nullptr, s, 1, false);
            l.phase = 1;
            l.partial = true;
          }
          return out.trySendFrom(dst, bytes, tag) ? Outcome::Done : blocked(l, out, Waiting::ForRoom);
        }
        void* room = out.trySendBuffer(bytes);
        if (!room) return blocked(l, out, Waiting::ForRoom);
        reduce(dst, room, src, nullptr, s, 1, s.dst == BufId::Output);
        out.sendCommit(bytes, tag);
        return Outcome::Done;
      }
      case Prim::SendAddresses: {
        Connection& out = ctx_.connection(s.sendPeer);
        if (l.phase == 0) {
          // Each of our two regions, from its step offset to the end of its
          // buffer: the peer's reads must stay inside. Registered once per
          // step (a blocked send is retried with the same bytes) and held
          // until the call ends, after the peer's "done".
          const size_t srcBytes = extentBytes(s.src, s.srcOffset), dstBytes = extentBytes(s.dst, s.dstOffset);
          registered_.push_back({&out, &s,
                                 PeerAddresses{out.registerMemory(src, srcBytes, memoryTypeOf(srcBytes)),
                                               out.registerMemory(dst, dstBytes, memoryTypeOf(dstBytes)), s.count}});
          l.phase = 1;
        }
        const PeerAddresses& where = registrationOf(s);
        return out.trySendFrom(&where, sizeof(where), tag) ? Outcome::Done : blocked(l, out, Waiting::ForRoom);
      }
      case Prim::RecvAddresses: {
        Connection& in = ctx_.connection(s.recvPeer);
        const void* data = in.tryRecvBuffer(sizeof(PeerAddresses), tag);
        if (!data) return blocked(l, in, Waiting::ForData);
        if (peerAddresses_.size() <= static_cast<size_t>(s.recvPeer)) peerAddresses_.resize(s.recvPeer + 1);
        release(s.recvPeer);  // a second message from the peer replaces its first
        std::memcpy(&peerAddresses_[s.recvPeer], data, sizeof(PeerAddresses));
        in.recvRelease(sizeof(PeerAddresses));
        // What the peer offers must be what we will read (AllToAllv counts).
        if (s.count != kAnyCount && peerAddresses_[s.recvPeer].count != s.count)
          throw transport::MessageMismatch(s.recvPeer, tag, peerAddresses_[s.recvPeer].count, tag, s.count);
        return Outcome::Done;
      }
      case Prim::ReadCopy: {
        Connection& peer = ctx_.connection(s.recvPeer);
        const transport::RemoteKey& key = remoteKey(s);
        const uint64_t at = s.remoteOffset * args_.elemSize;
        if (args_.engine) {
          deviceRead(peer, key, at, s, dst, nullptr, 1);
          return Outcome::Done;
        }
        if (const void* mapped = mapForReader(peer, key, at, bytes)) {
          kernels::copy(dst, mapped, bytes, s.dst == BufId::Output && args_.streamOutput);
          return Outcome::Done;
        }
        peer.get(dst, key, at, bytes);
        return Outcome::Done;
      }
      case Prim::Encode:
        kernels::encode(s.codec, valuesIn(s.src), src, s.count, dst, residualOf(s));
        return Outcome::Done;
      case Prim::Decode:
        kernels::decode(s.codec, src, s.count, valuesIn(s.dst), dst, s.accumulate);
        return Outcome::Done;
      case Prim::RecvDecode: {
        Connection& in = ctx_.connection(s.recvPeer);
        const size_t message = kernels::messageBytes(s.codec, s.count);
        const void* data = in.tryRecvBuffer(message, tag);
        if (!data) return blocked(l, in, Waiting::ForData);
        kernels::decode(s.codec, data, s.count, valuesIn(s.dst), dst, s.accumulate);
        in.recvRelease(message);
        return Outcome::Done;
      }
      case Prim::Widen:
        kernels::widen(valuesIn(s.src), src, s.count, static_cast<float*>(dst), s.accumulate);
        return Outcome::Done;
      case Prim::Divide:
        if (args_.divisor > 1) kernels::divideBy(static_cast<float*>(dst), s.count, args_.divisor);
        return Outcome::Done;
      case Prim::Await:
        // Another lane's step: nothing to wait on here, the lanes that block
        // it are what the executor waits for.
        return stepDone(s.count) ? Outcome::Done : blocked(l, nullptr, Waiting::ForData);
      case Prim::Resolve:  // (advance takes it before any step runs)
        throwError(gyreInternalError, std::string("plan ") + plan_.algorithm + ": a Resolve step ran as a step");
      case Prim::ReadReduce: {
        Connection& peer = ctx_.connection(s.recvPeer);
        const transport::RemoteKey& key = remoteKey(s);
        const uint64_t at = s.remoteOffset * args_.elemSize;
        if (args_.engine) {
          deviceRead(peer, key, at, s, dst, src, divisor);
          return Outcome::Done;
        }
        const void* theirs = mapForReader(peer, key, at, bytes);
        if (!theirs) {
          // Through the start of scratch, a bounce buffer that stays in cache.
          peer.get(args_.scratch, key, at, bytes);
          theirs = args_.scratch;
        }
        // Only the last contribution may stream: earlier sums are read again.
        reduce(dst, nullptr, theirs, src, s, divisor, s.dst == BufId::Output && s.finalReduce);
        return Outcome::Done;
      }
      case Prim::ReduceFromAll:
        if (!s.count) return Outcome::Done;
        if (args_.engine) {
          deviceReduceFromAll(s, dst, src);
        } else {
          hostReduceFromAll(s, dst, src);
        }
        return Outcome::Done;
    }
    throwError(gyreInternalError, "unknown plan step");
  }

  // A step whose source or destination is a view (plan.h): its message is
  // gathered straight into the transport's buffer, or scattered straight
  // out of it (the buffer form, whatever kDirectIO prefers: a socket would
  // read or write only one run of the caller's memory).
  Outcome tryViewStep(const Step& s, LaneState& l, const transport::MessageTag& tag) {
    const size_t bytes = s.count * args_.elemSize;
    switch (s.prim) {
      case Prim::Copy:  // (this rank's own block)
        if (s.srcView) {
          gather(s, static_cast<char*>(pointer(s.dst, s.dstOffset)), s.dst == BufId::Output && args_.streamOutput);
        } else {
          scatter(s, static_cast<const char*>(pointer(s.src, s.srcOffset)));
        }
        return Outcome::Done;
      case Prim::Reduce: {  // dst (the view) = dst (+) src, dst on the left: replicas added in plan order
        const char* src = static_cast<const char*>(pointer(s.src, s.srcOffset));
        forEachViewRun(viewOf(s.dstView), s.dstOffset, s.count, [&](BufId b, size_t at, size_t pos, size_t len) {
          kernels::ReduceTask t;
          t.dtype = args_.dtype;
          t.op = args_.op;
          t.out0 = pointer(b, at);
          t.a = t.out0;
          t.b = src + pos * args_.elemSize;
          t.count = len;
          kernels::run(t);
        });
        return Outcome::Done;
      }
      case Prim::Send: {
        Connection& out = ctx_.connection(s.sendPeer);
        if (movesRuns(out, viewOf(s.srcView))) {
          if (l.phase == 0) runsOf(viewOf(s.srcView), s.srcOffset, s.count, l), l.phase = 1;
          return out.trySendRunsFrom(l.runs, bytes, tag) ? Outcome::Done : blocked(l, out, Waiting::ForRoom);
        }
        void* room = out.trySendBuffer(bytes);
        if (!room) return blocked(l, out, Waiting::ForRoom);
        gather(s, static_cast<char*>(room), false);  // (the peer reads the slot next: cached stores)
        out.sendCommit(bytes, tag);
        return Outcome::Done;
      }
      case Prim::Recv: {
        Connection& in = ctx_.connection(s.recvPeer);
        if (movesRuns(in, viewOf(s.dstView))) {
          if (l.phase == 0) runsOf(viewOf(s.dstView), s.dstOffset, s.count, l), l.phase = 1;
          return in.tryRecvRunsInto(l.runs, bytes, tag) ? Outcome::Done : blocked(l, in, Waiting::ForData);
        }
        const void* data = in.tryRecvBuffer(bytes, tag);
        if (!data) return blocked(l, in, Waiting::ForData);
        scatter(s, static_cast<const char*>(data));
        in.recvRelease(bytes);
        return Outcome::Done;
      }
      default:
        break;
    }
    throwError(gyreInternalError, std::string("plan ") + plan_.algorithm + " has a view on a step that takes none");
  }
  const View& viewOf(uint32_t v) const { return plan_.views[v - 1u]; }
  bool movesRuns(const Connection& c, const View& v) const {
    return c.can(transport::kGatherIO) && v.rowLen * args_.elemSize >= kMinRunBytes * v.segments;
  }
  // The runs of the view's packed range [off, off + count), into l.runs,
  // each one's first lines asked for (the transport copies them next, run
  // after run, with no prefetcher looking ahead across runs: gather).
  void runsOf(const View& v, size_t off, size_t count, LaneState& l) const {
    l.runs.clear();
    forEachViewRun(v, off, count, [&](BufId b, size_t at, size_t, size_t len) {
      char* p = static_cast<char*>(pointer(b, at));
      for (size_t line = 0; line < std::min<size_t>(len * args_.elemSize, kPrefetchBytes); line += 64)
        __builtin_prefetch(p + line);
      l.runs.push_back(iovec{p, len * args_.elemSize});
    });
  }
  // The step's viewed source into `to`, in packed order; stream: as
  // kernels::copy's streamDst.
  // Each run's first lines are asked for while the run before it is
  // copied: a run starts where no hardware prefetcher looks (a row further
  // on). A 64 MiB seq-to-heads (runs of 8 KiB, 2 ranks, gyre-seq-ab) took
  // 1.06-1.11x a contiguous AllToAll over shm and 1.12-1.16x over TCP
  // without; with 512 bytes ahead 1.03-1.04x and 1.05-1.06x (256, 1024, 2048
  // and 4096 did no better).
  void gather(const Step& s, char* to, bool stream) const {
    const char* from = nullptr;
    char* into = nullptr;
    size_t bytes = 0;
    forEachViewRun(viewOf(s.srcView), s.srcOffset, s.count, [&](BufId b, size_t at, size_t pos, size_t len) {
      const char* next = static_cast<const char*>(pointer(b, at));
      for (size_t line = 0; line < std::min<size_t>(len * args_.elemSize, kPrefetchBytes); line += 64)
        __builtin_prefetch(next + line);
      if (bytes) kernels::copyRun(into, from, bytes, stream);
      from = next;
      into = to + pos * args_.elemSize;
      bytes = len * args_.elemSize;
    });
    if (bytes) kernels::copyRun(into, from, bytes, stream);
    kernels::copyRunsDone(stream);
  }
  // `from`, in packed order, into the step's viewed destination; a large
  // output is streamed past the cache, as a contiguous receive's is.
  void scatter(const Step& s, const char* from) const {
    const bool stream = args_.streamOutput;
    forEachViewRun(viewOf(s.dstView), s.dstOffset, s.count, [&](BufId b, size_t at, size_t pos, size_t len) {
      kernels::copyRun(pointer(b, at), from + pos * args_.elemSize, len * args_.elemSize, stream && b == BufId::Output);
    });
    kernels::copyRunsDone(stream);
  }

  // A device call (CallArgs::engine) runs local copies and reductions,
  // single-copy reads, addresses and notices, and messages of data (device
  // messages, tryDeviceMessageStep); not the codecs' steps. Before a step
  // sends anything, the device work enqueued so far must have run: the
  // message tells the peer it may read what that work wrote, or that our
  // reads of it are over.
  void deviceStepBegins(const Step& s) {
    switch (s.prim) {
      case Prim::Copy:
      case Prim::Reduce:
      case Prim::ReadCopy:
      case Prim::ReadReduce:
      case Prim::ReduceFromAll:
      case Prim::RecvAddresses:
      case Prim::Recv:
      case Prim::RecvReduce:
        return;
      case Prim::SendAddresses:
        args_.engine->flush();
        return;
      case Prim::Send:
      case Prim::RecvReduceSend:
      case Prim::RecvReduceCopySend:
      case Prim::RecvCopySend:
      case Prim::CopySend:
        // A notice of no bytes goes on the host path; a device message
        // flushes what it enqueued itself.
        if (s.count == 0) args_.engine->flush();
        return;
      default:
        break;
    }
    throwError(gyreInternalError, std::string("plan ") + plan_.algorithm + " has a " + primName(s.prim) +
                                      " step, which a call on device buffers cannot run");
  }
  static bool carriesData(Prim p) {
    switch (p) {
      case Prim::Send:
      case Prim::Recv:
      case Prim::RecvReduce:
      case Prim::RecvReduceSend:
      case Prim::RecvReduceCopySend:
      case Prim::RecvCopySend:
      case Prim::CopySend:
        return true;
      default:
        return false;
    }
  }
  // A device call's step that moves data through connections (the ring,
  // tree, chain and point-to-point plans). Where the connection carries
  // device messages (transport::kDeviceMessages), our device writes a
  // message straight into the receiver's device slot and reads one out of
  // ours, so the pieces go device to device; a peer that does not take them
  // (yet), or one whose call was staged, gets or sends host messages, which
  // pass through the pinned bounce buffer (its first half what we read, its
  // second what we write). What the step enqueued runs before its message
  // is published (the peer reads it next) and before the message it read
  // is released (the peer writes that slot again): one flush per step,
  // which also frees the bounce buffer for the next.
  Outcome tryDeviceMessageStep(const Step& s, LaneState& l, const transport::MessageTag& tag, const void* src,
                               void* dst, uint32_t divisor) {
    const size_t bytes = s.count * args_.elemSize;
    DeviceEngine& e = *args_.engine;
    Connection* in = s.prim == Prim::Send || s.prim == Prim::CopySend ? nullptr : &ctx_.connection(s.recvPeer);
    Connection* out = s.prim == Prim::Recv || s.prim == Prim::RecvReduce ? nullptr : &ctx_.connection(s.sendPeer);
    if (in && in->can(transport::kDeviceMessages)) in->acceptDeviceMessages(e.device());
    const void* data = nullptr;
    transport::MemoryType dataType = transport::MemoryType::Host;
    if (in) {
      const Connection::Arrival a = in->tryRecvMessage(bytes, tag);
      if (!a.data) return blocked(l, *in, Waiting::ForData);
      data = a.data;
      dataType = a.type;
    }
    Connection::Room room;
    if (out) {
      room = out->trySendDeviceBuffer(bytes);
      if (!room.data) return blocked(l, *out, Waiting::ForRoom);
    }
    const bool hostIn = in && dataType != transport::MemoryType::Device;
    const bool hostOut = out && room.type != transport::MemoryType::Device;
    char* bounce = hostIn || hostOut ? static_cast<char*>(e.hostBounce(2 * bytes)) : nullptr;
    if (hostIn) {
      std::memcpy(bounce, data, bytes);
      data = bounce;
    }
    void* to = hostOut ? bounce + bytes : room.data;
    switch (s.prim) {
      case Prim::Send:
        e.copy(to, src, bytes);
        break;
      case Prim::Recv:
        e.copy(dst, data, bytes);
        break;
      case Prim::RecvReduce:
        reduce(dst, nullptr, data, src, s, divisor, false);
        break;
      case Prim::RecvReduceSend:
        reduce(to, nullptr, data, src, s, divisor, false);
        break;
      case Prim::RecvReduceCopySend:  // one pass writes our result and the peer's slot
        reduce(dst, to, data, src, s, divisor, false);
        break;
      case Prim::RecvCopySend:
        reduce(dst, to, data, nullptr, s, 1, false);
        break;
      case Prim::CopySend:
        reduce(dst, to, src, nullptr, s, 1, false);
        break;
      default:
        throwError(gyreInternalError, "a device message step of no known kind");
    }
    e.flush();
    if (hostOut) std::memcpy(room.data, to, bytes);
    if (out) out->sendCommit(bytes, tag);
    if (in) in->recvRelease(bytes);
    return Outcome::Done;
  }
  // The peer's region mapped for whoever reads it in this call: a device
  // key maps to a device pointer, which only the device (a device call's
  // engine) may read, a host key to a host pointer, which only the host
  // may. Null where the reader must get() the bytes instead (the
  // transport's get copies a device key by the device).
  const void* mapForReader(Connection& peer, const transport::RemoteKey& key, uint64_t at, size_t bytes) const {
    const bool deviceKey = key.type == transport::MemoryType::Device;
    return deviceKey == (args_.engine != nullptr) ? peer.map(key, at, bytes) : nullptr;
  }
  transport::MemoryType memoryTypeOf(size_t bytes) const {
    return args_.engine && bytes ? transport::MemoryType::Device : transport::MemoryType::Host;
  }
  // A device call's read of a peer's region: dst = theirs (src null), or
  // dst = src (+) theirs in the step's order. A peer's device memory is
  // mapped here and read by the device; host memory (a peer whose call was
  // staged) comes through a pinned bounce buffer first.
  void deviceRead(Connection& peer, const transport::RemoteKey& key, uint64_t at, const Step& s, void* dst,
                  const void* src, uint32_t divisor) {
    const size_t bytes = s.count * args_.elemSize;
    if (!bytes) return;
    const void* theirs = mapForReader(peer, key, at, bytes);
    const bool bounced = !theirs;
    if (bounced) {
      void* bounce = args_.engine->hostBounce(bytes);
      peer.get(bounce, key, at, bytes);
      theirs = bounce;
    }
    if (!src && divisor == 1) {
      args_.engine->copy(dst, theirs, bytes);
    } else {
      reduce(dst, nullptr, theirs, src, s, divisor, false);
    }
    if (bounced) args_.engine->flush();  // the bounce buffer is used again next
  }

  // A peer's two regions, registered for us, and how many elements it
  // offers (AllToAllv's check).
  struct PeerAddresses {
    transport::RemoteKey src, dst;
    uint64_t count;
  };
  // Our regions, registered for a peer by a SendAddresses step.
  struct Registration {
    Connection* to;
    const Step* step;
    PeerAddresses where;
  };
  const PeerAddresses& registrationOf(const Step& s) const {
    for (auto r = registered_.rbegin(); r != registered_.rend(); ++r)
      if (r->step == &s) return r->where;
    throwError(gyreInternalError, "an address message without its registration");
  }
  // Done with the keys peer sent us.
  void release(int peer) noexcept {
    PeerAddresses& a = peerAddresses_[static_cast<size_t>(peer)];
    if (a.src.type == transport::MemoryType::None && a.dst.type == transport::MemoryType::None) return;
    transport::Connection& c = ctx_.connection(peer);
    c.releaseRemoteKey(a.src);
    c.releaseRemoteKey(a.dst);
    a = PeerAddresses{};
  }
  // The address the step's peer sent for its src (remote Input) or dst.
  const transport::RemoteKey& remoteKey(const Step& s) const { return keyOf(s.recvPeer, s.remote); }

  // ReduceFromAll's ranks in order: this one (plan_.rank) among its peers,
  // which the plan lists in rank order.
  int reduceFromAllRanks() const {
    const int n = static_cast<int>(plan_.peers.size()) + 1;
    if (plan_.rank < 0 || plan_.rank >= n || n > kernels::kMaxReduceAll)
      throwError(gyreInternalError, std::string("plan ") + plan_.algorithm + ": a reduction from all of " +
                                        std::to_string(n) + " ranks without this rank's place in them");
    return n;
  }
  // The address `peer` sent for its src (Input) or dst (Output).
  const transport::RemoteKey& keyOf(int peer, BufId which) const {
    if (peer < 0 || static_cast<size_t>(peer) >= peerAddresses_.size())
      throwError(gyreInternalError, "plan reads a peer's memory before it sent its addresses");
    const PeerAddresses& a = peerAddresses_[static_cast<size_t>(peer)];
    return which == BufId::Input ? a.src : a.dst;
  }

  // ReduceFromAll on the host, piece by piece: every rank's piece (a peer's
  // mapped, or read into the second half of Scratch), reduced in rank order
  // into the first half, the last contribution into dst; then, with toAll,
  // the piece written to every peer's output. A piece's reads all come
  // before its writes, so an in-place call is safe: the only rank that
  // reads our slice of anyone's buffer is this one.
  void hostReduceFromAll(const Step& s, void* dst, const void* src) {
    const int n = reduceFromAllRanks(), me = plan_.rank;
    const size_t esz = args_.elemSize, piece = std::max<size_t>(1, plan_.scratchElems / 2);
    char* acc = static_cast<char*>(args_.scratch);
    char* bounce = acc + piece * esz;
    for (size_t off = 0; off < s.count; off += piece) {
      const size_t len = std::min(piece, s.count - off), bytes = len * esz;
      // Rank q's piece: ours in place, a peer's mapped or read into `into`.
      auto contribution = [&](int q, char* into) -> const void* {
        if (q == me) return static_cast<const char*>(src) + off * esz;
        Connection& peer = ctx_.connection(q);
        const transport::RemoteKey& key = keyOf(q, s.remote);
        const uint64_t at = (s.remoteOffset + off) * esz;
        if (const void* mapped = mapForReader(peer, key, at, bytes)) return mapped;
        peer.get(into, key, at, bytes);
        return into;
      };
      char* out = static_cast<char*>(dst) + off * esz;
      kernels::ReduceTask t;
      t.dtype = args_.dtype;
      t.op = args_.op;
      t.count = len;
      t.a = contribution(0, acc);
      for (int q = 1; q < n; ++q) {
        t.b = contribution(q, bounce);
        const bool last = q == n - 1;
        t.out0 = last ? out : acc;
        t.divisor = last ? args_.divisor : 1;
        kernels::run(t);
        t.a = acc;
      }
      if (n == 1) {
        t.out0 = out;
        t.divisor = args_.divisor;
        kernels::run(t);
      }
      if (!s.toAll) continue;
      for (int q = 0; q < n; ++q)
        if (q != me) ctx_.connection(q).put(keyOf(q, BufId::Output), (s.dstOffset + off) * esz, out, bytes);
    }
  }

  // ReduceFromAll on the device: one many-input kernel over the whole
  // slice, reading peers' device buffers and writing their outputs through
  // CUDA IPC. A peer that offered host memory (its call staged) is read
  // into the pinned bounce buffer and written from it, by the host, in
  // pieces of kDeviceBounceBytes.
  void deviceReduceFromAll(const Step& s, void* dst, const void* src) {
    const int n = reduceFromAllRanks(), me = plan_.rank;
    const size_t esz = args_.elemSize;
    kernels::ReduceAllTask t;
    t.dtype = args_.dtype;
    t.op = args_.op;
    t.divisor = args_.divisor;
    t.nin = n;
    std::vector<int> hostIn, hostOut;  // peers whose memory only the host reaches
    for (int q = 0; q < n; ++q) {
      if (q == me) continue;
      const transport::RemoteKey& in = keyOf(q, s.remote);
      if (in.type != transport::MemoryType::Device) hostIn.push_back(q);
      if (s.toAll && keyOf(q, BufId::Output).type != transport::MemoryType::Device) hostOut.push_back(q);
    }
    const bool bounced = !hostIn.empty() || !hostOut.empty();
    const size_t piece = bounced ? std::max<size_t>(1, kDeviceBounceBytes / esz) : s.count;
    const size_t pieceBytes = std::min(piece, s.count) * esz;
    char* bounce = bounced ? static_cast<char*>(args_.engine->hostBounce((hostIn.size() + 1) * pieceBytes)) : nullptr;
    for (size_t off = 0; off < s.count; off += piece) {
      const size_t len = std::min(piece, s.count - off), bytes = len * esz;
      void* out = static_cast<char*>(dst) + off * esz;
      t.count = len;
      t.nout = 0;
      t.out[t.nout++] = out;
      for (int q = 0, h = 0; q < n; ++q) {
        if (q == me) {
          t.in[q] = static_cast<const char*>(src) + off * esz;
          continue;
        }
        Connection& peer = ctx_.connection(q);
        const uint64_t at = (s.remoteOffset + off) * esz;
        const transport::RemoteKey& in = keyOf(q, s.remote);
        if (in.type == transport::MemoryType::Device) {
          t.in[q] = peer.map(in, at, bytes);
        } else {
          char* into = bounce + static_cast<size_t>(h++) * pieceBytes;
          peer.get(into, in, at, bytes);
          t.in[q] = into;
        }
        if (!s.toAll) continue;
        const transport::RemoteKey& o = keyOf(q, BufId::Output);
        // A device key maps to the peer's allocation opened through CUDA
        // IPC, which the device may write as well as read.
        if (o.type == transport::MemoryType::Device)
          t.out[t.nout++] = const_cast<void*>(peer.map(o, (s.dstOffset + off) * esz, bytes));
      }
      args_.engine->reduceAll(t);
      if (!bounced) continue;
      char* outBounce = bounce + hostIn.size() * pieceBytes;
      if (!hostOut.empty()) args_.engine->copy(outBounce, out, bytes);
      args_.engine->flush();  // the bounce buffer is used again next
      for (int q : hostOut) ctx_.connection(q).put(keyOf(q, BufId::Output), (s.dstOffset + off) * esz, outBounce, bytes);
    }
  }
  // Bytes of buffer b from element offset on (the call's extents, plan.h).
  size_t extentBytes(BufId b, size_t offset) const {
    const size_t elems = b == BufId::Input     ? plan_.inputElems
                         : b == BufId::Output  ? plan_.outputElems
                         : b == BufId::Scratch ? plan_.scratchElems
                                               : 0;
    return elems > offset ? (elems - offset) * args_.elemSize : 0;
  }

  Outcome recvInto(Connection& in, void* dst, size_t bytes, const transport::MessageTag& tag, bool mayStream,
                   LaneState& l) {
    if (in.can(transport::kDirectIO))
      return in.tryRecvInto(dst, bytes, tag) ? Outcome::Done : blocked(l, in, Waiting::ForData);
    // Copy out of the peer's buffer ourselves, streaming a large output.
    const void* data = in.tryRecvBuffer(bytes, tag);
    if (!data) return blocked(l, in, Waiting::ForData);
    kernels::copy(dst, data, bytes, mayStream && args_.streamOutput);
    in.recvRelease(bytes);
    return Outcome::Done;
  }

  Outcome blocked(LaneState& l, Connection& c, Waiting what) { return blocked(l, &c, what); }
  Outcome blocked(LaneState& l, Connection* c, Waiting what) {
    l.blocked = WaitItem{c, what};
    return Outcome::Blocked;
  }

  void* pointer(BufId b, size_t offsetElems) const {
    char* base;
    switch (b) {
      case BufId::Input: base = static_cast<char*>(const_cast<void*>(args_.input)); break;
      case BufId::Output: base = static_cast<char*>(args_.output); break;
      case BufId::Scratch: base = static_cast<char*>(args_.scratch); break;
      default: base = static_cast<char*>(args_.extra[static_cast<uint16_t>(b) - kFirstExtraBuffer]); break;
    }
    return base ? base + offsetElems * args_.elemSize : nullptr;
  }

  // received: the peer's data (or dst for a local Reduce); local: ours.
  // Operand order follows the step. out0IsOutput: out0 is the user's
  // output, which may be streamed.
  void reduce(void* out0, void* out1, const void* received, const void* local, const Step& s, uint32_t divisor,
              bool out0IsOutput) {
    kernels::ReduceTask t;
    t.dtype = args_.dtype;
    t.op = args_.op;
    if (!local) {
      t.a = received;
    } else if (s.recvFirst) {
      t.a = received;
      t.b = local;
    } else {
      t.a = local;
      t.b = received;
    }
    t.out0 = out0;
    t.out1 = out1;
    t.count = s.count;
    t.divisor = divisor;
    if (args_.engine) return args_.engine->reduce(t);
    t.streamOut0 = out0IsOutput && args_.streamOutput;
    kernels::run(t);
  }

  // A step that reads the input waits until the part it reads has arrived
  // (CallArgs::inputArrival). Offering our buffers to peers, who may read any
  // of the input, waits for all of it, and so does a step that writes it.
  void awaitInput(const Step& s) {
    size_t need = 0;
    if (s.prim == Prim::SendAddresses || s.dst == BufId::Input) {
      need = ~size_t{0};
    } else if (s.srcView) {
      need = viewSpan(viewOf(s.srcView), BufId::Input, s.srcOffset, s.count).second * args_.elemSize;
    } else if (s.src == BufId::Input && s.count) {
      need = (s.srcOffset + s.count) * args_.elemSize;
    }
    if (need > inputReady_) inputReady_ = args_.inputArrival->waitFor(need);
  }

  // The output pieces a step writes: [first, last) of pieceEnds(); empty
  // for a step that writes no output.
  std::pair<size_t, size_t> outputPiecesOf(const Step& s) const {
    switch (s.prim) {
      case Prim::Send:
      case Prim::RecvReduceSend:
      case Prim::SendAddresses:
      case Prim::RecvAddresses:
        return {0, 0};
      default:
        break;
    }
    size_t lo = s.dstOffset * args_.elemSize, hi = lo + s.count * args_.elemSize;
    if (s.dstView) {
      const auto [first, end] = viewSpan(viewOf(s.dstView), BufId::Output, s.dstOffset, s.count);
      lo = first * args_.elemSize;
      hi = end * args_.elemSize;
      if (lo == hi) return {0, 0};
    } else if (s.dst != BufId::Output || s.count == 0) {
      return {0, 0};
    }
    const std::vector<size_t>& ends = args_.outputDeparture->pieceEnds();
    const size_t first = std::upper_bound(ends.begin(), ends.end(), lo) - ends.begin();
    const size_t last = std::lower_bound(ends.begin(), ends.end(), hi) - ends.begin();
    return {first, std::min(last + 1, ends.size())};
  }
  // How many steps write each output piece; pieces no step writes are
  // final at once.
  void countOutputWriters() {
    writers_.assign(args_.outputDeparture->pieceEnds().size(), 0);
    if (plan_.peersWriteOutput) return;  // final when the plan ends, not before
    for (const Step& s : plan_.steps) {
      const auto [first, last] = outputPiecesOf(s);
      for (size_t k = first; k < last; ++k) ++writers_[k];
    }
    for (size_t k = 0; k < writers_.size(); ++k)
      if (!writers_[k]) args_.outputDeparture->pieceFinal(k);
  }
  void outputWritten(const Step& s) {
    if (plan_.peersWriteOutput) return;
    const auto [first, last] = outputPiecesOf(s);
    for (size_t k = first; k < last; ++k)
      if (--writers_[k] == 0) args_.outputDeparture->pieceFinal(k);
  }

  const Plan& plan_;
  const CallArgs& args_;
  ExecContext& ctx_;
  size_t inputReady_ = 0;         // input bytes known to be in place
  std::vector<uint32_t> writers_;  // by output piece: the steps still to write it
  std::vector<PeerAddresses> peerAddresses_;  // by peer, for single-copy reads
  // A list: a send in flight keeps pointing at its entry, and an empty one
  // allocates nothing (libstdc++'s deque allocates on construction, which
  // was the one allocation of every small call).
  std::list<Registration> registered_;
  const LaneState* lanes_ = nullptr;          // the plan's lanes, while they run
  size_t nlanes_ = 0;
  bool lanesFinished_ = false;
  // Nothing but the steps themselves to look after (no input arriving in
  // pieces, no device engine, no step observer, no output departing).
  const bool plain_;
};

}  // namespace

namespace {

// The lanes' states, on the stack for the usual few: a small call's whole
// time is a few hundred nanoseconds, and an allocation is a visible part
// of it. Only as many as the plan has are made: eight made and destroyed
// every call (a vector each) were ~100 of a 2-rank 64 B AllToAll's ~3,600
// instructions (tools/call_instructions.py: the whole call over shm 2577 ->
// 2478).
class LaneStates {
 public:
  explicit LaneStates(size_t n) : n_(n) {
    if (n <= kFew) {
      std::uninitialized_value_construct_n(reinterpret_cast<LaneState*>(few_), n);
      lanes_ = std::launder(reinterpret_cast<LaneState*>(few_));
    } else {
      many_.resize(n);
      lanes_ = many_.data();
    }
  }
  ~LaneStates() {
    if (n_ <= kFew) std::destroy_n(lanes_, n_);
  }
  LaneStates(const LaneStates&) = delete;
  LaneStates& operator=(const LaneStates&) = delete;
  LaneState* data() { return lanes_; }

 private:
  static constexpr size_t kFew = 8;
  alignas(LaneState) unsigned char few_[kFew * sizeof(LaneState)];
  std::vector<LaneState> many_;
  LaneState* lanes_ = nullptr;
  size_t n_;
};

// Runs the lanes until all are done, waiting when none can move.
void runLanes(Runner& runner, LaneState* lanes, size_t nlanes, ExecContext& ctx) {
  // One pass over the unfinished lanes: whether any moved, and how many are
  // still open after it (counted as it goes: a second loop to count them
  // was ~40 of a small call's instructions).
  const bool several = nlanes > 1;
  size_t open = 0;
  auto sweep = [&]() __attribute__((always_inline)) {  // (in the loop below, not a call)
    bool moved = false;
    open = 0;
    for (size_t i = 0; i < nlanes; ++i) {
      LaneState& l = lanes[i];
      if (l.next >= l.end) continue;
      moved |= runner.advance(l, several);
      open += l.next < l.end;
    }
    return moved;
  };
  // The waiter's question: true if any moved or all are done.
  auto pass = [&]() { return sweep() || open == 0; };
  // What stalled lanes wait for; on the stack for the usual few lanes.
  WaitItem fewWaits[8];
  std::vector<WaitItem> manyWaits;
  for (;;) {
    const bool moved = sweep();
    if (!open) return;
    if (moved) continue;
    WaitItem* waits = fewWaits;
    if (open > 8) {
      manyWaits.resize(open);
      waits = manyWaits.data();
    }
    size_t k = 0;
    for (size_t i = 0; i < nlanes; ++i)  // (a lane awaiting another's step waits on nothing itself)
      if (lanes[i].next < lanes[i].end && lanes[i].blocked.conn) waits[k++] = lanes[i].blocked;
    if (k == 0)
      throwError(gyreInternalError, std::string("plan ") + runner.plan().algorithm + "'s lanes await each other");
    try {
      ctx.waitUntil(std::span<const WaitItem>(waits, k), pass);
    } catch (const transport::MessageMismatch& m) {
      // Found while waiting (a socket's header read ahead): the step of an
      // open lane that receives from that peer can explain it.
      for (size_t i = 0; i < nlanes; ++i)
        if (lanes[i].next < lanes[i].end && runner.plan().steps[lanes[i].next].recvPeer == m.peer())
          runner.explain(runner.plan().steps[lanes[i].next], m);
      throw;
    }
  }
}

}  // namespace

void execute(const Plan& plan, const CallArgs& args, ExecContext& ctx) {
  Runner runner(plan, args, ctx);
  if (plan.lanes.empty()) {  // most plans: one lane, no bookkeeping
    LaneState single;
    single.end = static_cast<uint32_t>(plan.steps.size());
    runLanes(runner, &single, 1, ctx);
    return;
  }
  // Steps before the first lane are a prologue: done before any lane starts
  // (an in-place call saving its input, say).
  if (plan.lanes.front().begin > 0) {
    LaneState prologue;
    prologue.end = plan.lanes.front().begin;
    runLanes(runner, &prologue, 1, ctx);
  }
  const size_t nlanes = plan.lanes.size();
  LaneStates states(nlanes);
  LaneState* lanes = states.data();
  for (size_t i = 0; i < nlanes; ++i) {
    lanes[i].next = plan.lanes[i].begin;
    lanes[i].end = plan.lanes[i].end;
  }
  // (Steps a resolver appends while the lanes run are no epilogue's.)
  const auto planned = static_cast<uint32_t>(plan.steps.size());
  runner.setLanes(lanes, nlanes);
  runLanes(runner, lanes, nlanes, ctx);
  runner.lanesFinished();
  // Steps after the last lane are an epilogue: done once every lane is
  // (an AllToAllv's "done" messages, after both its sends and its reads).
  if (plan.lanes.back().end < planned) {
    LaneState epilogue;
    epilogue.next = plan.lanes.back().end;
    epilogue.end = planned;
    runLanes(runner, &epilogue, 1, ctx);
  }
}

}  // namespace gyre::collectives
