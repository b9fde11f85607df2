// Double binary tree AllReduce (NCCL's): half of the vector is reduced up
// tree A and broadcast back down it, the other half the same over tree B,
// both pipelined in pieces. In one binary tree the leaves (about half the
// ranks) send and receive only one copy of the data while the interior
// ranks carry up to three; two trees in which the leaves of one are the
// interior of the other even that out, so every rank moves about as much as
// in the ring, with 2 log2(n) hops of latency instead of 2(n-1).
//
// The trees come from the topology search (src/topology/tree_shape.h): on
// one host, the double binary tree over the ranks in ring order; over
// several, one within each host and one across the hosts, so that each
// host's own ranks are summed before anything crosses the network. A host's
// root then has up to two children on its host and two on others.
#include <algorithm>

#include "base/error.h"
#include "collectives/allreduce.h"
#include "collectives/steps.h"

namespace gyre::collectives {

void buildDoubleBinaryTreeAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("double_binary_tree");
  const Group& g = env.world();
  const int me = g.ranks[static_cast<size_t>(g.me)];
  for (const topology::Tree& t : g.trees)
    if (t.parent.size() != g.ranks.size())
      throwError(gyreInternalError, "double binary tree: the communicator has no trees for its ranks");
  struct Node {
    int parent;
    const std::vector<int>* children;
  };
  const Node node[2] = {{g.trees[0].parent[me], &g.trees[0].children[me]},
                        {g.trees[1].parent[me], &g.trees[1].children[me]}};
  for (const Node& t : node) {
    if (t.parent >= 0) plan.addPeer(t.parent);
    for (int c : *t.children) plan.addPeer(c);
  }
  // Every rank must cut the halves into the same pieces: like the ring, this
  // relies on every connection carrying the same largest message.
  const size_t chunk = std::max<size_t>(1, env.chunkBytes(plan.peers) / req.elemSize);
  const size_t count = req.desc.count;

  // Half A first, rounded up so that half B starts on a 64-byte boundary
  // for the kernels (where the halves are big enough to care). Either half
  // may be empty (count < 2): it has no pieces, on every rank alike.
  const size_t align = std::max<size_t>(1, 64 / req.elemSize);
  size_t halfA = (count + 1) / 2;
  if (halfA * req.elemSize >= 4096) halfA = std::min(count, (halfA + align - 1) / align * align);
  const size_t base[2] = {0, halfA}, len[2] = {halfA, count - halfA};
  const size_t npieces[2] = {(len[0] + chunk - 1) / chunk, (len[1] + chunk - 1) / chunk};
  auto pieceOff = [&](int t, size_t j) { return base[t] + j * chunk; };
  auto pieceLen = [&](int t, size_t j) { return std::min(chunk, len[t] - j * chunk); };

  // A rank with several children sums the first child's piece with its own
  // in scratch (one piece, reused: the next step sends it on), then each
  // further child's into it, so the output is written once, with the final
  // value; the root's last reduction writes the output.
  bool severalChildren = false;
  for (const Node& t : node) severalChildren |= t.children->size() >= 2;
  if (severalChildren) plan.scratchElems = std::min(chunk, std::max(len[0], len[1]));

  // Reduce piece j of tree t up to its root, children in the tree's order:
  // a fixed order, so the same bits on every run; the root's last reduction
  // is the only one that divides (average).
  auto up = [&](int t, size_t j) {
    const Node& nd = node[t];
    const std::vector<int>& kids = *nd.children;
    const size_t off = pieceOff(t, j), l = pieceLen(t, j);
    const bool root = nd.parent < 0;
    if (kids.empty()) {
      if (root)  // one rank (the planner never gets here, but stay correct)
        add(plan, Prim::Copy, BufId::Input, off, BufId::Output, off, l).finalReduce = true;
      else
        add(plan, Prim::Send, BufId::Input, off, BufId::Output, off, l, nd.parent);
      return;
    }
    // Into scratch while more children follow; the last one's sum goes on.
    BufId acc = BufId::Input;
    size_t accOff = off;
    for (size_t i = 0; i + 1 < kids.size(); ++i) {
      add(plan, Prim::RecvReduce, acc, accOff, BufId::Scratch, 0, l, -1, kids[i]).recvFirst = i == 0;
      acc = BufId::Scratch;
      accOff = 0;
    }
    Step& s = root ? add(plan, Prim::RecvReduce, acc, accOff, BufId::Output, off, l, -1, kids.back())
                   : add(plan, Prim::RecvReduceSend, acc, accOff, BufId::Output, off, l, nd.parent, kids.back());
    s.recvFirst = kids.size() == 1;
    s.finalReduce = root;
  };

  // Copy piece j of tree t from its root down to every rank. The input's
  // piece was read by up(t, j) already, so receiving into the output is
  // safe in place too.
  auto down = [&](int t, size_t j) {
    const Node& nd = node[t];
    const std::vector<int>& kids = *nd.children;
    const size_t off = pieceOff(t, j), l = pieceLen(t, j);
    size_t firstChild = 0;
    if (nd.parent >= 0) {
      if (kids.empty()) {
        add(plan, Prim::Recv, BufId::Output, off, BufId::Output, off, l, -1, nd.parent);
        return;
      }
      add(plan, Prim::RecvCopySend, BufId::Output, off, BufId::Output, off, l, kids[0], nd.parent);
      firstChild = 1;
    }
    for (size_t i = firstChild; i < kids.size(); ++i)
      add(plan, Prim::Send, BufId::Output, off, BufId::Output, off, l, kids[i]);
  };

  // One lane (tree A's and tree B's neighbours can be the same ranks, and
  // all messages to or from a peer must stay in one lane), in one global
  // order of events that every rank follows: at tick k, A.up(k), B.up(k),
  // A.down(k-L), B.down(k-L). No deadlock, for any L >= 0 and any
  // connection that holds one message: an event needs only the same event
  // at tree neighbours (children first going up, the parent first coming
  // down) or earlier events (a root's down(j) its up(j), L ticks before);
  // within one event each connection carries at most one message; and every
  // rank sends and receives in the global order, so a message a rank waits
  // for, or room it waits for, only depends on events not after its own.
  // L = 2 * depth lets a leaf send L pieces up before it first needs one
  // back: about a round trip up and down the tree, so it rarely waits.
  const size_t lag = size_t(2 * std::max(g.trees[0].depth, g.trees[1].depth));
  const size_t ticks = std::max(npieces[0], npieces[1]);
  for (size_t k = 0; k < ticks + lag; ++k) {
    for (int t = 0; t < 2; ++t)
      if (k < npieces[t]) up(t, k);
    if (k < lag) continue;
    for (int t = 0; t < 2; ++t)
      if (k - lag < npieces[t]) down(t, k - lag);
  }
}

}  // namespace gyre::collectives
