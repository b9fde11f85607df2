#include "collectives/compressed.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "collectives/steps.h"
#include "kernels/common/codec.h"

namespace gyre::collectives {

using kernels::Codec;
using kernels::codec::kChunk;

size_t CodecBlocks::begin(int j) const {
  const size_t chunks = kernels::codec::chunks(count);
  return std::min(count, chunks * static_cast<size_t>(j) / static_cast<size_t>(n) * kChunk);
}

namespace {

// A piece is at most this many chunks (1 MiB of float32): encoding one
// overlaps the wire carrying the one before, and the owner reduces a piece
// as soon as every rank's has arrived.
constexpr size_t kMaxPieceChunks = 64;

// Values per piece: whole chunks (each chunk's scale then covers a full
// chunk, as the codecs' accuracy assumes), as many as the link's largest
// message holds, at least one.
size_t pieceValues(Codec c, size_t linkBytes) {
  const size_t perChunk = kernels::messageBytes(c, kChunk);
  return std::clamp<size_t>(linkBytes / perChunk, 1, kMaxPieceChunks) * kChunk;
}

class Builder {
 public:
  Builder(const CallRequest& req, PlanEnv& env, Plan& plan)
      : plan_(plan),
        kind_(req.desc.kind),
        codec_(static_cast<Codec>(req.desc.codec)),
        n_(env.nranks()),
        me_(env.rank()),
        vs_(kernels::dtypeSize(req.values)),
        count_(req.desc.count) {
    for (int i = 1; i < n_; ++i) peers_.push_back((me_ + i) % n_);  // each rank starts with a different peer
    for (int q : peers_) plan_.addPeer(q);
    begins_.resize(static_cast<size_t>(n_) + 1);
    const CodecBlocks blocks{count_, n_};
    for (int j = 0; j <= n_; ++j)
      begins_[j] = kind_ == OpKind::AllReduce ? blocks.begin(j) : static_cast<size_t>(j) * count_;
    piece_ = pieceValues(codec_, env.chunkBytes(peers_));
  }

  void build() {
    const bool reduces = kind_ != OpKind::AllGather, gathers = kind_ != OpKind::ReduceScatter;
    const size_t mine = size(me_);
    // Scratch: the owner's float32 sum of one piece, a message slot per
    // peer for what we send it, the pieces every peer sends us, and our
    // block's encoded pieces (the result, or our AllGather input).
    const size_t acc = reduces ? alloc(std::min(piece_, mine) * sizeof(float)) : 0;
    std::vector<size_t> slot(n_), inbox(n_);
    if (reduces) {
      for (int q : peers_) slot[q] = alloc(kernels::messageBytes(codec_, std::min(piece_, size(q))));
      for (int q : peers_) inbox[q] = alloc(blockMessageBytes(mine));
    }
    const size_t encoded = gathers ? alloc(blockMessageBytes(mine)) : 0;

    // Receiving lanes, one per peer: its contributions to our block, then
    // its block of the result.
    std::vector<std::vector<uint32_t>> received(n_);
    for (int q : peers_) {
      plan_.beginLane();
      if (reduces)
        eachPiece(mine, [&](size_t off, size_t len, size_t at) {
          received[q].push_back(index());
          add(plan_, Prim::Recv, BufId::Scratch, 0, BufId::Scratch, inbox[q] + at, messageBytes(len), -1, q);
        });
      if (gathers)
        eachPiece(size(q), [&](size_t off, size_t len, size_t) {
          codecStep(Prim::RecvDecode, BufId::Output, 0, BufId::Output, outputAt(q, off), len).recvPeer = q;
        });
    }

    // The reducing (or, for AllGather, encoding) lane: our block, piece by
    // piece.
    std::vector<uint32_t> ready;  // by piece: the step after which it may leave
    plan_.beginLane();
    size_t k = 0;
    eachPiece(mine, [&](size_t off, size_t len, size_t at) {
      if (!reduces) {  // AllGather: our input, encoded once for every peer
        ready.push_back(index());
        Step& e = codecStep(Prim::Encode, BufId::Input, off * vs_, BufId::Scratch, encoded + at, len);
        e.residual = Residual::Input;
        e.remoteOffset = off;
        codecStep(Prim::Decode, BufId::Scratch, encoded + at, BufId::Output, outputAt(me_, off), len);
        return;
      }
      // The sum in rank order (the same bits on every run), in float32.
      for (int r = 0; r < n_; ++r) {
        if (r == me_) {
          codecStep(Prim::Widen, BufId::Input, (begins_[me_] + off) * vs_, BufId::Scratch, acc, len).accumulate = r > 0;
        } else {
          add(plan_, Prim::Await, BufId::Scratch, 0, BufId::Scratch, 0, received[r][k]);
          codecStep(Prim::Decode, BufId::Scratch, inbox[r] + at, BufId::Scratch, acc, len).accumulate = r > 0;
        }
      }
      codecStep(Prim::Divide, BufId::Scratch, acc, BufId::Scratch, acc, len);
      if (!gathers) {  // ReduceScatter: the sum, in the caller's type, is ours alone
        Step& out = codecStep(Prim::Decode, BufId::Scratch, acc, BufId::Output, off * vs_, len);
        out.codec = Codec::None;  // float32, as a message of no codec
      } else {
        ready.push_back(index());
        Step& e = codecStep(Prim::Encode, BufId::Scratch, acc, BufId::Scratch, encoded + at, len);
        e.residual = Residual::Result;
        e.remoteOffset = off;
        codecStep(Prim::Decode, BufId::Scratch, encoded + at, BufId::Output, outputAt(me_, off), len);
      }
      ++k;
    });

    // Sending lanes, one per peer: its block of our input, encoded piece
    // by piece, then our encoded block as each piece is ready.
    for (int q : peers_) {
      plan_.beginLane();
      if (reduces)
        eachPiece(size(q), [&](size_t off, size_t len, size_t) {
          const size_t value = begins_[q] + off;
          Step& e = codecStep(Prim::Encode, BufId::Input, value * vs_, BufId::Scratch, slot[q], len);
          e.residual = Residual::Input;
          e.remoteOffset = value;
          add(plan_, Prim::Send, BufId::Scratch, slot[q], BufId::Scratch, 0, messageBytes(len), q);
        });
      if (gathers) {
        size_t piece = 0;
        eachPiece(mine, [&](size_t, size_t len, size_t at) {
          add(plan_, Prim::Await, BufId::Scratch, 0, BufId::Scratch, 0, ready[piece++]);
          add(plan_, Prim::Send, BufId::Scratch, encoded + at, BufId::Scratch, 0, messageBytes(len), q);
        });
      }
    }
    plan_.closeLane();
    plan_.scratchElems = top_;
  }

 private:
  size_t size(int j) const { return begins_[j + 1] - begins_[j]; }
  size_t messageBytes(size_t values) const { return kernels::messageBytes(codec_, values); }
  // The bytes of a block's pieces' messages, one after another.
  size_t blockMessageBytes(size_t values) const {
    size_t bytes = 0;
    eachPiece(values, [&](size_t, size_t len, size_t) { bytes += messageBytes(len); });
    return bytes;
  }
  // f(offset, length, at) for each piece of a block of `values`, at: where
  // its message starts among the block's messages.
  template <class F>
  void eachPiece(size_t values, F&& f) const {
    size_t at = 0;
    forPieces(values, piece_, [&](size_t off, size_t len) {
      f(off, len, at);
      at += messageBytes(len);
    });
  }
  // Byte offset of value `off` of rank j's block in the output.
  size_t outputAt(int j, size_t off) const {
    return (kind_ == OpKind::AllReduce ? begins_[j] + off : static_cast<size_t>(j) * count_ + off) * vs_;
  }
  size_t alloc(size_t bytes) {
    const size_t at = (top_ + 63) / 64 * 64;  // cache-line aligned: the kernels stream through them
    top_ = at + bytes;
    return at;
  }
  uint32_t index() const { return static_cast<uint32_t>(plan_.steps.size()); }
  Step& codecStep(Prim prim, BufId src, size_t srcOff, BufId dst, size_t dstOff, size_t values) {
    Step& s = add(plan_, prim, src, srcOff, dst, dstOff, values);
    s.codec = codec_;
    return s;
  }

  Plan& plan_;
  const OpKind kind_;
  const Codec codec_;
  const int n_, me_;
  const size_t vs_, count_;
  std::vector<int> peers_;
  std::vector<size_t> begins_;  // rank j's block: [begins_[j], begins_[j + 1]) of the values
  size_t piece_ = kChunk;
  size_t top_ = 0;  // scratch bytes allotted
};

}  // namespace

void buildCompressed(const CallRequest& req, PlanEnv& env, Plan& plan) {
  const OpKind kind = req.desc.kind;
  if (kind != OpKind::AllReduce && kind != OpKind::ReduceScatter && kind != OpKind::AllGather)
    throwError(gyreInvalidArgument, std::string(opKindName(kind)) + " has no compressed form");
  const size_t n = static_cast<size_t>(env.nranks()), vs = kernels::dtypeSize(req.values);
  const size_t count = req.desc.count;
  plan.reset("compressed");
  plan.rank = env.rank();
  plan.inputElems = (kind == OpKind::ReduceScatter ? n * count : count) * vs;
  plan.outputElems = (kind == OpKind::AllGather ? n * count : count) * vs;
  if (n == 1) {  // nothing crosses a wire: the values as they are
    if (count) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count * vs);
    return;
  }
  Builder(req, env, plan).build();
}

}  // namespace gyre::collectives
