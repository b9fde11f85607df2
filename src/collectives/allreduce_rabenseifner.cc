// AllReduce, Rabenseifner's algorithm: a reduce-scatter by recursive halving
// followed by an all-gather by recursive doubling, over p = 2^k ranks.
//
// Why: the ring moves the minimum data (2(n-1)/n of the vector per rank) but
// takes 2(n-1) steps; recursive doubling takes log2(n) steps but moves the
// whole vector in each. Rabenseifner moves the ring's amount of data in
// 2 log2(p) steps, so it suits the middle sizes (and large ones where the
// per-step latency matters, many ranks or sockets).
//
// The vector is cut into p blocks. Halving: at the step with distance
// `mask` (p/2 down to 1) each rank pairs with rank ^ mask; of the blocks it
// still owns, it sends the half that the partner keeps and reduces the
// partner's copy of its own half into it. After log2(p) steps virtual rank
// v holds block v fully reduced. Doubling then exchanges the finished
// blocks (mask 1 up to p/2), doubling what each rank holds, until all have
// everything.
//
// Rank counts that are not a power of two fold first (see Fold): each odd
// rank among the first 2*(n - p) sends its vector to the even rank below,
// which reduces it in (its own data on the left), and gets the finished
// vector back at the end.
//
// Determinism: each element is reduced on exactly one rank at each halving
// step (the one keeping it) and the final value is only copied afterwards,
// so every rank gets the same bits; operand order in each pairwise
// reduction is fixed by rank (the lower rank's data on the left), so
// repeated runs give the same bits too. The last halving step is the final
// reduction of every element (it applies the average's divisor).
#include <algorithm>

#include "collectives/more_algorithms.h"
#include "collectives/steps.h"

namespace gyre::collectives {

void buildRabenseifnerAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("rabenseifner");
  const int n = env.nranks(), me = env.rank();
  const size_t count = req.desc.count;
  const Fold fold(n);
  const int v = fold.virt(me);

  // Peers: the fold partner, then the log2(p) exchange partners.
  if (fold.sitsOut(me)) plan.addPeer(me - 1);
  if (fold.hasHelper(me)) plan.addPeer(me + 1);
  if (v >= 0)
    for (int mask = 1; mask < fold.p; mask <<= 1) plan.addPeer(fold.real(v ^ mask));
  if (plan.peers.empty()) {  // one rank
    if (count) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count).finalReduce = true;
    return;
  }
  const size_t chunk = std::max<size_t>(1, env.chunkBytes(plan.peers) / req.elemSize);

  if (fold.sitsOut(me)) {  // hand the vector over, get the result back
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Input, off, BufId::Output, 0, len, me - 1);
    });
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, off, len, -1, me - 1);
    });
    return;
  }

  // p blocks; large ones start on 64-byte boundaries for the kernels. Empty
  // blocks at the end (count < p) make no messages on either side.
  const int p = fold.p;
  size_t seg = (count + p - 1) / p;
  const size_t align = std::max<size_t>(1, 64 / req.elemSize);
  if (seg * req.elemSize >= 4096) seg = (seg + align - 1) / align * align;
  auto start = [&](int b) { return std::min(count, size_t(b) * seg); };

  BufId cur = BufId::Input;  // where our partial result lives
  if (fold.hasHelper(me)) {
    forPieces(count, chunk, [&](size_t off, size_t len) {
      Step& s = add(plan, Prim::RecvReduce, BufId::Input, off, BufId::Output, off, len, -1, me + 1);
      s.recvFirst = false;  // ours (the lower rank's) on the left
    });
    cur = BufId::Output;
  }

  // Reduce-scatter by recursive halving over blocks [lo, hi).
  int lo = 0, hi = p;
  for (int mask = p / 2; mask >= 1; mask >>= 1) {
    const int partner = fold.real(v ^ mask);
    const int mid = lo + mask;
    const bool upper = (v & mask) != 0;
    const int keepLo = upper ? mid : lo, keepHi = upper ? hi : mid;
    const int sendLo = upper ? lo : mid, sendHi = upper ? mid : hi;
    const size_t keep = start(keepLo), send = start(sendLo);
    const bool recvFirst = partner < me, final = mask == 1;
    exchangePieces(
        start(sendHi) - send, start(keepHi) - keep, chunk,
        [&](size_t off, size_t len) { add(plan, Prim::Send, cur, send + off, BufId::Output, 0, len, partner); },
        [&](size_t off, size_t len) {
          Step& s = add(plan, Prim::RecvReduce, cur, keep + off, BufId::Output, keep + off, len, -1, partner);
          s.recvFirst = recvFirst;
          s.finalReduce = final;
        });
    cur = BufId::Output;
    lo = keepLo;
    hi = keepHi;
  }

  // All-gather by recursive doubling: we hold blocks [lo, hi), the partner
  // the same number next to them.
  for (int mask = 1; mask < p; mask <<= 1) {
    const int pv = v ^ mask;
    const int partner = fold.real(pv);
    const int mineLo = v & ~(mask - 1), theirsLo = pv & ~(mask - 1);
    const size_t mine = start(mineLo), theirs = start(theirsLo);
    exchangePieces(
        start(mineLo + mask) - mine, start(theirsLo + mask) - theirs, chunk,
        [&](size_t off, size_t len) {
          add(plan, Prim::Send, BufId::Output, mine + off, BufId::Output, 0, len, partner);
        },
        [&](size_t off, size_t len) {
          add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, theirs + off, len, -1, partner);
        });
  }

  if (fold.hasHelper(me)) {
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Output, off, BufId::Output, 0, len, me + 1);
    });
  }
}

}  // namespace gyre::collectives
