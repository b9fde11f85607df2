// A subset of the communicator's ranks that an algorithm runs over, so
// builders compose: a hierarchical AllReduce is a reduce over the ranks of a
// host, a ring over the hosts' leaders, and a broadcast back.
#pragma once

#include <cstddef>
#include <vector>

namespace gyre::collectives {

struct Group {
  std::vector<int> ranks;  // communicator ranks, in the group's order
  int me = 0;              // this rank's index in ranks
  int size() const { return static_cast<int>(ranks.size()); }
  int at(int i) const { return ranks[((i % size()) + size()) % size()]; }  // wraps

  static Group all(int rank, int nranks) {
    Group g;
    g.ranks.resize(static_cast<size_t>(nranks));
    for (int r = 0; r < nranks; ++r) g.ranks[r] = r;
    g.me = rank;
    return g;
  }
};

}  // namespace gyre::collectives
