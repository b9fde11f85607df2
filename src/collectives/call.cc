#include "collectives/call.h"

#include "collectives/moe_route.h"
#include "collectives/seq_layout.h"

namespace gyre::collectives {

namespace {
const char* redopName(uint8_t r) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return r < 6 ? names[r] : "custom op";
}
}  // namespace

const char* opKindName(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: return "allreduce";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Reduce: return "reduce";
    case OpKind::AllGather: return "allgather";
    case OpKind::ReduceScatter: return "reducescatter";
    case OpKind::AllToAll: return "alltoall";
    case OpKind::AllToAllv: return "alltoallv";
    case OpKind::Gather: return "gather";
    case OpKind::Scatter: return "scatter";
    case OpKind::Barrier: return "barrier";
    case OpKind::SendRecv: return "send/recv";
    case OpKind::CommSplit: return "commsplit";
    case OpKind::CommGrow: return "commgrow";
    case OpKind::PeerAverage: return "peeraverage";
    case OpKind::SeqToHeads: return "seqtoheads";
    case OpKind::HeadsToSeq: return "headstoseq";
    case OpKind::MoeCounts: return "moe-counts";
    case OpKind::MoeDispatch: return "moe-dispatch";
    case OpKind::MoeCombine: return "moe-combine";
  }
  return "unknown operation";
}

CallTag makeTag(const CallDesc& d) {
  CallTag t;
  t.call = d.seq;
  t.count = d.count;
  t.root = d.root;
  t.op = static_cast<uint8_t>(d.kind);
  t.dtype = d.dtype;
  t.redop = d.redop;
  t.flags = static_cast<uint8_t>(d.codec << kCodecShift);
  return t;
}

CallDesc fromTag(const CallTag& t) {
  CallDesc d;
  d.kind = static_cast<OpKind>(t.op);
  d.dtype = t.dtype;
  d.redop = t.redop;
  d.root = t.root;
  d.count = t.count;
  d.seq = t.call;
  d.codec = static_cast<uint8_t>(codecOf(t));
  return d;
}

std::string describeCall(const CallDesc& d, int receiver, bool expected) {
  const char* type = kernels::dtypeName(static_cast<kernels::DType>(d.dtype));
  std::string s;
  if (d.kind == OpKind::SendRecv) {
    return std::string(expected ? "recv #" : "send #") + std::to_string(d.seq) + " (" + std::to_string(d.count) +
           " x " + type + " from rank " + std::to_string(d.root) +
           (!expected && receiver >= 0 ? " to rank " + std::to_string(receiver) : std::string()) + ")";
  }
  s = std::string(opKindName(d.kind)) + " #" + std::to_string(d.seq) + " (";
  if (d.kind == OpKind::Barrier || d.kind == OpKind::CommSplit || d.kind == OpKind::CommGrow)
    return s.substr(0, s.size() - 2);
  if (isSeqExchange(d.kind))
    return s + type + ", " + describeSeqLayout(d.count) +
           (d.root >= 0 ? ", a block of " + std::to_string(d.root) + " tokens" : std::string()) + ")";
  if (isMoeExchange(d.kind))
    return s + (d.kind == OpKind::MoeCounts ? std::string("uint64") : std::string(type)) + ", " +
           describeMoeShape(d.count) + (d.redop ? ", counts ahead of rows" : "") +
           (d.root >= 0 ? ", a block of " + std::to_string(d.root) + (d.kind == OpKind::MoeCounts ? " counts" : " rows")
                        : std::string()) +
           ")";
  s += d.kind == OpKind::AllToAllv ? std::string("per-peer counts") : std::to_string(d.count) + " x " + type;
  if (d.kind == OpKind::AllToAllv) s += std::string(" of ") + type;
  if (d.kind == OpKind::AllReduce || d.kind == OpKind::Reduce || d.kind == OpKind::ReduceScatter)
    s += std::string(", ") + redopName(d.redop);
  if (d.kind == OpKind::PeerAverage) {
    static const char* selections[] = {"shift_one", "ring", "random"};
    return s + ", " + (d.redop < 3 ? selections[d.redop] : "unknown peers") + ", step " + std::to_string(d.root) + ")";
  }
  if (d.codec) s += std::string(", ") + kernels::codecName(static_cast<kernels::Codec>(d.codec));
  if (d.root >= 0) s += ", root " + std::to_string(d.root);
  return s + ")";
}

}  // namespace gyre::collectives
