#include "topology/rank_topology.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "topology/affinity.h"
#include "topology/detect.h"
#include "topology/detect_gpu.h"
#include "topology/topology_io.h"

namespace gyre::topology {

namespace {

struct WirePlacement {
  char gpu[16];  // "0000:17:00.0", NUL-terminated; empty for a CPU rank
  int32_t numa;
  int32_t reserved;
};

// The second exchange: where each rank sits in its host's ring, and what
// its host's graph says about the links it will use.
struct WireArrangement {
  int32_t position;  // within its host's ring
  float nicGBps;     // its NIC's speed, capped by the path to it (0: unknown)
  float ringGBps;    // its host's slowest ring hop (0: one location)
  int32_t reserved;
};

// The assigned NIC's speed in GB/s, or less where the path from the rank's
// device to it is slower (a GPU behind a narrow PCIe link); 0 when unknown.
double nicBandwidth(const Graph& g, int location, int nic) {
  if (nic < 0) return 0;
  double gbps = g.nodes[nic].speedMbps / 8000.0;
  if (gbps <= 0) return 0;
  if (location >= 0) {
    const Path p = g.path(location, nic);
    if (p.gbps > 0) gbps = std::min(gbps, p.gbps);
  }
  return gbps;
}

}  // namespace

const Graph& processTopology() {
  static std::mutex mu;
  static std::string cachedFor;
  static std::unique_ptr<Graph> cached;
  std::lock_guard<std::mutex> lock(mu);
  const char* file = getenv("GYRE_TOPO_FILE");
  const std::string key = file ? file : "";
  if (!cached || cachedFor != key) {
    cached = std::make_unique<Graph>(systemTopology(true));
    cachedFor = key;
  }
  return *cached;
}

RankTopology arrangeRanks(int rank, const std::vector<uint64_t>& hostOfRank,
                          const AllGatherFn& allGather) {
  const Graph& g = processTopology();
  const size_t n = hostOfRank.size();
  std::vector<WirePlacement> wire(n);
  WirePlacement& mine = wire[static_cast<size_t>(rank)];
  std::memset(&mine, 0, sizeof(mine));
  const std::string gpu = currentCudaDeviceBusId();
  std::strncpy(mine.gpu, gpu.c_str(), sizeof(mine.gpu) - 1);
  mine.numa = currentNuma(g);
  allGather(wire.data(), sizeof(WirePlacement));

  std::vector<Placement> placements(n);
  for (size_t r = 0; r < n; ++r) {
    placements[r].host = hostOfRank[r];
    placements[r].gpu = std::string(wire[r].gpu, strnlen(wire[r].gpu, sizeof(wire[r].gpu)));
    placements[r].numa = wire[r].numa;
  }
  const uint64_t myHost = hostOfRank[static_cast<size_t>(rank)];
  // This host's ranks' order from this host's graph; other hosts' from theirs.
  SearchResult local = search(placements, [&](uint64_t h) { return h == myHost ? &g : nullptr; });
  const int loc = locationNode(g, placements[static_cast<size_t>(rank)]);
  const std::string& nic = local.nic[static_cast<size_t>(rank)];
  const int nicNode = nic.empty() ? -1 : g.findNic(nic);
  std::vector<WireArrangement> arranged(n);
  WireArrangement& mineArranged = arranged[static_cast<size_t>(rank)];
  std::memset(&mineArranged, 0, sizeof(mineArranged));
  mineArranged.position = local.positionInHost[static_cast<size_t>(rank)];
  mineArranged.nicGBps = static_cast<float>(nicBandwidth(g, loc, nicNode));
  mineArranged.ringGBps = static_cast<float>(local.ringGBps);
  allGather(arranged.data(), sizeof(WireArrangement));

  RankTopology out;
  std::vector<int> positions(n);
  // The slowest known link of each kind, the same on every rank.
  auto slowest = [](double& acc, float v) {
    if (v > 0 && (acc == 0 || v < acc)) acc = v;
  };
  for (size_t r = 0; r < n; ++r) {
    positions[r] = arranged[r].position;
    slowest(out.networkGBps, arranged[r].nicGBps);
    slowest(out.localGBps, arranged[r].ringGBps);
  }
  out.result = combine(placements, positions);
  out.result.nic = local.nic;
  out.result.ringGBps = local.ringGBps;
  out.result.ringWorst = local.ringWorst;
  out.numa = loc >= 0 ? g.nodes[loc].numa : -1;
  // An RDMA NIC's Ethernet interface carries its TCP.
  out.nicInterface = nicNode >= 0 && !g.nodes[nicNode].netdev.empty() ? g.nodes[nicNode].netdev : nic;
  out.detail = "topology from " + g.source + ", " + (gpu.empty() ? "no GPU" : "GPU " + gpu) +
               ", NUMA node " + std::to_string(out.numa) + ", NIC " + (nic.empty() ? "none" : nic);
  // Placement only matters with several NUMA nodes. A CPU rank has no
  // device to be near: only one already confined to a node gets its memory
  // there too (an unpinned one must not pile every rank onto node 0).
  const int cpu = out.numa >= 0 ? g.cpuOfNuma(out.numa) : -1;
  if (affinityEnabled() && g.ofKind(NodeKind::Cpu).size() > 1 && cpu >= 0) {
    const std::vector<int> nodeCpus = cpusOfAffinity(g.nodes[cpu].affinity);
    bool confined = true;
    cpu_set_t mask;
    if (gpu.empty() && sched_getaffinity(0, sizeof(mask), &mask) == 0) {
      for (int c = 0; c < CPU_SETSIZE && confined; ++c)
        if (CPU_ISSET(c, &mask))
          confined = std::find(nodeCpus.begin(), nodeCpus.end(), c) != nodeCpus.end();
    }
    if (!gpu.empty() || confined) {
      setPreferredNuma(out.numa, nodeCpus);
      out.boundNuma = true;
    }
  }
  return out;
}

}  // namespace gyre::topology
