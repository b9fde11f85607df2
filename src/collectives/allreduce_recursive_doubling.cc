#include <algorithm>

#include "collectives/allreduce.h"

namespace gyre::collectives {

namespace {

int largestPowerOfTwo(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

void appendRecursiveDoublingAllReduce(Plan& plan, const Group& g, size_t count, size_t chunkElems, BufId src,
                                      size_t srcOffset, BufId dst, size_t dstOffset) {
  const int n = g.size(), me = g.me;
  const int pof2 = largestPowerOfTwo(n);
  const int extra = n - pof2;

  // Whole-vector transfers in pieces, each piece's send and receive
  // interleaved so neither side ever runs more than one piece ahead.
  auto pieces = [&](auto&& emit) {
    for (size_t off = 0; off < count; off += chunkElems) emit(off, std::min(chunkElems, count - off));
  };
  // fromDst: the step reads the partial result in dst rather than src.
  auto step = [&](Prim prim, bool fromDst, int sendPeer, int recvPeer, size_t off, size_t len, bool recvFirst,
                  bool final) {
    Step s;
    s.prim = prim;
    s.src = fromDst ? dst : src;
    s.dst = dst;
    s.sendPeer = sendPeer < 0 ? -1 : g.ranks[sendPeer];
    s.recvPeer = recvPeer < 0 ? -1 : g.ranks[recvPeer];
    s.srcOffset = (fromDst ? dstOffset : srcOffset) + off;
    s.dstOffset = dstOffset + off;
    s.count = len;
    s.recvFirst = recvFirst;
    s.finalReduce = final;
    plan.steps.push_back(s);
  };

  if (me >= pof2) {  // fold into me - pof2, get the result back at the end
    const int partner = me - pof2;
    plan.addPeer(g.ranks[partner]);
    pieces([&](size_t off, size_t len) { step(Prim::Send, false, partner, -1, off, len, false, false); });
    pieces([&](size_t off, size_t len) { step(Prim::Recv, true, -1, partner, off, len, false, false); });
    return;
  }
  bool atDst = false;  // where the partial result lives
  if (me < extra) {
    const int partner = me + pof2;
    plan.addPeer(g.ranks[partner]);
    // Our data first: the lower rank is always the left operand.
    pieces([&](size_t off, size_t len) {
      step(Prim::RecvReduce, false, -1, partner, off, len, false, pof2 == 1);
    });
    atDst = true;
  }
  for (int mask = 1; mask < pof2; mask <<= 1) {
    const int partner = me ^ mask;
    plan.addPeer(g.ranks[partner]);
    const bool final = mask * 2 == pof2;
    pieces([&](size_t off, size_t len) {
      step(Prim::Send, atDst, partner, -1, off, len, false, false);
      step(Prim::RecvReduce, atDst, -1, partner, off, len, g.ranks[partner] < g.ranks[me], final);
    });
    atDst = true;
  }
  if (!atDst && count > 0)  // a single rank
    step(Prim::Copy, false, -1, -1, 0, count, false, true);
  if (me < extra) {
    const int partner = me + pof2;
    pieces([&](size_t off, size_t len) { step(Prim::Send, true, partner, -1, off, len, false, false); });
  }
}

int recursiveDoublingPeers(const Group& g, int* out) {
  const int n = g.size(), me = g.me, pof2 = largestPowerOfTwo(n);
  int k = 0;
  if (me >= pof2) {
    out[k++] = g.ranks[me - pof2];
    return k;
  }
  if (me < n - pof2) out[k++] = g.ranks[me + pof2];
  for (int mask = 1; mask < pof2; mask <<= 1) out[k++] = g.ranks[me ^ mask];
  return k;
}

void buildRecursiveDoublingAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("recursive_doubling");
  const Group& g = env.world();
  int peers[33];
  const int npeers = recursiveDoublingPeers(g, peers);
  const size_t chunk = env.chunkBytes(std::span<const int>(peers, static_cast<size_t>(npeers))) / req.elemSize;
  appendRecursiveDoublingAllReduce(plan, g, req.desc.count, chunk, BufId::Input, 0, BufId::Output, 0);
}

}  // namespace gyre::collectives
