#include "sim/simulate.h"

#include <algorithm>

#include "base/error.h"
#include "topology/tree_shape.h"

namespace gyre::sim {

namespace {

// A rank of the simulated cluster as the planner sees a communicator.
class SimPlanEnv final : public collectives::PlanEnv {
 public:
  SimPlanEnv(const ClusterSpec& spec, const collectives::TuningParams& tuning, const collectives::Group& world, int rank)
      : spec_(spec), tuning_(tuning), world_(world), rank_(rank) {
    world_.me = rank;
  }
  const collectives::TuningParams& tuning() const override { return tuning_; }
  int rank() const override { return rank_; }
  int nranks() const override { return spec_.nranks(); }
  const collectives::Group& world() const override { return world_; }
  bool sameHost(int peer) const override { return hostIndex(peer) == hostIndex(rank_); }
  int hostIndex(int r) const override { return r / spec_.ranksPerHost; }
  size_t chunkBytes(std::span<const int> peers) override {
    for (int p : peers)
      if (!sameHost(p)) return tuning_.networkChunk;
    return tuning_.localChunk;
  }
  bool canReadPeerMemory() const override { return spec_.peerReads && spec_.hosts == 1; }

 private:
  const ClusterSpec& spec_;
  const collectives::TuningParams& tuning_;
  collectives::Group world_;
  const int rank_;
};

}  // namespace

collectives::TuningParams tuningFor(const ClusterSpec& spec) {
  collectives::TuningParams t;
  t.hosts = spec.hosts;
  t.perHost = spec.ranksPerHost;
  // One message's fixed cost end to end, and a stream's bandwidth, in the
  // cost model's units (microseconds, GB/s).
  t.model.local = {1e6 * (2 * spec.intraLatency + spec.stepOverhead), spec.intraBytesPerSecond / 1e9};
  const double netLatency = 2 * spec.nicLatency + spec.switchLatency + (spec.hosts > spec.hostsPerLeaf ? 2 * spec.switchLatency : 0);
  const double perRankNic = spec.nicBytesPerSecond * spec.nicsPerHost / spec.ranksPerHost;
  t.model.network = {1e6 * (netLatency + spec.stepOverhead), perRankNic / 1e9};
  t.model.reduceGBps = spec.reduceBytesPerSecond / 1e9;
  t.model.readGBps = spec.intraBytesPerSecond / 1e9;
  t.model.mappedReadGBps = spec.intraBytesPerSecond / 1e9;
  t.model.readLatencyUs = 1e6 * spec.intraLatency;
  t.model.source = "the simulated cluster";
  return t;
}

void useCostModel(const collectives::CostModel& m, ClusterSpec& spec) {
  spec.intraBytesPerSecond = m.local.gbps * 1e9;
  spec.intraLatency = m.local.latencyUs * 1e-6;  // the path's whole latency: the way down has none
  spec.nicsPerHost = spec.ranksPerHost;
  spec.nicBytesPerSecond = m.network.gbps * 1e9;
  spec.nicLatency = m.network.latencyUs * 1e-6 / 2;  // paid at each end
  spec.switchLatency = 0;
  spec.copyBytesPerSecond = m.reduceGBps * 1e9;
  spec.reduceBytesPerSecond = m.reduceGBps * 1e9;
  spec.stepOverhead = 0;
}

CallResult simulateCall(const ClusterSpec& spec, const collectives::CallRequest& req, const std::string& algo,
                        const collectives::CostModel* model, bool record) {
  spec.validate();
  const int n = spec.nranks();
  collectives::TuningParams tuning = tuningFor(spec);
  if (model) tuning.model = *model;
  collectives::Group world = collectives::Group::all(0, n);
  std::vector<std::vector<int>> hosts(static_cast<size_t>(spec.hosts));
  for (int r = 0; r < n; ++r) hosts[static_cast<size_t>(r / spec.ranksPerHost)].push_back(r);
  world.trees[0] = topology::hostDoubleBinaryTree(hosts, 0, n);
  world.trees[1] = topology::hostDoubleBinaryTree(hosts, 1, n);
  const collectives::AlgoOverrides overrides(algo);

  std::vector<collectives::Plan> plans(static_cast<size_t>(n));
  CallResult out;
  for (int r = 0; r < n; ++r) {
    SimPlanEnv env(spec, tuning, world, r);
    collectives::CallRequest mine = req;
    const char* name = collectives::planCall(mine, env, overrides, plans[static_cast<size_t>(r)]);
    if (r == 0) out.algorithm = name;
  }
  EventLoop loop;
  FlowNetwork net(loop);
  Cluster cluster(spec, net);
  out.run = runPlans(plans, req.elemSize, cluster, net, loop, record);
  return out;
}

}  // namespace gyre::sim
