#include "collectives/gather_family.h"

#include <algorithm>

#include "collectives/steps.h"

namespace gyre::collectives {

void buildRingAllGather(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("ring");
  // Around the topology's ring (each host's ranks in a row); blocks stay
  // where their ranks' numbers put them.
  const Group& g = env.world();
  const int n = g.size(), pos = g.me;
  const int next = g.at(pos + 1), prev = g.at(pos - 1);
  plan.addPeer(next);
  plan.addPeer(prev);
  const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
  const size_t count = req.desc.count;
  auto block = [&](int ringIndex) { return size_t(g.at(ringIndex)) * count; };
  // Out of place, each piece of our block goes into our output and to the
  // next rank in one pass over the input (CopySend); in place it is already
  // there and leaves from the output.
  forPiecesSendingAhead(
      count, chunk,
      [&](size_t off, size_t len) {
        if (req.inPlace) add(plan, Prim::Send, BufId::Output, block(pos) + off, BufId::Output, 0, len, next);
        else add(plan, Prim::CopySend, BufId::Input, off, BufId::Output, block(pos) + off, len, next);
      },
      [&](size_t off, size_t len) {  // the others pass through our output on their way round
        for (int k = 1; k < n - 1; ++k)
          add(plan, Prim::RecvCopySend, BufId::Output, block(pos - k) + off, BufId::Output, block(pos - k) + off, len,
              next, prev);
      },
      [&](size_t off, size_t len) {
        add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, block(pos - (n - 1)) + off, len, -1, prev);
      });
}

void buildBruckAllGather(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("bruck");
  const int n = env.nranks(), me = env.rank();
  for (int k = 1; k < n; k <<= 1) {
    plan.addPeer((me - k + n) % n);
    plan.addPeer((me + k) % n);
  }
  const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
  const size_t count = req.desc.count;
  // scratch[i] holds the block of rank me + i.
  plan.scratchElems = size_t(n) * count;
  add(plan, Prim::Copy, BufId::Input, 0, BufId::Scratch, 0, count);
  for (int k = 1; k < n; k <<= 1) {
    const size_t blocks = size_t(std::min(k, n - k));
    const int to = (me - k + n) % n, from = (me + k) % n;
    forPieces(blocks * count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Scratch, off, BufId::Scratch, 0, len, to);
      add(plan, Prim::Recv, BufId::Scratch, 0, BufId::Scratch, size_t(k) * count + off, len, -1, from);
    });
  }
  for (int i = 0; i < n; ++i)
    add(plan, Prim::Copy, BufId::Scratch, size_t(i) * count, BufId::Output, size_t((me + i) % n) * count, count);
}

void buildRingReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("ring");
  // Around the topology's ring, as the ring AllGather.
  const Group& g = env.world();
  const int n = g.size(), pos = g.me;
  const int next = g.at(pos + 1), prev = g.at(pos - 1);
  plan.addPeer(next);
  plan.addPeer(prev);
  const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
  const size_t count = req.desc.count;
  auto block = [&](int ringIndex) { return size_t(g.at(ringIndex)) * count; };
  // The block of the rank at ring place p is summed from place p+1 around
  // to p, which keeps it.
  forPiecesSendingAhead(
      count, chunk,
      [&](size_t off, size_t len) {
        add(plan, Prim::Send, BufId::Input, block(pos - 1) + off, BufId::Output, 0, len, next);
      },
      [&](size_t off, size_t len) {
        for (int j = 2; j < n; ++j)
          add(plan, Prim::RecvReduceSend, BufId::Input, block(pos - j) + off, BufId::Output, 0, len, next, prev);
      },
      [&](size_t off, size_t len) {
        add(plan, Prim::RecvReduce, BufId::Input, block(pos) + off, BufId::Output, off, len, -1, prev).finalReduce =
            true;
      });
}

void buildLinearGather(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("linear");
  const int n = env.nranks(), me = env.rank(), root = req.desc.root;
  const size_t count = req.desc.count;
  if (me != root) {
    plan.addPeer(root);
    const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Input, off, BufId::Output, 0, len, root);
    });
    return;
  }
  for (int p = 0; p < n; ++p)
    if (p != me) plan.addPeer(p);
  const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
  // Our own block first (before the lanes), then one lane per sender.
  if (!req.inPlace) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, size_t(me) * count, count);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    plan.beginLane();
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, size_t(p) * count + off, len, -1, p);
    });
  }
  plan.closeLane();
}

void buildLinearScatter(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("linear");
  const int n = env.nranks(), me = env.rank(), root = req.desc.root;
  const size_t count = req.desc.count;
  if (me != root) {
    plan.addPeer(root);
    const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, off, len, -1, root);
    });
    return;
  }
  for (int p = 0; p < n; ++p)
    if (p != me) plan.addPeer(p);
  const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
  if (!req.inPlace) add(plan, Prim::Copy, BufId::Input, size_t(me) * count, BufId::Output, 0, count);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    plan.beginLane();
    forPieces(count, chunk, [&](size_t off, size_t len) {
      add(plan, Prim::Send, BufId::Input, size_t(p) * count + off, BufId::Output, 0, len, p);
    });
  }
  plan.closeLane();
}

}  // namespace gyre::collectives
