// The shapes. Tree A is an in-order tree over slots 0..n-1: the root of a
// range [lo, hi) is its middle, the roots of [lo, root) and [root+1, hi) are
// its children. The middle is rounded (by one) to sit an odd distance from
// lo, which puts every leaf on an even slot and every interior node on an
// odd one, at the least depth, floor(log2 n). Tree B is the same shape over
// slots renamed v -> n-1-v when n is even (even <-> odd: the leaves of A are
// exactly the interior of B), or v -> (v+1) % n when n is odd (A's leaves
// 2, 4, ..., n-1 become interior: slot 0 alone is a leaf in both). No slot
// is interior in both trees for any n, and both have depth floor(log2 n).
// The shapes for 2..8 slots, "parent->children" (left child first), from
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
// (tests/topology/topology_test.cc checks, for n up to 200: one root,
// parents and children agree, depth floor(log2 n), no slot interior in
// both trees.)
#include "topology/tree_shape.h"

#include <algorithm>

namespace gyre::topology {

namespace {

// The root of [lo, hi) (lo even): the middle, moved by one where needed to
// be an odd distance from lo, so both subranges again start on even slots.
int rangeRoot(int lo, int hi) {
  const int size = hi - lo;
  if (size == 1) return lo;
  int off = size % 2 == 0 ? size / 2 - 1 : (size - 1) / 2;
  if (off % 2 == 0) off += 1;  // size even: the other middle; odd: one right of it (still inside)
  return lo + off;
}

// Tree B's slot for virtual (tree A shape) slot v, and back.
int toReal(int tree, int v, int n) {
  if (tree == 0) return v;
  return n % 2 == 0 ? n - 1 - v : (v + 1) % n;
}
int toVirtual(int tree, int r, int n) {
  if (tree == 0) return r;
  return n % 2 == 0 ? n - 1 - r : (r - 1 + n) % n;
}

}  // namespace

TreeSlot doubleBinaryTreeSlot(int tree, int slot, int n) {
  TreeSlot node;
  const int v = toVirtual(tree, slot, n);
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
  node.parent = parent < 0 ? -1 : toReal(tree, parent, n);
  if (lo < v) node.children[node.nchildren++] = toReal(tree, rangeRoot(lo, v), n);
  if (v + 1 < hi) node.children[node.nchildren++] = toReal(tree, rangeRoot(v + 1, hi), n);
  return node;
}

Tree hostDoubleBinaryTree(const std::vector<std::vector<int>>& hosts, int tree, int nranks) {
  Tree t;
  t.parent.assign(static_cast<size_t>(nranks), -1);
  t.children.assign(static_cast<size_t>(nranks), {});
  const int h = static_cast<int>(hosts.size());
  std::vector<int> head(static_cast<size_t>(h), -1);  // each host's root
  // Within each host: children before the links to other hosts, so a
  // host's own partial sum is formed first.
  for (int i = 0; i < h; ++i) {
    const std::vector<int>& members = hosts[static_cast<size_t>(i)];
    const int k = static_cast<int>(members.size());
    for (int v = 0; v < k; ++v) {
      const TreeSlot s = doubleBinaryTreeSlot(tree, v, k);
      const int r = members[static_cast<size_t>(v)];
      if (s.parent < 0) head[static_cast<size_t>(i)] = r;
      else t.parent[static_cast<size_t>(r)] = members[static_cast<size_t>(s.parent)];
      for (int c = 0; c < s.nchildren; ++c)
        t.children[static_cast<size_t>(r)].push_back(members[static_cast<size_t>(s.children[c])]);
    }
  }
  for (int i = 0; i < h; ++i) {
    const TreeSlot s = doubleBinaryTreeSlot(tree, i, h);
    const int r = head[static_cast<size_t>(i)];
    if (s.parent < 0) t.root = r;
    else t.parent[static_cast<size_t>(r)] = head[static_cast<size_t>(s.parent)];
    for (int c = 0; c < s.nchildren; ++c)
      t.children[static_cast<size_t>(r)].push_back(head[static_cast<size_t>(s.children[c])]);
  }
  for (int r = 0; r < nranks; ++r) {
    int d = 0;
    for (int p = t.parent[static_cast<size_t>(r)]; p >= 0; p = t.parent[static_cast<size_t>(p)]) ++d;
    t.depth = std::max(t.depth, d);
  }
  return t;
}

}  // namespace gyre::topology
