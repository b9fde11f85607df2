#include "collectives/compressed.h"

#include <algorithm>
#include <functional>
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
constexpr uint32_t kNoStep = ~uint32_t{0};

// Values per piece: whole chunks (each chunk's scale then covers a full
// chunk, as the codecs' accuracy assumes), as many as the link's largest
// message holds, at least one.
size_t pieceValues(Codec c, size_t linkBytes) {
  const size_t perChunk = kernels::messageBytes(c, kChunk);
  return std::clamp<size_t>(linkBytes / perChunk, 1, kMaxPieceChunks) * kChunk;
}

// Where a group's contributions come from: the caller's input (in its
// type), or float32 sums in scratch (the hierarchical plan's host sums),
// with the step after which each piece of them is in place.
struct Source {
  BufId buf = BufId::Input;
  size_t at = 0;  // bytes: where value `base` of the range is
  size_t valueBytes = 4;
  std::function<uint32_t(size_t value)> readyAfter;  // kNoStep: in place from the start
};

// One compressed collective among `members` (ranks, in order) over the
// values [base, base + blocks' total) of the tensor: member j's block is
// [base + begins[j], base + begins[j + 1]). The plan's steps for this
// rank, in lanes (compressed.h). Residuals and output are indexed by the
// tensor's values.
class GroupBuilder {
 public:
  GroupBuilder(Plan& plan, OpKind kind, Codec codec, std::vector<int> members, int me, std::vector<size_t> begins,
               size_t base, size_t outputValueBytes, size_t piece, Source source)
      : plan_(plan),
        kind_(kind),
        codec_(codec),
        members_(std::move(members)),
        me_(me),
        begins_(std::move(begins)),
        base_(base),
        vs_(outputValueBytes),
        piece_(piece),
        source_(std::move(source)) {
    const int n = static_cast<int>(members_.size());
    for (int i = 1; i < n; ++i) peers_.push_back((me_ + i) % n);  // each member starts with a different peer
    for (int q : peers_) plan_.addPeer(members_[q]);
  }

  // Appends the lanes. outputReady (may be null): receives, for each value
  // piece of the output this rank writes, the step that writes it.
  void build(std::vector<std::pair<size_t, uint32_t>>* outputReady = nullptr) {
    const int n = static_cast<int>(members_.size());
    const bool reduces = kind_ != OpKind::AllGather, gathers = kind_ != OpKind::ReduceScatter;
    const size_t mine = size(me_);
    // Scratch: the owner's float32 sum of one piece, a message slot per
    // peer for what we send it, the pieces every peer sends us, and our
    // block's encoded pieces (the result, or our AllGather input).
    const size_t acc = reduces ? alloc(std::min(piece_, mine) * sizeof(float)) : 0;
    std::vector<size_t> slot(n), inbox(n);
    if (reduces) {
      for (int q : peers_) slot[q] = alloc(kernels::messageBytes(codec_, std::min(piece_, size(q))));
      for (int q : peers_) inbox[q] = alloc(blockMessageBytes(mine));
    }
    const size_t encoded = gathers ? alloc(blockMessageBytes(mine)) : 0;

    // Receiving lanes, one per peer: its contributions to our block, then
    // its block of the result.
    std::vector<std::vector<uint32_t>> received(n);
    for (int q : peers_) {
      plan_.beginLane();
      if (reduces)
        eachPiece(mine, [&](size_t, size_t len, size_t at) {
          received[q].push_back(index());
          add(plan_, Prim::Recv, BufId::Scratch, 0, BufId::Scratch, inbox[q] + at, messageBytes(len), -1, members_[q]);
        });
      if (gathers)
        eachPiece(size(q), [&](size_t off, size_t len, size_t) {
          if (outputReady) outputReady->push_back({begins_[q] + off, index()});
          codecStep(Prim::RecvDecode, BufId::Output, 0, BufId::Output, outputAt(q, off), len).recvPeer = members_[q];
        });
    }

    // The reducing (or, for AllGather, encoding) lane: our block, piece by
    // piece.
    std::vector<uint32_t> ready;  // by piece: the step after which it may leave
    plan_.beginLane();
    size_t k = 0;
    eachPiece(mine, [&](size_t off, size_t len, size_t at) {
      const size_t value = begins_[me_] + off;
      awaitSource(value);
      if (!reduces) {  // AllGather: our input (all of it our block), encoded once for every peer
        ready.push_back(index());
        Step& e = codecStep(Prim::Encode, source_.buf, sourceAt(off), BufId::Scratch, encoded + at, len);
        keep(e, Residual::Input, off);
        if (outputReady) outputReady->push_back({value, index()});
        codecStep(Prim::Decode, BufId::Scratch, encoded + at, BufId::Output, outputAt(me_, off), len);
        return;
      }
      // The sum in member order (the same bits on every run), in float32.
      for (int r = 0; r < n; ++r) {
        if (r == me_) {
          codecStep(Prim::Widen, source_.buf, sourceAt(value), BufId::Scratch, acc, len).accumulate = r > 0;
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
        keep(e, Residual::Result, value);
        if (outputReady) outputReady->push_back({value, index()});
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
          awaitSource(value);
          Step& e = codecStep(Prim::Encode, source_.buf, sourceAt(value), BufId::Scratch, slot[q], len);
          keep(e, Residual::Input, value);
          add(plan_, Prim::Send, BufId::Scratch, slot[q], BufId::Scratch, 0, messageBytes(len), members_[q]);
        });
      if (gathers) {
        size_t piece = 0;
        eachPiece(mine, [&](size_t, size_t len, size_t at) {
          add(plan_, Prim::Await, BufId::Scratch, 0, BufId::Scratch, 0, ready[piece++]);
          add(plan_, Prim::Send, BufId::Scratch, encoded + at, BufId::Scratch, 0, messageBytes(len), members_[q]);
        });
      }
    }
    plan_.closeLane();
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
  size_t size(int j) const { return begins_[j + 1] - begins_[j]; }

 private:
  size_t messageBytes(size_t values) const { return kernels::messageBytes(codec_, values); }
  // The bytes of a block's pieces' messages, one after another.
  size_t blockMessageBytes(size_t values) const {
    size_t bytes = 0;
    eachPiece(values, [&](size_t, size_t len, size_t) { bytes += messageBytes(len); });
    return bytes;
  }
  size_t sourceAt(size_t value) const { return source_.at + value * source_.valueBytes; }
  // Byte offset in the output of value `off` of member j's block.
  size_t outputAt(int j, size_t off) const { return (base_ + begins_[j] + off) * vs_; }
  void awaitSource(size_t value) {
    const uint32_t step = source_.readyAfter ? source_.readyAfter(value) : kNoStep;
    if (step != kNoStep) add(plan_, Prim::Await, BufId::Scratch, 0, BufId::Scratch, 0, step);
  }
  // An Encode keeps residual r from the tensor's value `value` (of this
  // group's range) on.
  void keep(Step& e, Residual r, size_t value) const {
    e.residual = r;
    e.remoteOffset = base_ + value;
  }
  size_t alloc(size_t bytes) {
    const size_t at = (plan_.scratchElems + 63) / 64 * 64;  // cache-line aligned: the kernels stream through them
    plan_.scratchElems = at + bytes;                          // (a byte plan: bytes)
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
  const std::vector<int> members_;
  const int me_;
  const std::vector<size_t> begins_;  // member j's block: [begins_[j], begins_[j + 1]) of the range
  const size_t base_, vs_, piece_;
  const Source source_;
  std::vector<int> peers_;  // indices into members_
};

// The step recorded for the piece that starts at `value`.
uint32_t stepFor(const std::vector<std::pair<size_t, uint32_t>>& steps, size_t value) {
  for (const auto& [v, step] : steps)
    if (v == value) return step;
  throwError(gyreInternalError, "hierarchical compressed plan: a piece without its step");
}

// The ranks of each host, in rank order; empty if the hosts hold different
// numbers of ranks (the hierarchical plan needs a partner on every host).
std::vector<std::vector<int>> ranksByHost(PlanEnv& env) {
  std::vector<std::vector<int>> hosts;
  for (int r = 0; r < env.nranks(); ++r) {
    const size_t h = static_cast<size_t>(env.hostIndex(r));
    if (hosts.size() <= h) hosts.resize(h + 1);
    hosts[h].push_back(r);
  }
  for (const std::vector<int>& h : hosts)
    if (h.size() != hosts[0].size()) return {};
  return hosts;
}

// Hierarchical compressed AllReduce (Bagua's arrangement): within a host,
// full precision over shared memory; between hosts, the codec.
//   A. Local rank l of a host owns shard l of the tensor (CodecBlocks over
//      the host's L ranks) and sums it in float32, its host's ranks in rank
//      order, from float32 messages (its own input widened in place).
//   B. The l-th ranks of all hosts run the compressed AllReduce on their
//      shard's host sums (a GroupBuilder over the sums in scratch), each
//      piece starting as soon as its sum is complete.
//   C. Each decoded piece of the result goes, as it is, to the host's
//      other ranks.
// Every rank decodes or copies the same messages: the same bits.
void buildHierarchical(const CallRequest& req, PlanEnv& env, Plan& plan,
                       const std::vector<std::vector<int>>& hosts) {
  const Codec codec = static_cast<Codec>(req.desc.codec);
  const size_t count = req.desc.count, vs = kernels::dtypeSize(req.values);
  const int me = env.rank(), L = static_cast<int>(hosts[0].size()), H = static_cast<int>(hosts.size());
  const std::vector<int>& local = hosts[static_cast<size_t>(env.hostIndex(me))];
  const int l = static_cast<int>(std::find(local.begin(), local.end(), me) - local.begin());
  std::vector<int> partners;  // the l-th rank of every host
  for (const std::vector<int>& h : hosts) partners.push_back(h[static_cast<size_t>(l)]);
  const int hostIdx = env.hostIndex(me);
  const CodecBlocks shards{count, L};
  const size_t shardBegin = shards.begin(l), shardLen = shards.size(l);
  std::vector<int> localPeers;
  for (int r : local)
    if (r != me) localPeers.push_back(r);
  std::vector<int> remotePeers;
  for (int r : partners)
    if (r != me) remotePeers.push_back(r);
  // Local messages (float32, or the caller's type for the results) of at
  // most the shared-memory link's message; remote pieces as the network
  // carries them.
  const size_t localBytes = env.chunkBytes(localPeers);
  const size_t piece = pieceValues(codec, env.chunkBytes(remotePeers));
  const size_t sub = std::max<size_t>(1, localBytes / std::max<size_t>(sizeof(float), vs));
  std::vector<size_t> begins(static_cast<size_t>(H) + 1);
  const CodecBlocks interBlocks{shardLen, H};
  for (int j = 0; j <= H; ++j) begins[j] = interBlocks.begin(j);
  auto localPieces = [&](size_t value, size_t len, auto&& f) {  // [value, value + len) in local messages
    forPieces(len, sub, [&](size_t off, size_t n) { f(value + off, n); });
  };
  // Every piece of a shard, block by block, as phase B cuts them:
  // f(first value, length) with values relative to the shard.
  auto shardPieces = [&](const CodecBlocks& blocks, auto&& f) {
    for (int j = 0; j < H; ++j)
      forPieces(blocks.size(j), piece, [&](size_t off, size_t len) { f(blocks.begin(j) + off, len); });
  };

  // Scratch: this shard's host sums (float32), and a float32 message slot
  // per local peer (what we send it of our input).
  plan.scratchElems = shardLen * sizeof(float);
  const size_t hostSums = 0;
  std::vector<size_t> slot(localPeers.size());
  const bool float32 = req.values == kernels::DType::Float32;
  for (size_t i = 0; i < localPeers.size() && !float32; ++i) {
    slot[i] = (plan.scratchElems + 63) / 64 * 64;
    plan.scratchElems = slot[i] + sub * sizeof(float);
  }

  // A (receiving) and C (receiving): one lane takes every local peer's
  // contributions in rank order, so the sums are the same bits every run,
  // then the others' shards of the result.
  std::vector<std::pair<size_t, uint32_t>> sumReady;  // (shard value, step after which its piece is summed)
  plan.beginLane();
  if (shardLen)
    shardPieces(interBlocks, [&](size_t v, size_t len) {
      bool first = true;
      for (int r : local) {
        localPieces(v, len, [&](size_t value, size_t n) {
          Step& s = r == me ? add(plan, Prim::Widen, BufId::Input, (shardBegin + value) * vs, BufId::Scratch,
                                  hostSums + value * sizeof(float), n)
                            : add(plan, Prim::RecvDecode, BufId::Scratch, 0, BufId::Scratch,
                                  hostSums + value * sizeof(float), n, -1, r);
          s.codec = Codec::None;  // float32 messages
          s.accumulate = !first;
        });
        first = false;
      }
      sumReady.push_back({v, static_cast<uint32_t>(plan.steps.size() - 1)});
    });
  for (int p = 0; p < L; ++p) {
    if (local[p] == me) continue;
    shardPieces(CodecBlocks{shards.size(p), H}, [&](size_t v, size_t len) {
      localPieces(shards.begin(p) + v, len, [&](size_t value, size_t n) {
        add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, value * vs, n * vs, -1, local[p]);
      });
    });
  }

  // B: the compressed AllReduce of the sums among the partners.
  std::vector<std::pair<size_t, uint32_t>> outputReady;  // (shard value, step that writes its piece)
  Source sums;
  sums.buf = BufId::Scratch;
  sums.at = hostSums;
  sums.valueBytes = sizeof(float);
  sums.readyAfter = [&](size_t value) { return stepFor(sumReady, value); };
  GroupBuilder(plan, OpKind::AllReduce, codec, partners, hostIdx, begins, shardBegin, vs, piece, sums)
      .build(&outputReady);

  // A (sending) and C (sending): one lane per local peer: our input's part
  // of its shard, then our shard of the result as each piece is written.
  for (size_t i = 0; i < localPeers.size(); ++i) {
    const int p = localPeers[i];
    const int pl = static_cast<int>(std::find(local.begin(), local.end(), p) - local.begin());
    plan.beginLane();
    shardPieces(CodecBlocks{shards.size(pl), H}, [&](size_t v, size_t len) {
      localPieces(shards.begin(pl) + v, len, [&](size_t value, size_t n) {
        if (float32) {
          add(plan, Prim::Send, BufId::Input, value * vs, BufId::Input, 0, n * sizeof(float), p);
        } else {
          add(plan, Prim::Encode, BufId::Input, value * vs, BufId::Scratch, slot[i], n).codec = Codec::None;
          add(plan, Prim::Send, BufId::Scratch, slot[i], BufId::Scratch, 0, n * sizeof(float), p);
        }
      });
    });
    shardPieces(interBlocks, [&](size_t v, size_t len) {
      add(plan, Prim::Await, BufId::Scratch, 0, BufId::Scratch, 0, stepFor(outputReady, v));
      localPieces(shardBegin + v, len, [&](size_t value, size_t n) {
        add(plan, Prim::Send, BufId::Output, value * vs, BufId::Output, 0, n * vs, p);
      });
    });
  }
  plan.closeLane();
}

}  // namespace

bool compressedIsHierarchical(PlanEnv& env) {
  const TuningParams& t = env.tuning();
  return t.hosts > 1 && t.perHost > 1 && !ranksByHost(env).empty();
}

void buildCompressed(const CallRequest& req, PlanEnv& env, Plan& plan) {
  const OpKind kind = req.desc.kind;
  if (kind != OpKind::AllReduce && kind != OpKind::ReduceScatter && kind != OpKind::AllGather)
    throwError(gyreInvalidArgument, std::string(opKindName(kind)) + " has no compressed form");
  const int n = env.nranks();
  const size_t vs = kernels::dtypeSize(req.values), count = req.desc.count;
  plan.reset("compressed");
  plan.rank = env.rank();
  const size_t inValues = kind == OpKind::ReduceScatter ? n * count : count;
  const size_t outValues = kind == OpKind::AllGather ? n * count : count;
  if (n == 1) {  // nothing crosses a wire: the values as they are
    if (count) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count * vs);
  } else if (kind == OpKind::AllReduce && compressedIsHierarchical(env)) {
    plan.algorithm = "compressed_hierarchical";
    buildHierarchical(req, env, plan, ranksByHost(env));
  } else {
    std::vector<int> all(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) all[r] = r;
    std::vector<size_t> begins(static_cast<size_t>(n) + 1);
    const CodecBlocks blocks{count, n};
    for (int j = 0; j <= n; ++j) begins[j] = kind == OpKind::AllReduce ? blocks.begin(j) : static_cast<size_t>(j) * count;
    const Codec codec = static_cast<Codec>(req.desc.codec);
    std::vector<int> peers;
    for (int r = 0; r < n; ++r)
      if (r != env.rank()) peers.push_back(r);
    const size_t piece = pieceValues(codec, env.chunkBytes(peers));
    Source input;
    input.valueBytes = vs;
    GroupBuilder(plan, kind, codec, all, env.rank(), begins, 0, vs, piece, input).build();
  }
  // The extents, in bytes (a byte plan).
  plan.inputElems = inValues * vs;
  plan.outputElems = outValues * vs;
}

}  // namespace gyre::collectives
