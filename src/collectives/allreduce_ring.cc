#include <algorithm>

#include "collectives/allreduce.h"

namespace gyre::collectives {

void buildRingAllReduce(Plan& plan, int rank, int nranks, size_t count, size_t chunkElems,
                        size_t elemSize) {
  plan.reset("ring");
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  plan.peers = {next, prev};
  auto mod = [nranks](int x) { return ((x % nranks) + nranks) % nranks; };
  // Pieces of large vectors start on 64-byte boundaries for the kernels.
  const size_t align = std::max<size_t>(1, 64 / elemSize);

  for (size_t base = 0; base < count; base += size_t(nranks) * chunkElems) {
    const size_t iterCount = std::min(count - base, size_t(nranks) * chunkElems);
    size_t seg = (iterCount + nranks - 1) / nranks;
    if (seg * elemSize >= 4096) seg = std::min(chunkElems, (seg + align - 1) / align * align);
    auto segStart = [&](int s) { return base + std::min(iterCount, size_t(s) * seg); };
    auto segCount = [&](int s) { return segStart(s + 1) - segStart(s); };
    auto add = [&](Prim prim, int s, bool final) {
      if (segCount(s) == 0) return;  // every rank computes the same sizes and skips alike
      Step st;
      st.prim = prim;
      st.src = BufId::Input;
      st.dst = BufId::Output;
      st.recvFirst = true;  // partial sums arrive from earlier in the ring
      st.finalReduce = final;
      st.sendPeer = prim == Prim::Recv ? -1 : next;
      st.recvPeer = prim == Prim::Send ? -1 : prev;
      st.srcOffset = st.dstOffset = segStart(s);
      st.count = segCount(s);
      plan.steps.push_back(st);
    };
    // Reduce-scatter: segment s is summed starting at rank s+1 and ends at
    // rank s, which then owns its final value.
    add(Prim::Send, mod(rank - 1), false);
    for (int j = 2; j < nranks; ++j) add(Prim::RecvReduceSend, mod(rank - j), false);
    add(Prim::RecvReduceCopySend, rank, true);
    // All-gather: pass each final segment on around the ring.
    for (int j = 1; j < nranks - 1; ++j) add(Prim::RecvCopySend, mod(rank - j), false);
    add(Prim::Recv, mod(rank + 1), false);
  }
}

}  // namespace gyre::collectives
