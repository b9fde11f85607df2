#include "collectives/rooted.h"

#include <algorithm>

#include "collectives/steps.h"

namespace gyre::collectives {

BinomialTree binomialTree(int rank, int n, int root) {
  BinomialTree t;
  const int v = (rank - root + n) % n;  // virtual rank: the root is 0
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      t.parent = (v - mask + root) % n;
      break;
    }
    mask <<= 1;
  }
  // Children sit at v + m for every m below the bit that names the parent
  // (all bits, at the root); the largest subtree first.
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n) t.children[t.nchildren++] = (v + mask + root) % n;
  return t;
}

void buildChainBroadcast(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("chain");
  // Along the topology's ring from the root: each host's ranks in a row.
  const Group& g = env.world();
  const int n = g.size();
  const int pos = (g.me - g.indexOf(req.desc.root) + n) % n;
  const int prev = pos > 0 ? g.at(g.me - 1) : -1;
  const int next = pos < n - 1 ? g.at(g.me + 1) : -1;
  if (prev >= 0) plan.addPeer(prev);
  if (next >= 0) plan.addPeer(next);
  const size_t chunk = chainPieceElems(req, env.chunkBytes(plan.peers));
  const size_t count = req.desc.count;
  if (pos == 0 && next < 0 && !req.inPlace) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count, -1, -1);
  forPieces(count, chunk, [&](size_t off, size_t len) {
    if (pos == 0 && next < 0) return;  // alone: the copy was all
    if (pos == 0)  // the root sends each piece as it copies it: one read of the input
      add(plan, req.inPlace ? Prim::Send : Prim::CopySend, BufId::Input, off, BufId::Output, off, len, next, -1);
    else if (next >= 0)
      add(plan, Prim::RecvCopySend, BufId::Output, off, BufId::Output, off, len, next, prev);
    else
      add(plan, Prim::Recv, BufId::Output, off, BufId::Output, off, len, -1, prev);
  });
}

void buildTreeBroadcast(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("binomial_tree");
  const int n = env.nranks(), me = env.rank(), root = req.desc.root;
  const BinomialTree t = binomialTree(me, n, root);
  if (t.parent >= 0) plan.addPeer(t.parent);
  for (int i = 0; i < t.nchildren; ++i) plan.addPeer(t.children[i]);
  const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
  const size_t count = req.desc.count;
  const bool isRoot = t.parent < 0;
  // Out of place, the root copies each piece as it sends it to its first
  // child (one read of the input); alone, it only copies.
  const bool copySend = isRoot && !req.inPlace && t.nchildren > 0;
  if (isRoot && !req.inPlace && !copySend) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count, -1, -1);
  const BufId from = isRoot ? BufId::Input : BufId::Output;
  forPieces(count, chunk, [&](size_t off, size_t len) {
    if (!isRoot) add(plan, Prim::Recv, BufId::Output, off, BufId::Output, off, len, -1, t.parent);
    for (int i = 0; i < t.nchildren; ++i)
      add(plan, i == 0 && copySend ? Prim::CopySend : Prim::Send, from, off, BufId::Output, off, len,
          t.children[i], -1);
  });
}

void buildChainReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("chain");
  // Along the topology's ring, ending at the root: it starts just after it.
  const Group& g = env.world();
  const int n = g.size();
  const int pos = (g.me - g.indexOf(req.desc.root) - 1 + 2 * n) % n;
  const int prev = pos > 0 ? g.at(g.me - 1) : -1;
  const int next = pos < n - 1 ? g.at(g.me + 1) : -1;
  if (prev >= 0) plan.addPeer(prev);
  if (next >= 0) plan.addPeer(next);
  const size_t chunk = chainPieceElems(req, env.chunkBytes(plan.peers));
  forPieces(req.desc.count, chunk, [&](size_t off, size_t len) {
    Step& s = pos == 0    ? add(plan, Prim::Send, BufId::Input, off, BufId::Output, off, len, next)
              : next >= 0 ? add(plan, Prim::RecvReduceSend, BufId::Input, off, BufId::Output, off, len, next, prev)
                          : add(plan, Prim::RecvReduce, BufId::Input, off, BufId::Output, off, len, -1, prev);
    s.finalReduce = pos > 0 && next < 0;  // the root, last in the chain
    s.recvFirst = true;  // the sum so far (earlier in the chain) on the left
  });
}

void buildTreeReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("binomial_tree");
  const int n = env.nranks(), me = env.rank(), root = req.desc.root;
  const BinomialTree t = binomialTree(me, n, root);
  if (t.parent >= 0) plan.addPeer(t.parent);
  for (int i = 0; i < t.nchildren; ++i) plan.addPeer(t.children[i]);
  const size_t chunk = env.chunkBytes(plan.peers) / req.elemSize;
  const bool isRoot = t.parent < 0;
  // The partial result of a piece: the output at the root, else a piece of
  // scratch, reused piece after piece (a piece is sent before the next one
  // is started).
  const BufId acc = isRoot ? BufId::Output : BufId::Scratch;
  if (!isRoot) plan.scratchElems = std::min(chunk, req.desc.count);
  forPieces(req.desc.count, chunk, [&](size_t off, size_t len) {
    const size_t accOff = isRoot ? off : 0;
    // Children from the nearest (smallest subtree) up, our own data on the
    // left of every reduction: a fixed order, the same on every run.
    bool first = true;
    for (int i = t.nchildren - 1; i >= 0; --i) {
      Step& s = add(plan, Prim::RecvReduce, first ? BufId::Input : acc, first ? off : accOff, acc, accOff, len, -1,
                    t.children[i]);
      s.recvFirst = false;
      s.finalReduce = isRoot && i == 0;
      first = false;
    }
    if (isRoot) {
      if (first) {  // a root without children: one rank
        add(plan, Prim::Copy, BufId::Input, off, BufId::Output, off, len).finalReduce = true;
      }
    } else {
      add(plan, Prim::Send, first ? BufId::Input : acc, first ? off : accOff, BufId::Output, 0, len,
                                    t.parent, -1);
    }
  });
}

}  // namespace gyre::collectives
