#include "sim/cluster.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace gyre::sim {

namespace {
void positive(double v, const char* name) {
  if (!(v > 0) || !std::isfinite(v)) throwError(gyreInvalidArgument, std::string("cluster: ") + name + " must be positive");
}
void nonNegative(double v, const char* name) {
  if (!(v >= 0) || !std::isfinite(v))
    throwError(gyreInvalidArgument, std::string("cluster: ") + name + " must be zero or more");
}
}  // namespace

void ClusterSpec::validate() const {
  if (hosts < 1) throwError(gyreInvalidArgument, "cluster: hosts must be at least 1");
  if (ranksPerHost < 1) throwError(gyreInvalidArgument, "cluster: ranks per host must be at least 1");
  if (nicsPerHost < 1 || ranksPerHost % nicsPerHost != 0)
    throwError(gyreInvalidArgument, "cluster: NICs per host must be at least 1 and divide the ranks per host (" +
                                        std::to_string(ranksPerHost) + ")");
  if (hostsPerLeaf < 1) throwError(gyreInvalidArgument, "cluster: hosts per leaf switch must be at least 1");
  if (!(oversubscription >= 1) || !std::isfinite(oversubscription))
    throwError(gyreInvalidArgument, "cluster: oversubscription must be 1 or more");
  positive(intraBytesPerSecond, "the intra-host bandwidth");
  positive(nicBytesPerSecond, "the NIC bandwidth");
  positive(copyBytesPerSecond, "the copy rate");
  positive(reduceBytesPerSecond, "the reduction rate");
  nonNegative(hostMemoryBytesPerSecond, "the host memory bandwidth");
  nonNegative(intraLatency, "the intra-host latency");
  nonNegative(nicLatency, "the NIC latency");
  nonNegative(switchLatency, "the switch latency");
  nonNegative(stepOverhead, "the step overhead");
  nonNegative(cacheBytes, "the cache size");
  nonNegative(cacheBytesPerRank, "the cache footprint per rank");
  if (!(cacheSpeedup >= 1) || !std::isfinite(cacheSpeedup))
    throwError(gyreInvalidArgument, "cluster: the cache speedup must be 1 or more");
  if (sharedCoreCacheSpeedup != 0 && (!(sharedCoreCacheSpeedup >= 1) || !std::isfinite(sharedCoreCacheSpeedup)))
    throwError(gyreInvalidArgument, "cluster: the shared core's cache speedup must be 1 or more (0: the cache speedup)");
  nonNegative(fifoSlotBytes, "the FIFO slot size");
  if (coresPerHost < 0 || coresPerHost > (1 << 12)) throwError(gyreInvalidArgument, "cluster: the cores per host must be 0 to 4096");
  nonNegative(coreBytesPerSecond, "the core rate");
  nonNegative(coreReadBytesPerSecond, "the core read rate");
  nonNegative(coreSwitchSeconds, "the core switch cost");
  nonNegative(peerReadBytesPerSecond, "the peer read rate");
  nonNegative(secondWriteCost, "the second write cost");
  if (fifoSlots < 2 || fifoSlots > 64) throwError(gyreInvalidArgument, "cluster: the FIFO slots must be 2 to 64");
}

double Cluster::fifoSlot(int from, int to) const { return sameHost(from, to) ? spec_.fifoSlotBytes : 0; }

double Cluster::fifoFill(int from, int to, double bytes) const {
  return std::min(bytes, fifoSlot(from, to)) / spec_.intraBytesPerSecond;
}

int Cluster::coreOf(int rank) const {
  if (cores_.empty()) return -1;
  const int c = coresUsed();
  return cores_[static_cast<size_t>(hostOf(rank) * c + rank % spec_.ranksPerHost % c)];
}

ClusterSpec inCache(const ClusterSpec& spec, double workingSetBytes) {
  const double speedup =
      spec.ranksShareCores() && spec.sharedCoreCacheSpeedup > 0 ? spec.sharedCoreCacheSpeedup : spec.cacheSpeedup;
  if (spec.cacheBytes <= 0 || speedup == 1 || workingSetBytes <= 0) return spec;
  const double cached = std::min(1.0, spec.cacheBytes / workingSetBytes);
  const double faster = 1 / (cached / speedup + (1 - cached));
  ClusterSpec s = spec;
  s.intraBytesPerSecond *= faster;
  s.hostMemoryBytesPerSecond *= faster;
  s.copyBytesPerSecond *= faster;
  s.reduceBytesPerSecond *= faster;
  s.coreBytesPerSecond *= faster;
  s.coreReadBytesPerSecond *= faster;
  s.peerReadBytesPerSecond *= faster;
  return s;
}

Cluster::Cluster(const ClusterSpec& spec, FlowNetwork& net) : spec_(spec) {
  spec_.validate();
  const int n = spec_.nranks();
  auto add = [&](std::string name, double bw, double latency, LinkKind kind, int owner) {
    const int l = net.addLink(std::move(name), bw, latency);
    kind_.resize(static_cast<size_t>(l) + 1);
    owner_.resize(static_cast<size_t>(l) + 1, -1);
    kind_[static_cast<size_t>(l)] = kind;
    owner_[static_cast<size_t>(l)] = owner;
    return l;
  };
  for (int r = 0; r < n; ++r) {
    const std::string at = "rank " + std::to_string(r);
    intraUp_.push_back(add(at + " to its host switch", spec_.intraBytesPerSecond, spec_.intraLatency, LinkKind::IntraUp, r));
    intraDown_.push_back(add(at + " from its host switch", spec_.intraBytesPerSecond, 0, LinkKind::IntraDown, r));
  }
  if (spec_.hostMemoryBytesPerSecond > 0)
    for (int h = 0; h < spec_.hosts; ++h)
      hostMemory_.push_back(add("host " + std::to_string(h) + "'s memory", spec_.hostMemoryBytesPerSecond, 0,
                                LinkKind::HostMemory, h * spec_.ranksPerHost));
  // A core's owner is the first rank on it: its image under a symmetry is
  // the core of the owner's image (clusterSymmetries keeps only those that
  // map the ranks of one core onto the ranks of one core). Cores no rank
  // runs on are not made.
  for (int h = 0; h < spec_.hosts; ++h)
    for (int c = 0; c < coresUsed(); ++c)
      cores_.push_back(add("host " + std::to_string(h) + "'s core " + std::to_string(c), spec_.coreRate(), 0,
                           LinkKind::Core, h * spec_.ranksPerHost + c));
  const int nics = spec_.hosts * spec_.nicsPerHost;
  const int ranksPerNic = spec_.ranksPerHost / spec_.nicsPerHost;
  for (int i = 0; i < nics; ++i) {
    const std::string at = "NIC " + std::to_string(i);
    const int first = i * ranksPerNic;  // NICs are numbered host by host, as their ranks
    nicUp_.push_back(add(at + " to its leaf", spec_.nicBytesPerSecond, spec_.nicLatency + spec_.switchLatency,
                         LinkKind::NicUp, first));
    nicDown_.push_back(add(at + " from its leaf", spec_.nicBytesPerSecond, spec_.nicLatency, LinkKind::NicDown, first));
  }
  const int leaves = (spec_.hosts + spec_.hostsPerLeaf - 1) / spec_.hostsPerLeaf;
  if (leaves > 1) {
    for (int l = 0; l < leaves; ++l) {
      const int hostsHere = std::min(spec_.hostsPerLeaf, spec_.hosts - l * spec_.hostsPerLeaf);
      const double up = hostsHere * spec_.nicsPerHost * spec_.nicBytesPerSecond / spec_.oversubscription;
      const std::string at = "leaf " + std::to_string(l);
      // Through the spine: one more switch each way.
      const int first = l * spec_.hostsPerLeaf * spec_.ranksPerHost;
      leafUp_.push_back(add(at + " to the spine", up, spec_.switchLatency, LinkKind::LeafUp, first));
      leafDown_.push_back(add(at + " from the spine", up, spec_.switchLatency, LinkKind::LeafDown, first));
    }
  }
}

int Cluster::nicOf(int rank) const {
  const int host = hostOf(rank);
  const int local = rank % spec_.ranksPerHost;
  return host * spec_.nicsPerHost + local / (spec_.ranksPerHost / spec_.nicsPerHost);
}

int Cluster::sameLinkOf(int link, int rank) const {
  const size_t r = static_cast<size_t>(rank);
  switch (kind_[static_cast<size_t>(link)]) {
    case LinkKind::IntraUp: return intraUp_[r];
    case LinkKind::IntraDown: return intraDown_[r];
    case LinkKind::HostMemory: return hostMemory_[static_cast<size_t>(hostOf(rank))];
    case LinkKind::Core: return coreOf(rank);
    case LinkKind::NicUp: return nicUp_[static_cast<size_t>(nicOf(rank))];
    case LinkKind::NicDown: return nicDown_[static_cast<size_t>(nicOf(rank))];
    case LinkKind::LeafUp: return leafUp_[static_cast<size_t>(leafOf(hostOf(rank)))];
    case LinkKind::LeafDown: return leafDown_[static_cast<size_t>(leafOf(hostOf(rank)))];
  }
  return link;
}

std::vector<int> Cluster::path(int from, int to) const {
  const int n = spec_.nranks();
  if (from < 0 || from >= n || to < 0 || to >= n || from == to)
    throwError(gyreInternalError, "simulator: no path from rank " + std::to_string(from) + " to rank " + std::to_string(to));
  const size_t f = static_cast<size_t>(from), t = static_cast<size_t>(to);
  const int hf = hostOf(from), ht = hostOf(to);
  if (hf == ht) {
    if (hostMemory_.empty()) return {intraUp_[f], intraDown_[t]};
    return {intraUp_[f], hostMemory_[static_cast<size_t>(hf)], intraDown_[t]};
  }
  std::vector<int> p{nicUp_[static_cast<size_t>(nicOf(from))]};
  const int lf = leafOf(hf), lt = leafOf(ht);
  if (lf != lt) {
    p.push_back(leafUp_[static_cast<size_t>(lf)]);
    p.push_back(leafDown_[static_cast<size_t>(lt)]);
  }
  p.push_back(nicDown_[static_cast<size_t>(nicOf(to))]);
  return p;
}

}  // namespace gyre::sim
