// AllGather by recursive doubling: the second half of Rabenseifner's
// AllReduce, with the rank blocks as the unit.
//
// Why: log2(p) exchanges instead of the ring's n-1, each with the partner
// at distance 1, 2, 4, ..., sending everything gathered so far (in all the
// ring's (p-1)/p of the output), straight from and into the output, with no
// scratch and no final rotation (unlike Bruck). Latency-bound sizes on
// power-of-two rank counts.
//
// Over p = 2^k virtual ranks: at the step with distance `mask` each rank
// holds the aligned run of `mask` virtual blocks containing its own, and
// swaps it with rank v ^ mask, which holds the run next to it. Other rank
// counts fold (see Fold): each odd rank among the first 2*(n - p) gives its
// block to the even rank below (whose virtual block is then the two rank
// blocks, contiguous in the output) and gets the whole output back at the
// end. Only copies: nothing to reduce, the bits are the inputs'.
#include <algorithm>

#include "collectives/more_algorithms.h"
#include "collectives/steps.h"

namespace gyre::collectives {

void buildRecursiveDoublingAllGather(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("recursive_doubling");
  const int n = env.nranks(), me = env.rank();
  const size_t count = req.desc.count;
  const Fold fold(n);
  const int v = fold.virt(me);

  if (fold.sitsOut(me)) plan.addPeer(me - 1);
  if (fold.hasHelper(me)) plan.addPeer(me + 1);
  if (v >= 0)
    for (int mask = 1; mask < fold.p; mask <<= 1) plan.addPeer(fold.real(v ^ mask));
  const size_t chunk = std::max<size_t>(1, env.chunkBytes(plan.peers) / req.elemSize);
  const size_t total = size_t(n) * count;

  if (fold.sitsOut(me)) {  // our block to the helper, everything back
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Input, off, BufId::Output, 0, len, me - 1);
    });
    forPieces(total, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, off, len, -1, me - 1);
    });
    return;
  }
  if (!req.inPlace && count)
    add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, size_t(me) * count, count);
  if (fold.hasHelper(me)) {
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, size_t(me + 1) * count + off, len, -1, me + 1);
    });
  }

  // Virtual blocks [a, b) are the output elements [start(a), start(b)).
  auto start = [&](int vb) { return size_t(fold.first(vb)) * count; };
  for (int mask = 1; mask < fold.p; mask <<= 1) {
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
    forPieces(total, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Output, off, BufId::Output, 0, len, me + 1);
    });
  }
}

}  // namespace gyre::collectives
