// The search: from the ranks' placement (host, GPU, NUMA node) and each
// host's graph, the ring order, the trees, each rank's NIC, and the
// transport per peer pair. Deterministic: every rank that runs it on the
// same inputs gets the same answer.
//
// The ring keeps each host's ranks together (hosts in order of their first
// rank) and orders them within a host so that the slowest hop is as fast as
// possible (NVLink before PCIe before the socket link), preferring, among
// equally fast orders, the one whose hops have the better path classes (a
// PCIe box's ring then crosses the host bridge only twice). Ranks that share
// a device (CPU ranks on one NUMA node) stay in rank order, so CPU-only
// hosts keep the identity order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "topology/graph.h"
#include "topology/tree_shape.h"

namespace gyre::topology {

struct Placement {
  uint64_t host = 0;
  std::string gpu;  // PCI address of the rank's GPU; empty for a CPU rank
  int numa = 0;     // NUMA node of the rank's CPUs
};

enum class TransportKind { Shm, Net };
const char* transportKindName(TransportKind t);

struct SearchResult {
  std::vector<int> ring;            // ranks in ring order
  std::vector<int> positionInHost;  // by rank: its place among its host's ranks in the ring
  double ringGBps = 0;              // slowest hop within a host (0: a single location)
  PathClass ringWorst = PathClass::LOC;
  Tree trees[2];
  std::vector<std::string> nic;  // by rank (empty when its host's graph has none or is unknown)
  std::vector<uint64_t> hosts;   // by rank, from the placements

  TransportKind transport(int a, int b) const {
    return hosts[static_cast<size_t>(a)] == hosts[static_cast<size_t>(b)] ? TransportKind::Shm
                                                                          : TransportKind::Net;
  }
  std::string describeRing() const;
  std::string describeTree(int t) const;
};

// The graph of a host, or nullptr when unknown (its ranks then stay in rank
// order and get no NIC).
using GraphOf = std::function<const Graph*(uint64_t host)>;

SearchResult search(const std::vector<Placement>& ranks, const GraphOf& graphOf);

// The ring from each rank's position within its host (as each host's own
// ranks computed it): how ranks that know only their own host's graph agree
// on the whole ring. The trees (tree_shape.h) follow the ring.
SearchResult combine(const std::vector<Placement>& ranks, const std::vector<int>& positionInHost);

// The graph node a rank sits at: its GPU, else its NUMA node's CPU (-1: none).
int locationNode(const Graph& g, const Placement& p);

}  // namespace gyre::topology
