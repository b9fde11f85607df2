// What a call is, as the ranks must agree on it: the operation, type,
// reduction, root and count, and its sequence number. It travels in every
// message (as a transport tag), so a rank that receives a message from a
// different call can say exactly which two calls disagree.
#pragma once

#include <bit>
#include <cstdint>
#include <string>

#include "kernels/cpu/codec.h"
#include "kernels/cpu/reduce.h"
#include "transport/transport.h"

namespace gyre::collectives {

enum class OpKind : uint8_t {
  AllReduce = 1,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllToAllv,
  Gather,
  Scatter,
  Barrier,
  SendRecv,  // a point-to-point message: root is the sender
  // Not an operation of its own: the tag of gyreCommSplit's exchange (an
  // AllGather), so that a rank calling something else meanwhile fails with
  // a mismatch naming both calls instead of waiting out its timeout.
  CommSplit,
  // Decentralized averaging with a few peers (peer_average.h): redop holds
  // the peer selection, root the step's low 31 bits.
  PeerAverage,
  // DeepSpeed-Ulysses' exchanges (seq_exchange.h): count is the layout's
  // code (seq_layout.h), and each message's root the tokens of its block.
  SeqToHeads,
  HeadsToSeq,
  // Mixture-of-experts exchanges (moe_exchange.h): count is the routing's
  // shape code (moe_route.h), and each message's root the rows (or count
  // entries) of its block.
  MoeCounts,
  MoeDispatch,
  MoeCombine,
  // gyreCommGrow's agreement among the running ranks (as CommSplit).
  CommGrow,
};

inline bool isSeqExchange(OpKind k) { return k == OpKind::SeqToHeads || k == OpKind::HeadsToSeq; }
inline bool isMoeExchange(OpKind k) {
  return k == OpKind::MoeCounts || k == OpKind::MoeDispatch || k == OpKind::MoeCombine;
}
// Whether a call's tag count names its shape (and a block's count goes in root).
inline bool countIsShape(OpKind k) { return isSeqExchange(k) || isMoeExchange(k); }

const char* opKindName(OpKind k);

struct CallDesc {
  OpKind kind = OpKind::AllReduce;
  uint8_t dtype = 0;   // gyreDataType_t
  uint8_t redop = 0;   // gyreRedOp_t (0 where none applies)
  int32_t root = -1;   // -1 where none applies
  uint64_t count = 0;  // per the API's meaning for the operation; 0 for the v-variants
  uint64_t seq = 0;    // the communicator's call number (per peer pair for point-to-point)
  // A compressed collective's codec (kernels::Codec; 0: none): in the tag,
  // so that ranks using different codecs are told so by name.
  uint8_t codec = 0;
};

// What a message's tag says of the call it belongs to: written into the
// transport's opaque MessageTag (toWire) and read back from a mismatch
// (fromWire), bit for bit.
struct CallTag {
  uint64_t call = 0;
  uint64_t count = 0;
  int32_t root = 0;
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  uint8_t flags = 0;
  bool operator==(const CallTag&) const = default;
};
static_assert(sizeof(CallTag) == sizeof(transport::MessageTag));
// CallTag::flags: bit 0 is the executor's (an address message), bits 1-3
// the codec.
constexpr int kCodecShift = 1;
inline kernels::Codec codecOf(const CallTag& t) { return static_cast<kernels::Codec>((t.flags >> kCodecShift) & 7); }
// A message's block count (Step::blockCount) in its tag: in count for
// AllToAllv, in root for the sequence exchanges, whose count names their
// layout.
inline void setBlockCount(CallTag& t, uint64_t n) {
  if (countIsShape(static_cast<OpKind>(t.op))) {
    t.root = static_cast<int32_t>(n);
  } else {
    t.count = n;
  }
}
inline transport::MessageTag toWire(const CallTag& t) { return std::bit_cast<transport::MessageTag>(t); }
inline CallTag fromWire(const transport::MessageTag& t) { return std::bit_cast<CallTag>(t); }

CallTag makeTag(const CallDesc& d);
CallDesc fromTag(const CallTag& t);
// "allreduce #7 (1000 x float32, sum)"; a point-to-point message is
// described from its receiver's side: "send #3 (100 x int32 from rank 2 to
// rank 5)" as it arrived, "recv #3 (100 x int32 from rank 2)" as expected.
std::string describeCall(const CallDesc& d, int receiver = -1, bool expected = false);

// A call's power-of-two size class: 0 for 0 bytes, else k where
// 2^(k-1) <= bytes < 2^k. The choice log and the online tuner's books are
// kept per class.
inline int sizeClassOf(size_t bytes) { return bytes ? 64 - __builtin_clzll(bytes) : 0; }

}  // namespace gyre::collectives
