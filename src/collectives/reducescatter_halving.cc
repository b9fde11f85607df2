// ReduceScatter by recursive halving: the first half of Rabenseifner's
// AllReduce, with the rank blocks as the unit.
//
// Why: the ring takes n-1 steps; halving takes log2(p), sending half of what
// is still being reduced at each (in all about (p-1)/p of the input, as the
// ring does), so it wins wherever per-message latency counts: small and
// middle sizes, many ranks.
//
// Over p = 2^k virtual ranks: at the step with distance `mask` (p/2 down to
// 1) each pairs with v ^ mask, sends the half of its remaining blocks that
// the partner keeps and reduces the partner's copy of the other half into
// its own. After log2(p) steps virtual rank v holds its blocks reduced.
// Other rank counts fold (see Fold): each odd rank among the first
// 2*(n - p) sends its whole input to the even rank below, which reduces it in
// and so stands for both ranks' blocks (virtual blocks are contiguous runs of
// rank blocks, in rank order); at the end it sends the odd rank its block.
//
// Partial sums live in scratch at the input's offsets: the input is read
// only (in place, our output block is our input block, read at the first
// step and written at the last). Operand order is fixed by rank (the lower
// rank's data on the left), so results are deterministic; the last halving
// step is every element's final reduction (the average's divisor).
#include <algorithm>

#include "collectives/more_algorithms.h"
#include "collectives/steps.h"

namespace gyre::collectives {

void buildRecursiveHalvingReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("recursive_halving");
  const int n = env.nranks(), me = env.rank();
  const size_t count = req.desc.count;  // per rank block
  const Fold fold(n);
  const int v = fold.virt(me);

  if (fold.sitsOut(me)) plan.addPeer(me - 1);
  if (fold.hasHelper(me)) plan.addPeer(me + 1);
  if (v >= 0)
    for (int mask = 1; mask < fold.p; mask <<= 1) plan.addPeer(fold.real(v ^ mask));
  if (plan.peers.empty()) {  // one rank
    if (count) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count).finalReduce = true;
    return;
  }
  const size_t chunk = std::max<size_t>(1, env.chunkBytes(plan.peers) / req.elemSize);
  const size_t mine = size_t(me) * count;  // our block's offset in the input

  if (fold.sitsOut(me)) {  // the whole input to the helper, our block back
    forPieces(size_t(n) * count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Input, off, BufId::Output, 0, len, me - 1);
    });
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, off, len, -1, me - 1);
    });
    return;
  }

  const int p = fold.p;
  // Virtual blocks [a, b) are the input elements [start(a), start(b)).
  auto start = [&](int vb) { return size_t(fold.first(vb)) * count; };
  // Whether the final step leaves more than our block (we stand for two).
  const bool twoBlocks = fold.hasHelper(me);
  if (p > 2 || twoBlocks) plan.scratchElems = size_t(n) * count;

  BufId cur = BufId::Input;
  if (twoBlocks) {
    forPieces(size_t(n) * count, chunk, [&](size_t off, size_t len) {
      Step& s = add(plan, Prim::RecvReduce, BufId::Input, off, BufId::Scratch, off, len, -1, me + 1);
      s.recvFirst = false;  // ours (the lower rank's) on the left
    });
    cur = BufId::Scratch;
  }

  int lo = 0, hi = p;
  for (int mask = p / 2; mask >= 1; mask >>= 1) {
    const int partner = fold.real(v ^ mask);
    const int mid = lo + mask;
    const bool upper = (v & mask) != 0;
    const int keepLo = upper ? mid : lo, keepHi = upper ? hi : mid;
    const int sendLo = upper ? lo : mid, sendHi = upper ? mid : hi;
    const size_t keep = start(keepLo), send = start(sendLo);
    const bool recvFirst = partner < me, final = mask == 1;
    // The final step writes our block straight to the output, unless we
    // hold two (then through scratch).
    const bool toOutput = final && !twoBlocks;
    const BufId dst = toOutput ? BufId::Output : BufId::Scratch;
    const size_t dstBase = toOutput ? keep - mine : keep;  // keep == mine when toOutput
    exchangePieces(
        start(sendHi) - send, start(keepHi) - keep, chunk,
        [&](size_t off, size_t len) { add(plan, Prim::Send, cur, send + off, BufId::Output, 0, len, partner); },
        [&](size_t off, size_t len) {
          Step& s = add(plan, Prim::RecvReduce, cur, keep + off, dst, dstBase + off, len, -1, partner);
          s.recvFirst = recvFirst;
          s.finalReduce = final;
        });
    cur = BufId::Scratch;
    lo = keepLo;
    hi = keepHi;
  }

  if (twoBlocks) {  // scratch holds our block and the helper's, both final
    if (count) add(plan, Prim::Copy, BufId::Scratch, mine, BufId::Output, 0, count);
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Scratch, mine + count + off, BufId::Output, 0, len, me + 1);
    });
  }
}

}  // namespace gyre::collectives
