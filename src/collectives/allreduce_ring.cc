#include <algorithm>

#include "collectives/allreduce.h"

namespace gyre::collectives {

void appendRingAllReduce(Plan& plan, const Group& g, size_t count, size_t chunkElems, size_t elemSize,
                         BufId src, size_t srcOffset, BufId dst, size_t dstOffset) {
  const int n = g.size(), me = g.me;
  const int next = g.at(me + 1), prev = g.at(me - 1);
  plan.addPeer(next);
  plan.addPeer(prev);
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  // Pieces of large vectors start on 64-byte boundaries for the kernels.
  const size_t align = std::max<size_t>(1, 64 / elemSize);

  // Iteration i covers [i * n * chunkElems, ...) in n segments.
  const size_t stride = size_t(n) * chunkElems;
  auto emit = [&](size_t base, int part) {  // part 0: the first Send; 1: the middle; 2: the last Recv
    const size_t iterCount = std::min(count - base, stride);
    size_t seg = (iterCount + n - 1) / n;
    if (seg * elemSize >= 4096) seg = std::min(chunkElems, (seg + align - 1) / align * align);
    auto segStart = [&](int s) { return base + std::min(iterCount, size_t(s) * seg); };
    auto segCount = [&](int s) { return segStart(s + 1) - segStart(s); };
    auto add = [&](Prim prim, int s, bool final) {
      if (segCount(s) == 0) return;  // every rank computes the same sizes and skips alike
      Step st;
      st.prim = prim;
      st.src = src;
      st.dst = dst;
      st.recvFirst = true;  // partial sums arrive from earlier in the ring
      st.finalReduce = final;
      st.sendPeer = prim == Prim::Recv ? -1 : next;
      st.recvPeer = prim == Prim::Send ? -1 : prev;
      st.srcOffset = srcOffset + segStart(s);
      st.dstOffset = dstOffset + segStart(s);
      st.count = segCount(s);
      plan.steps.push_back(st);
    };
    if (part == 0) {
      // Reduce-scatter: segment s is summed starting at rank s+1 and ends at
      // rank s, which then owns its final value.
      add(Prim::Send, mod(me - 1), false);
    } else if (part == 1) {
      for (int j = 2; j < n; ++j) add(Prim::RecvReduceSend, mod(me - j), false);
      add(Prim::RecvReduceCopySend, me, true);
      // All-gather: pass each final segment on around the ring.
      for (int j = 1; j < n - 1; ++j) add(Prim::RecvCopySend, mod(me - j), false);
    } else {
      add(Prim::Recv, mod(me + 1), false);
    }
  };
  // One send ahead (forPiecesSendingAhead's reasons): the next iteration's
  // first segment reads only the input, in a part of it this one never
  // writes, so it leaves before this iteration's last receive.
  if (count == 0) return;
  emit(0, 0);
  for (size_t base = 0; base < count; base += stride) {
    emit(base, 1);
    if (base + stride < count) emit(base + stride, 0);
    emit(base, 2);
  }
}

void buildRingAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("ring");
  const Group& g = env.world();
  const int peers[2] = {g.at(g.me + 1), g.at(g.me - 1)};
  const size_t chunk = env.chunkBytes(peers) / req.elemSize;
  appendRingAllReduce(plan, g, req.desc.count, chunk, req.elemSize, BufId::Input, 0, BufId::Output, 0);
}

}  // namespace gyre::collectives
