#include "core/trace_steps.h"

namespace gyre::core {

namespace {

const char* stepName(collectives::Prim p) {
  using collectives::Prim;
  switch (p) {
    case Prim::Copy: return "copy";
    case Prim::Reduce: return "reduce";
    case Prim::Send: return "send";
    case Prim::Recv: return "recv";
    case Prim::RecvReduce: return "recv-reduce";
    case Prim::RecvReduceSend: return "recv-reduce-send";
    case Prim::RecvReduceCopySend: return "recv-reduce-copy-send";
    case Prim::RecvCopySend: return "recv-copy-send";
    case Prim::CopySend: return "copy-send";
    case Prim::SendAddresses: return "send-addresses";
    case Prim::RecvAddresses: return "recv-addresses";
    case Prim::ReadCopy: return "read-copy";
    case Prim::ReadReduce: return "read-reduce";
    case Prim::Encode: return "encode";
    case Prim::Decode: return "decode";
    case Prim::RecvDecode: return "recv-decode";
    case Prim::Widen: return "widen";
    case Prim::Divide: return "divide";
    case Prim::Await: return "await";
    case Prim::Resolve: return "resolve";
  }
  return "step";
}

}  // namespace

void TraceSteps::stepDone(const collectives::Step& s, uint32_t index, size_t lane, int64_t startNs, int64_t endNs) {
  trace::Step t;
  t.name = stepName(s.prim);
  t.index = index;
  t.lane = static_cast<uint32_t>(lane);
  t.from = s.recvPeer;
  t.to = s.sendPeer;
  // (An Await's count is a step's index, not elements; a codec step's
  // elements are its values, in a byte plan.)
  t.bytes = s.prim == collectives::Prim::Await ? 0 : s.count * elemSize_;
  t.startNs = startNs;
  t.endNs = endNs;
  steps_.push_back(t);
}

void TraceSteps::flush(int row) {
  trace::recordSteps(row, steps_);
  steps_.clear();
}

}  // namespace gyre::core
