#include "collectives/seq_exchange.h"

#include <algorithm>
#include <array>
#include <vector>

#include "collectives/seq_layout.h"
#include "collectives/steps.h"

namespace gyre::collectives {

namespace {

constexpr size_t kNoSlot = ~size_t{0};

// The lowest rank holding key/value head h: its copy is the one placed.
int firstHolder(const std::vector<HeadShare>& shares, uint32_t h) {
  for (size_t q = 0; q < shares.size(); ++q)
    if (shares[q].kvCount && h >= shares[q].kvFirst && h < shares[q].kvFirst + shares[q].kvCount)
      return static_cast<int>(q);
  return -1;
}

// A copy of a key/value head to add into this rank's tokens (heads to seq):
// where it waits in scratch, and which head of the token it joins.
struct Added {
  size_t slot;
  size_t head;
};

}  // namespace

void buildSeqExchange(const CallRequest& req, PlanEnv& env, Plan& plan) {
  const SeqLayout& l = *req.seq;
  const bool toHeads = req.desc.kind == OpKind::SeqToHeads;
  plan.reset("pairwise");
  const int n = env.nranks(), me = env.rank();
  plan.rank = me;
  const size_t dim = l.headDim, width = tokenHeads(l);
  std::vector<HeadShare> share(static_cast<size_t>(n));
  std::vector<size_t> first(static_cast<size_t>(n) + 1, 0);  // each rank's first token
  for (int r = 0; r < n; ++r) {
    share[r] = headShare(l, n, r);
    first[r + 1] = first[r] + l.tokens[r];
  }
  const size_t mine = l.tokens[me], myWidth = shareHeads(l, share[me]);
  auto blockElems = [&](size_t tokens, int q) { return tokens * shareHeads(l, share[q]) * dim; };
  for (int k = 1; k < n; ++k) plan.addPeer((me + k) % n);
  // Pieces as pairwise AllToAll cuts them (connects the peers); one rank
  // copies its block whole.
  const size_t chunk = n > 1 ? pairwisePieceElems(req, env, plan.peers)
                             : std::max<size_t>(1, l.tokens[0] * shareHeads(l, share[0]) * dim);

  // Heads to seq: every copy of a key/value head but its first holder's is
  // added, so it lands in a scratch slot of this rank's tokens first.
  std::vector<std::array<size_t, 2>> slotOf(static_cast<size_t>(n),
                                            {kNoSlot, kNoSlot});  // by q: k, v
  std::vector<Added> added;
  if (!toHeads) {
    for (SeqPart p : {kSeqK, kSeqV}) {
      if (!(l.parts & p)) continue;
      for (int q = 0; q < n; ++q) {
        if (!share[q].kvCount || firstHolder(share, share[q].kvFirst) == q) continue;
        slotOf[q][p == kSeqK ? 0 : 1] = added.size();
        added.push_back(Added{added.size(), partOffset(l, p) + share[q].kvFirst});
      }
    }
  }
  plan.scratchElems = added.size() * mine * dim;

  // q's heads of each part in this rank's tokens, in q's order (the head
  // side's): the sequence side of the block between this rank and q.
  auto seqSide = [&](int q) {
    const BufId buf = toHeads ? BufId::Input : BufId::Output;
    const size_t stride = width * dim;
    View v;
    v.rows = mine;
    if (l.parts & kSeqQ)
      v.add(buf, (partOffset(l, kSeqQ) + share[q].qFirst) * dim, stride, share[q].qCount * dim);
    for (SeqPart p : {kSeqK, kSeqV}) {
      if (!(l.parts & p)) continue;
      size_t head = partOffset(l, p) + share[q].kvFirst, count = share[q].kvCount;
      if (const size_t slot = slotOf[q][p == kSeqK ? 0 : 1]; slot != kNoSlot) {
        v.add(BufId::Scratch, slot * mine * dim, dim, dim);
        ++head;
        --count;
      }
      v.add(buf, head * dim, stride, count * dim);
    }
    return v;
  };

  // Lanes: one per peer each way, which the executor advances a message at
  // a time, in turn: the pieces of every peer's block for the same tokens
  // move close together in time, so each token's heads are read (or
  // written) in one sweep rather than one slice of every token per peer
  // (with runs of 1 KiB, a slice per peer read every page four times, far
  // apart: 1.3-1.4x a contiguous AllToAll over 4 ranks). Our own block's
  // pieces ride in the first send lane (a copy takes no turn). Each lane
  // talks to one peer only, so none can hold up another.
  const size_t ownElems = mine * myWidth * dim;
  const uint32_t ownView = ownElems ? plan.addView(seqSide(me)) : 0;
  size_t ownDone = 0;
  auto ownPiece = [&](size_t upTo) {  // our block's pieces, up to element upTo
    for (; ownDone < std::min(upTo, ownElems); ownDone += chunk) {
      const size_t len = std::min(chunk, ownElems - ownDone);
      if (toHeads) {
        add(plan, Prim::Copy, BufId::Input, ownDone, BufId::Output,
            first[me] * myWidth * dim + ownDone, len)
            .srcView = ownView;
      } else {
        add(plan, Prim::Copy, BufId::Input, first[me] * myWidth * dim + ownDone, BufId::Output,
            ownDone, len)
            .dstView = ownView;
      }
    }
  };
  plan.inputElems = toHeads ? mine * width * dim : first[n] * myWidth * dim;
  plan.outputElems = toHeads ? first[n] * myWidth * dim : mine * width * dim;
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int to = (me + k) % n;
    // Seq to heads: q's heads of our tokens, gathered; heads to seq: our
    // heads of q's tokens, as they lie.
    const uint32_t view = toHeads ? plan.addView(seqSide(to)) : 0;
    const size_t at = toHeads ? 0 : first[to] * myWidth * dim;
    const size_t tokens = toHeads ? mine : l.tokens[to];
    forPieces(
        blockElems(tokens, toHeads ? to : me), chunk,
        [&](size_t off, size_t len) {
          Step& st = add(plan, Prim::Send, BufId::Input, at + off, BufId::Output, 0, len, to);
          st.srcView = view;
          st.blockCount = tokens;
          if (k == 1) ownPiece(off + len);
        },
        true);
  }
  if (ownDone < ownElems) {
    if (n == 1) plan.beginLane();
    ownPiece(ownElems);
  }
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int src = (me - k + n) % n;
    // Seq to heads: each rank's tokens of our heads, in place; heads to
    // seq: its heads of our tokens, scattered.
    const uint32_t view = toHeads ? 0 : plan.addView(seqSide(src));
    const size_t at = toHeads ? first[src] * myWidth * dim : 0;
    const size_t tokens = toHeads ? l.tokens[src] : mine;
    forPieces(
        blockElems(tokens, toHeads ? me : src), chunk,
        [&](size_t off, size_t len) {
          Step& st = add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, at + off, len, -1, src);
          st.dstView = view;
          st.blockCount = tokens;
        },
        true);
  }
  plan.closeLane();
  // The epilogue: the other holders' copies added, rank after rank (slots
  // are numbered by part, then by holder).
  if (toHeads || !mine) return;
  for (const Added& a : added) {
    View head;
    head.rows = mine;
    head.add(BufId::Output, a.head * dim, width * dim, dim);
    add(plan, Prim::Reduce, BufId::Scratch, a.slot * mine * dim, BufId::Output, 0, mine * dim)
        .dstView = plan.addView(head);
  }
}

}  // namespace gyre::collectives
