// A plan is what an algorithm produces: for this rank, lists of steps, each
// moving one piece (at most one message) between buffers and peers. The
// executor runs any plan over any transport; an algorithm is a plan builder,
// never a loop over bytes.
//
// Steps form lanes: each lane runs in order, lanes run side by side (a group
// of sends and receives progresses in any order; an AllToAll sends and
// receives at once). Steps before the first lane are a prologue, done before
// any lane starts; steps after the last lane's end are an epilogue, done once
// every lane has finished. The rule that keeps both ends of a connection in step:
// within one call, all messages to a peer are sent by one lane, and all
// messages from a peer are received by one lane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "collectives/call.h"
#include "kernels/cpu/codec.h"
#include "kernels/cpu/reduce.h"
#include "transport/transport.h"

namespace gyre::collectives {

enum class Prim : uint8_t {
  Copy,                // dst = src (local)
  Reduce,              // dst = dst (+) src (local)
  Send,                // peer <- src
  Recv,                // dst <- peer
  RecvReduce,          // dst = recv (+) src
  RecvReduceSend,      // next <- recv (+) src
  RecvReduceCopySend,  // dst = recv (+) src, and next <- the same
  RecvCopySend,        // dst = recv, and next <- the same
  CopySend,            // dst = src, and next <- the same, from one read of src
  // Single copy within a host (the shared-memory transport's cross-process
  // reads): peers first tell each other where their buffers are.
  SendAddresses,  // peer <- (address of src, address of dst, count): where it may read us
  RecvAddresses,  // what the peer told us, kept for this call
  ReadCopy,       // dst = the peer's `remote` buffer (as it told us) + remoteOffset
  ReadReduce,     // dst = src (+) the peer's remote data (read through the start of Scratch)
  // dst = every rank's `remote` region (+ remoteOffset) reduced in rank
  // order, ours from src; with toAll the result also goes to every peer's
  // output at dstOffset (Plan::peersWriteOutput). One pass over all ranks'
  // data: the device's many-input kernel, or on the host pieces read through
  // Scratch (2 pieces of it).
  ReduceFromAll,
  // Compressed collectives (compressed.h, docs/compression.md). A codec plan
  // is a byte plan: CallArgs::elemSize is 1, offsets are bytes, and the
  // plain steps move bytes (a message is a Send or Recv of its bytes). These
  // steps' count is in values (CallArgs::values, or float32 in Scratch).
  Encode,      // dst (a message) = step.codec's encoding of src, with the step's residual
  Decode,      // dst = the message at src decoded (accumulate: dst += it, float32)
  RecvDecode,  // dst = the message from recvPeer decoded (accumulate: dst += it)
  Widen,       // dst (float32 in Scratch) = src as float32 (accumulate: dst += it)
  Divide,      // dst (float32 in Scratch) /= the average's divisor
  Await,       // waits until plan.steps[count], in another lane, is done
  // The rest of this lane is known only now (CallArgs::resolver): a
  // receive whose size came in the lane's last message (the pipelined MoE
  // dispatch, moe_exchange.h).
  Resolve,
};

// A step's primitive in words ("recv-reduce-send"): traces, the simulator.
const char* primName(Prim p);

// Which error-feedback residual an Encode step keeps (CallArgs::residuals).
enum class Residual : uint8_t { None, Input, Result };

// Input and Output are the caller's buffers; Scratch is the communicator's,
// sized by the plan (Plan::scratchElems). Values from kFirstExtra up name
// CallArgs::extra[value - kFirstExtra] (a group's many send/recv buffers).
enum class BufId : uint16_t { Input, Output, Scratch };
constexpr uint16_t kFirstExtraBuffer = 3;
inline BufId extraBuffer(uint16_t i) { return static_cast<BufId>(kFirstExtraBuffer + i); }

// Step::blockCount of a message that is no AllToAllv block's.
constexpr uint64_t kNoBlock = ~uint64_t{0};

// A block that is not one run of elements: `rows` rows, each the
// concatenation of its segments, segment j of row i at element
// base + i * stride of buffer buf (the sequence exchanges' per-peer slices
// of every token's heads, seq_exchange.cc). A step whose source or
// destination is a view counts its offset in that packed order, and the
// executor gathers into, or scatters from, the message's own buffer (a
// shared-memory slot, a socket's staging): one copy, as a contiguous block's
// message costs, with no packing pass of its own.
struct ViewSegment {
  BufId buf = BufId::Input;
  size_t base = 0, stride = 0, len = 0;  // elements
};
constexpr size_t kMaxViewSegments = 6;
struct View {
  size_t rows = 0;
  size_t rowLen = 0;  // the segments' lengths, summed
  uint8_t segments = 0;
  ViewSegment seg[kMaxViewSegments];
  // A segment of len 0 is left out.
  void add(BufId buf, size_t base, size_t stride, size_t len) {
    if (len == 0) return;
    if (segments == kMaxViewSegments) throwError(gyreInternalError, "a view of more than 6 segments");
    seg[segments++] = ViewSegment{buf, base, stride, len};
    rowLen += len;
  }
};

struct Step {
  Prim prim = Prim::Copy;
  BufId src = BufId::Input;
  BufId dst = BufId::Output;
  bool recvFirst = true;     // the received (or dst, for Reduce) data is the left operand
  bool finalReduce = false;  // the result is final: apply the average's divisor
  uint16_t tag = 0;          // index into Plan::tags
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  size_t srcOffset = 0;  // elements
  size_t dstOffset = 0;  // elements
  size_t count = 0;      // elements
  BufId remote = BufId::Input;  // ReadCopy/ReadReduce: which address the peer sent (src's or dst's)
  size_t remoteOffset = 0;      // elements from it
  // AllToAllv: the element count of the whole block this message belongs
  // to (the sender's sendcounts[q], the receiver's recvcounts[p]). It takes
  // the place of the call's count in the message's tag, so a receiver that
  // expects a different count fails at the block's first message, however
  // the block is cut into pieces, and can name both counts.
  uint64_t blockCount = kNoBlock;
  // 1 + the index in Plan::views of the view the source (Send, Copy) or the
  // destination (Recv, Copy, Reduce) is, whose offset then counts in its
  // packed order; 0: a run of elements of src or dst.
  uint32_t srcView = 0, dstView = 0;
  // Codec steps: the message's wire format, whether a decode adds into dst,
  // and the residual an Encode keeps (from element remoteOffset of it).
  kernels::Codec codec = kernels::Codec::None;
  bool accumulate = false;
  Residual residual = Residual::None;
  bool toAll = false;  // ReduceFromAll: write the result to every peer's output too
};

// RecvAddresses: a count that the peer may offer anything.
constexpr size_t kAnyCount = ~size_t{0};

struct Lane {
  uint32_t begin = 0;
  uint32_t end = 0;
};

struct Plan {
  const char* algorithm = "";
  std::vector<int> peers;  // every peer a step talks to
  std::vector<Step> steps;
  std::vector<Lane> lanes;  // empty: one lane of all steps
  std::vector<CallTag> tags;
  std::vector<View> views;  // Step::srcView, dstView
  size_t scratchElems = 0;
  // The call's input and output buffers in elements (planCall sets them):
  // what this rank registers for peers that read it, which they may not
  // read past.
  size_t inputElems = 0, outputElems = 0;
  int rank = -1;  // this rank, where the builder says (errors that name both ends of a block)
  // Peers write parts of our output (ReduceFromAll's toAll): those parts are
  // final only when the plan ends, so no output piece leaves early.
  bool peersWriteOutput = false;

  void reset(const char* name) {
    algorithm = name;
    rank = -1;
    peers.clear();
    steps.clear();  // keeps capacity: no allocation in steady state
    lanes.clear();
    views.clear();
    scratchElems = 0;
    inputElems = outputElems = 0;
    peersWriteOutput = false;
  }
  // Steps pushed after this call form a new lane (until the next call).
  void beginLane() {
    closeLane();
    lanes.push_back(Lane{static_cast<uint32_t>(steps.size()), static_cast<uint32_t>(steps.size())});
  }
  void closeLane() {
    if (!lanes.empty()) lanes.back().end = static_cast<uint32_t>(steps.size());
  }
  // Keeps v; returns what Step::srcView or dstView name it by.
  uint32_t addView(const View& v) {
    views.push_back(v);
    return static_cast<uint32_t>(views.size());
  }
  void addPeer(int p) {
    for (int q : peers)
      if (q == p) return;
    peers.push_back(p);
  }
};

// An input that is still arriving while the call runs: a device call's
// input, copied into host staging in pieces on its stream, so that the call
// starts on the first piece instead of the whole (docs/gpu.md, "Pipelined
// staging"). The executor asks before a step reads the input.
class InputArrival {
 public:
  // Returns once the input's first `bytes` are in place (more than the
  // input: all of it), with how many are; an Error when they never will be
  // (an abort, the timeout, a failed stream).
  virtual size_t waitFor(size_t bytes) = 0;

 protected:
  ~InputArrival() = default;
};

// An output that leaves while the call runs: a device call's results,
// copied out of host staging in pieces on its stream, each once no later
// step of the call writes it. The executor says when each piece is final.
class OutputDeparture {
 public:
  // Where the pieces end, in output bytes, ascending; the last is the
  // output's end.
  virtual const std::vector<size_t>& pieceEnds() const = 0;
  // No step writes piece k any more (called once per piece, in any order).
  virtual void pieceFinal(size_t k) = 0;

 protected:
  ~OutputDeparture() = default;
};

// A call whose buffers are device memory, run by the host proxy (docs/gpu.md,
// "Direct device calls"): the local copies and reductions are the device's,
// enqueued in order on a stream of its own; the executor makes them
// complete (flush) before any message that tells a peer something, so a
// peer never reads a slice before its reduction ran, nor returns while our
// reads of it are still queued. The single-copy plans' messages are
// addresses and empty notices; the others' pieces travel as device messages
// (transport::kDeviceMessages: written into our device slot, read from the
// peer's), flushed before a message is published or released.
class DeviceEngine {
 public:
  // The GPU it runs on (where our device messages' slots are).
  virtual int device() const = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // t's pointers are device-accessible; streamOut0 is ignored.
  virtual void reduce(const kernels::ReduceTask& t) = 0;
  // The same for many inputs and outputs (ReduceFromAll).
  virtual void reduceAll(const kernels::ReduceAllTask& t) = 0;
  // Everything enqueued so far has run (an Error when the device failed,
  // or the wait was ended by an abort or the timeout).
  virtual void flush() = 0;
  // Pinned host memory for a read the transport can only make into host
  // memory (a peer that offered host memory): valid until the next call to
  // it; what was enqueued from it must be flushed first.
  virtual void* hostBounce(size_t bytes) = 0;
  // At least `bytes` of device memory for the plan's scratch (Scratch).
  virtual void* scratch(size_t bytes) = 0;

 protected:
  ~DeviceEngine() = default;
};

// Makes the rest of a lane when it reaches a Resolve step: appends its
// steps to the plan (which it owns) and says where they are. The lane goes
// on with them; they belong to no other lane, nor to the epilogue. Not
// ready: the lane waits (for what other lanes receive) and asks again.
class LaneResolver {
 public:
  struct Range {
    bool ready = false;
    uint32_t begin = 0, end = 0;
  };
  virtual Range resolve(const Step& s) = 0;

 protected:
  ~LaneResolver() = default;
};

// GYRE_TRACE_STEPS: told of every step of a plan once it is done, with its
// index in the plan, the lane that ran it and when it began (the
// executor's first attempt at it) and ended, on the steady clock
// (base/clock.h). Null (the usual case): nothing is timed. Core fills it
// and writes the trace; the executor knows no file.
class StepObserver {
 public:
  virtual void stepDone(const Step& s, uint32_t index, size_t lane, int64_t startNs, int64_t endNs) = 0;

 protected:
  ~StepObserver() = default;
};

// What one call operates on.
struct CallArgs {
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
  void* const* extra = nullptr;
  kernels::DType dtype = kernels::DType::Float32;
  kernels::Op op = kernels::Op::Sum;
  uint32_t divisor = 1;  // average: the rank count
  size_t elemSize = 4;
  // The output is too large to stay in cache: write it with non-temporal
  // stores (never the FIFO slots, which a peer reads next).
  bool streamOutput = false;
  // Null: the input is all there. Never set for an in-place call (its
  // output is its input).
  InputArrival* inputArrival = nullptr;
  // Null: the output is taken when the call is done. Never set for an
  // in-place call.
  OutputDeparture* outputDeparture = nullptr;
  // Set: input, output and scratch are device memory, registered with peers
  // as such, and moved by the device (DeviceEngine).
  DeviceEngine* engine = nullptr;
  // Set for a plan with Resolve steps.
  LaneResolver* resolver = nullptr;
  // Set: every step is timed and told (GYRE_TRACE_STEPS).
  StepObserver* stepObserver = nullptr;
  // A codec plan's values: the caller's type (float32, float16, bfloat16;
  // dtype is Uint8 and elemSize 1), and its error-feedback residuals
  // (float32; null: none kept): Input's indexed like the input's values,
  // Result's like this rank's block of the result (compressed.h).
  kernels::DType values = kernels::DType::Float32;
  float* residuals[3] = {nullptr, nullptr, nullptr};  // by Residual
};

}  // namespace gyre::collectives
