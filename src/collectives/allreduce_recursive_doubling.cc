#include <algorithm>

#include "collectives/allreduce.h"
#include "core/error.h"

namespace gyre::collectives {

const char* allReduceAlgoName(AllReduceAlgo a) {
  return a == AllReduceAlgo::Ring ? "ring" : "recursive_doubling";
}

AllReduceAlgo parseAllReduceAlgo(const std::string& name) {
  if (name == "ring") return AllReduceAlgo::Ring;
  if (name == "recursive_doubling" || name == "rd") return AllReduceAlgo::RecursiveDoubling;
  throwError(gyreInvalidArgument, "unknown AllReduce algorithm '" + name +
                                      "' (GYRE_ALGO); valid: ring, recursive_doubling");
}

void buildRecursiveDoublingAllReduce(Plan& plan, int rank, int nranks, size_t count,
                                     size_t chunkElems) {
  plan.reset("recursive_doubling");
  int pof2 = 1;
  while (pof2 * 2 <= nranks) pof2 *= 2;
  const int extra = nranks - pof2;

  // Whole-vector transfers in pieces, each piece's send and receive
  // interleaved so neither side ever runs more than one piece ahead.
  auto pieces = [&](auto&& emit) {
    for (size_t off = 0; off < count; off += chunkElems)
      emit(off, std::min(chunkElems, count - off));
  };
  auto step = [&](Prim prim, BufId src, int sendPeer, int recvPeer, size_t off, size_t n,
                  bool recvFirst, bool final) {
    Step s;
    s.prim = prim;
    s.src = src;
    s.dst = BufId::Output;
    s.sendPeer = sendPeer;
    s.recvPeer = recvPeer;
    s.srcOffset = s.dstOffset = off;
    s.count = n;
    s.recvFirst = recvFirst;
    s.finalReduce = final;
    plan.steps.push_back(s);
  };

  if (rank >= pof2) {  // fold into rank - pof2, get the result back at the end
    const int partner = rank - pof2;
    plan.peers = {partner};
    pieces([&](size_t off, size_t n) {
      step(Prim::Send, BufId::Input, partner, -1, off, n, false, false);
    });
    pieces([&](size_t off, size_t n) {
      step(Prim::Recv, BufId::Output, -1, partner, off, n, false, false);
    });
    return;
  }
  BufId current = BufId::Input;
  if (rank < extra) {
    const int partner = rank + pof2;
    plan.peers.push_back(partner);
    // Our data first: the lower rank is always the left operand.
    pieces([&](size_t off, size_t n) {
      step(Prim::RecvReduce, BufId::Input, -1, partner, off, n, false, pof2 == 1);
    });
    current = BufId::Output;
  }
  for (int mask = 1; mask < pof2; mask <<= 1) {
    const int partner = rank ^ mask;
    plan.peers.push_back(partner);
    const bool final = mask * 2 == pof2;
    pieces([&](size_t off, size_t n) {
      step(Prim::Send, current, partner, -1, off, n, false, false);
      step(Prim::RecvReduce, current, -1, partner, off, n, partner < rank, final);
    });
    current = BufId::Output;
  }
  if (current == BufId::Input && count > 0)  // a single rank, out of place
    step(Prim::Copy, BufId::Input, -1, -1, 0, count, false, true);
  if (rank < extra) {
    const int partner = rank + pof2;
    pieces([&](size_t off, size_t n) {
      step(Prim::Send, BufId::Output, partner, -1, off, n, false, false);
    });
  }
}

}  // namespace gyre::collectives
