// Double binary tree AllReduce (NCCL's): half of the vector is reduced up
// tree A and broadcast back down it, the other half the same over tree B,
// both pipelined in pieces. In one binary tree the leaves (about half the
// ranks) send and receive only one copy of the data while the interior
// ranks carry up to three; two trees in which the leaves of one are the
// interior of the other even that out, so every rank moves about as much as
// in the ring, with 2 log2(n) hops of latency instead of 2(n-1).
//
// The shapes. Tree A is an in-order tree over ranks 0..n-1: the root of a
// range [lo, hi) is its middle, the roots of [lo, root) and [root+1, hi) are
// its children. The middle is rounded (by one) to sit an odd distance from
// lo, which puts every leaf on an even rank and every interior node on an
// odd one, at the least depth, floor(log2 n). Tree B is the same shape over
// ranks renamed r -> n-1-r when n is even (even <-> odd: the leaves of A are
// exactly the interior of B), or r -> (r+1) % n when n is odd (A's leaves
// 2, 4, ..., n-1 become interior: rank 0 alone is a leaf in both). No rank
// is interior in both trees for any n, and both have depth floor(log2 n).
// The shapes for 2..8 ranks, "parent->children" (left child first), from
// the root down:
//
//   n=2  A: 1->0                            B: 0->1
//   n=3  A: 1->0,2                          B: 2->1,0
//   n=4  A: 1->0,3; 3->2                    B: 2->3,0; 0->1
//   n=5  A: 3->1,4; 1->0,2                  B: 4->2,0; 2->1,3
//   n=6  A: 3->1,5; 1->0,2; 5->4            B: 2->4,0; 4->5,3; 0->1
//   n=7  A: 3->1,5; 1->0,2; 5->4,6          B: 4->2,6; 2->1,3; 6->5,0
//   n=8  A: 3->1,5; 1->0,2; 5->4,7; 7->6    B: 4->6,2; 6->7,5; 2->3,0; 0->1
//
// (Checked for n up to 200 when written: one root, parents and children
// agree, depth floor(log2 n), no rank interior in both trees.)
#include <algorithm>

#include "collectives/allreduce.h"
#include "collectives/steps.h"

namespace gyre::collectives {

namespace {

// The root of [lo, hi) (lo even): the middle, moved by one where needed to
// be an odd distance from lo, so both subranges again start on even ranks.
int rangeRoot(int lo, int hi) {
  const int size = hi - lo;
  if (size == 1) return lo;
  int off = size % 2 == 0 ? size / 2 - 1 : (size - 1) / 2;
  if (off % 2 == 0) off += 1;  // size even: the other middle; odd: one right of it (still inside)
  return lo + off;
}

// Tree B's rank for virtual (tree A shape) rank v, and back.
int toReal(int tree, int v, int n) {
  if (tree == 0) return v;
  return n % 2 == 0 ? n - 1 - v : (v + 1) % n;
}
int toVirtual(int tree, int r, int n) {
  if (tree == 0) return r;
  return n % 2 == 0 ? n - 1 - r : (r - 1 + n) % n;
}

}  // namespace

BinaryTreeNode doubleBinaryTreeNode(int tree, int rank, int n) {
  BinaryTreeNode node;
  const int v = toVirtual(tree, rank, n);
  int lo = 0, hi = n, parent = -1;
  for (;;) {  // down from the root to v: depth steps
    const int m = rangeRoot(lo, hi);
    if (m == v) break;
    parent = m;
    if (v < m)
      hi = m;
    else
      lo = m + 1;
  }
  const int m = v;
  node.parent = parent < 0 ? -1 : toReal(tree, parent, n);
  if (lo < m) node.children[node.nchildren++] = toReal(tree, rangeRoot(lo, m), n);
  if (m + 1 < hi) node.children[node.nchildren++] = toReal(tree, rangeRoot(m + 1, hi), n);
  return node;
}

void buildDoubleBinaryTreeAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("double_binary_tree");
  const Group& g = env.world();
  const int n = g.size(), me = g.me;
  BinaryTreeNode node[2] = {doubleBinaryTreeNode(0, me, n), doubleBinaryTreeNode(1, me, n)};
  for (const BinaryTreeNode& t : node) {
    if (t.parent >= 0) plan.addPeer(g.ranks[t.parent]);
    for (int i = 0; i < t.nchildren; ++i) plan.addPeer(g.ranks[t.children[i]]);
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

  // A non-root with two children sums its first child's piece with its own
  // in scratch (one piece, reused: the next step sends it on), so the
  // output is written once, with the final value; so does the root, whose
  // second reduction then writes the output.
  bool twoChildren = false;
  for (const BinaryTreeNode& t : node) twoChildren |= t.nchildren == 2;
  if (twoChildren) plan.scratchElems = std::min(chunk, std::max(len[0], len[1]));

  // Reduce piece j of tree t up to its root. Operands keep in-order (left
  // child, us, right child): a fixed order, so the same bits on every run;
  // the root's last reduction is the only one that divides (average).
  auto up = [&](int t, size_t j) {
    const BinaryTreeNode& nd = node[t];
    const size_t off = pieceOff(t, j), l = pieceLen(t, j);
    const int parent = nd.parent >= 0 ? g.ranks[nd.parent] : -1;
    const bool root = parent < 0;
    if (nd.nchildren == 0) {
      if (root)  // one rank (the planner never gets here, but stay correct)
        add(plan, Prim::Copy, BufId::Input, off, BufId::Output, off, l).finalReduce = true;
      else
        add(plan, Prim::Send, BufId::Input, off, BufId::Output, off, l, parent);
      return;
    }
    const int c0 = g.ranks[nd.children[0]];
    // The child is on the left of us when its virtual rank is smaller.
    const bool c0Left = toVirtual(t, nd.children[0], n) < toVirtual(t, me, n);
    if (nd.nchildren == 1) {
      Step& s = root ? add(plan, Prim::RecvReduce, BufId::Input, off, BufId::Output, off, l, -1, c0)
                     : add(plan, Prim::RecvReduceSend, BufId::Input, off, BufId::Output, off, l,
                           parent, c0);
      s.recvFirst = c0Left;
      s.finalReduce = root;
      return;
    }
    const int c1 = g.ranks[nd.children[1]];  // the right child
    add(plan, Prim::RecvReduce, BufId::Input, off, BufId::Scratch, 0, l, -1, c0).recvFirst = true;
    Step& s = root ? add(plan, Prim::RecvReduce, BufId::Scratch, 0, BufId::Output, off, l, -1, c1)
                   : add(plan, Prim::RecvReduceSend, BufId::Scratch, 0, BufId::Output, off, l,
                         parent, c1);
    s.recvFirst = false;
    s.finalReduce = root;
  };

  // Copy piece j of tree t from its root down to every rank. The input's
  // piece was read by up(t, j) already, so receiving into the output is
  // safe in place too.
  auto down = [&](int t, size_t j) {
    const BinaryTreeNode& nd = node[t];
    const size_t off = pieceOff(t, j), l = pieceLen(t, j);
    int firstChild = 0;
    if (nd.parent >= 0) {
      const int parent = g.ranks[nd.parent];
      if (nd.nchildren == 0) {
        add(plan, Prim::Recv, BufId::Output, off, BufId::Output, off, l, -1, parent);
        return;
      }
      add(plan, Prim::RecvCopySend, BufId::Output, off, BufId::Output, off, l,
          g.ranks[nd.children[0]], parent);
      firstChild = 1;
    }
    for (int i = firstChild; i < nd.nchildren; ++i)
      add(plan, Prim::Send, BufId::Output, off, BufId::Output, off, l, g.ranks[nd.children[i]]);
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
  int depth = 0;
  while ((2 << depth) <= n) ++depth;  // floor(log2 n)
  const size_t lag = size_t(2 * depth);
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
