#include "collectives/alltoall.h"

#include "collectives/steps.h"

namespace gyre::collectives {

namespace {

// Both variants: block sizes and places from the callbacks (elements).
// variable (AllToAllv): an empty block still travels, and every message
// carries its block's count (Step::blockCount), so mismatched counts are
// reported.
template <class SendAt, class RecvAt>
void pairwise(const CallRequest& req, PlanEnv& env, Plan& plan, SendAt sendAt, RecvAt recvAt, bool variable) {
  const int n = env.nranks(), me = env.rank();
  for (int k = 1; k < n; ++k) plan.addPeer((me + k) % n);
  const size_t chunk = pairwisePieceElems(req, env, plan.peers);
  BufId from = BufId::Input;
  // Before the lanes (the prologue): the in-place copy.
  if (req.inPlace) {
    size_t total = 0;
    for (int p = 0; p < n; ++p) total = std::max(total, sendAt(p).first + sendAt(p).second);
    plan.scratchElems = total;
    add(plan, Prim::Copy, BufId::Input, 0, BufId::Scratch, 0, total);
    from = BufId::Scratch;
  }
  plan.beginLane();
  for (int k = 1; k < n; ++k) {
    const int to = (me + k) % n;
    forPieces(sendAt(to).second, pairwisePieceElemsFor(req, env, chunk, to), [&](size_t off, size_t len) {
      Step& s = add(plan, Prim::Send, from, sendAt(to).first + off, BufId::Output, 0, len, to);
      if (variable) s.blockCount = sendAt(to).second;
    }, variable);
  }
  // Our own block after the sends, while they are on their way: a copy
  // before them delayed every peer (2 ranks, 8 KiB: 0.86 us, against 0.66
  // for Bruck, which sends first).
  add(plan, Prim::Copy, from, sendAt(me).first, BufId::Output, recvAt(me).first, sendAt(me).second);
  plan.beginLane();
  for (int k = 1; k < n; ++k) {
    const int src = (me - k + n) % n;
    forPieces(recvAt(src).second, pairwisePieceElemsFor(req, env, chunk, src), [&](size_t off, size_t len) {
      Step& s = add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, recvAt(src).first + off, len, -1, src);
      if (variable) s.blockCount = recvAt(src).second;
    }, variable);
  }
  plan.closeLane();
}

}  // namespace

void buildPairwiseAllToAll(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("pairwise");
  const size_t c = req.desc.count;
  auto at = [c](int p) { return std::make_pair(size_t(p) * c, c); };
  pairwise(req, env, plan, at, at, false);
}

void buildPairwiseAllToAllv(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("pairwise");
  plan.rank = env.rank();
  auto sendAt = [&](int p) { return std::make_pair(req.sendDispls[p], req.sendCounts[p]); };
  auto recvAt = [&](int p) { return std::make_pair(req.recvDispls[p], req.recvCounts[p]); };
  pairwise(req, env, plan, sendAt, recvAt, true);
}

void buildDisseminationBarrier(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("dissemination");
  const int n = env.nranks(), me = env.rank();
  for (int k = 1; k < n; k <<= 1) {
    plan.addPeer((me + k) % n);
    plan.addPeer((me - k + n) % n);
  }
  env.chunkBytes(plan.peers);  // connects them
  for (int k = 1; k < n; k <<= 1) {
    add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, (me + k) % n);
    add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, (me - k + n) % n);
  }
}

}  // namespace gyre::collectives
