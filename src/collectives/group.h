// A subset of the communicator's ranks that an algorithm runs over, so
// builders compose: a hierarchical AllReduce is a reduce over the ranks of a
// host, a ring over the hosts' leaders, and a broadcast back.
#pragma once

#include <cstddef>
#include <vector>

#include "topology/tree_shape.h"

namespace gyre::collectives {

struct Group {
  std::vector<int> ranks;  // communicator ranks, in the group's order
  int me = 0;              // this rank's index in ranks
  // The communicator's two trees over these ranks (communicator ranks), from
  // the topology search; the world group has them, subgroups do not.
  topology::Tree trees[2];
  int size() const { return static_cast<int>(ranks.size()); }
  int at(int i) const { return ranks[((i % size()) + size()) % size()]; }  // wraps
  int indexOf(int rank) const {  // -1 when not a member
    for (int i = 0; i < size(); ++i)
      if (ranks[static_cast<size_t>(i)] == rank) return i;
    return -1;
  }

  static Group all(int rank, int nranks) {
    Group g;
    g.ranks.resize(static_cast<size_t>(nranks));
    for (int r = 0; r < nranks; ++r) g.ranks[r] = r;
    g.me = rank;
    return g;
  }
};

}  // namespace gyre::collectives
