// The topology step of communicator creation: every rank describes where
// it sits (GPU, NUMA node) through the bootstrap's allgather, runs the
// search on its own host's graph, and the ranks agree on the ring from each
// host's answer (a second allgather). The communicator passes the
// allgather in, so this layer talks to peers only through bootstrap.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "topology/graph.h"
#include "topology/search.h"

namespace gyre::topology {

// Every rank's `bytesPerRank` bytes at data + rank * bytesPerRank, filled in.
using AllGatherFn = std::function<void(void* data, size_t bytesPerRank)>;

struct RankTopology {
  SearchResult result;     // the same on every rank, but for nic (this rank's only)
  int numa = -1;           // the node nearest this rank's device (-1: unknown)
  bool boundNuma = false;  // affinity placement is in force (several NUMA nodes, not opted out)
  std::string detail;      // for the log: graph source, GPU, NIC
  // The network interface of this rank's NIC (an RDMA NIC's Ethernet
  // interface; empty without a NIC): where its TCP data should go.
  std::string nicInterface;
  // The slowest link of each kind over all hosts, from their graphs, the
  // same on every rank (0: unknown): a ring hop within a host, and a rank's
  // NIC (its speed, or the path to it where slower). The tuner's model
  // takes them as ceilings.
  double localGBps = 0;
  double networkGBps = 0;
};

// The host's graph: GYRE_TOPO_FILE or detected, once per process (and per
// value of GYRE_TOPO_FILE); written to GYRE_TOPO_DUMP_FILE when set. Throws
// TopologyError for a bad file.
const Graph& processTopology();

RankTopology arrangeRanks(int rank, const std::vector<uint64_t>& hostOfRank,
                          const AllGatherFn& allGather);

}  // namespace gyre::topology
