// The two trees of the double binary tree (NCCL's), shaped by the hosts:
// within each host a double binary tree over its ranks in ring order, and
// across hosts a double binary tree over the hosts whose nodes are each
// host's tree root. A host then sends and receives at most three copies of
// the data per tree over the network (its parent host and two child hosts),
// whatever its rank count, and a rank that is interior in one tree is a leaf
// in the other, within a host and across hosts.
#pragma once

#include <vector>

namespace gyre::topology {

struct Tree {
  std::vector<int> parent;                 // by rank; -1 at the root
  std::vector<std::vector<int>> children;  // by rank, in the order reductions take them
  int root = -1;
  int depth = 0;  // edges from the root to the deepest rank
};

// One slot's place in tree 0 (A) or 1 (B) of the double binary tree over n
// slots 0..n-1: its parent (-1 at the root) and children, left first.
struct TreeSlot {
  int parent = -1;
  int children[2] = {-1, -1};
  int nchildren = 0;
};
TreeSlot doubleBinaryTreeSlot(int tree, int slot, int n);

// Tree 0 or 1 over nranks ranks: hosts in ring order, each a list of its
// ranks in ring order.
Tree hostDoubleBinaryTree(const std::vector<std::vector<int>>& hosts, int tree, int nranks);

}  // namespace gyre::topology
