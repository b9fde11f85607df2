// The tuner against the simulation of gyre's own plans (docs/simulator.md,
// "The tuner at scale"): the defects gyre-sim found stay fixed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "collectives/planner.h"
#include "sim/simulate.h"

namespace gyre::sim {
namespace {

collectives::CallRequest allReduce(size_t bytes) {
  collectives::CallRequest req;
  req.desc.kind = collectives::OpKind::AllReduce;
  req.desc.count = bytes / 4;
  req.elemSize = 4;
  return req;
}

// The fastest simulated algorithm of the call, and its time.
std::pair<std::string, double> fastest(const ClusterSpec& spec, const collectives::CallRequest& req) {
  std::pair<std::string, double> best{"", 1e300};
  for (const collectives::Algorithm& a : collectives::algorithms()) {
    if (a.op != req.desc.kind) continue;
    try {
      const double s = simulateCall(spec, req, a.name).run.seconds;
      if (s < best.second) best = {a.name, s};
    } catch (const Error&) {
      // Cannot run on this cluster (single-copy ones across hosts).
    }
  }
  return best;
}

// The double binary tree's lanes wait for each piece at every level, and
// send and receive each piece's messages one after another, so across
// hosts its time grows with the trees' depth and with three messages'
// fixed costs a piece; the tuner priced it as a perfect pipeline (2 S over
// each host's link) and chose it for large AllReduces on 2 and 8 DGX
// H100-like hosts, 2.9x and 6x slower than the fastest there. Now its
// choice is within 10% of the fastest simulated on 8 hosts and 25% on 2.
TEST(TunerAtScale, LargeAllReduceOnDgxLikeHostsIsNearTheFastestSimulated) {
  ClusterSpec spec;  // DGX H100-like hosts: 8 GPUs, NVLink, 8 NICs of 400 Gbit/s
  for (int hosts : {2, 8}) {
    spec.hosts = hosts;
    for (size_t bytes : {size_t{16} << 20, size_t{128} << 20}) {
      const CallResult chosen = simulateCall(spec, allReduce(bytes));
      const auto [name, seconds] = fastest(spec, allReduce(bytes));
      EXPECT_LE(chosen.run.seconds, (hosts == 2 ? 1.25 : 1.1) * seconds)
          << hosts << " hosts, " << bytes << " bytes: the tuner's " << chosen.algorithm << " against " << name;
      EXPECT_NE(chosen.algorithm, "double_binary_tree") << hosts << " hosts, " << bytes;
    }
  }
}

// Measured, and simulated alike: 2 ranks on each of 2 and 4 namespace
// hosts at 1 Gbit/s, 8 MiB AllReduce, the tree took 2.4 and 4.5 times the
// link's time for the buffer (the ring 2.0 and 2.1). The simulation of the
// same plans says so as well; the tree's estimate now grows with the depth.
TEST(TunerAtScale, TheDoubleTreesTimeAcrossHostsGrowsWithItsDepth) {
  ClusterSpec spec;
  spec.ranksPerHost = 2;
  spec.nicsPerHost = 1;
  spec.nicBytesPerSecond = 117.5e6;
  spec.intraBytesPerSecond = 5e9;
  spec.stepOverhead = 10e-6;
  double previous = 0;
  for (int hosts : {2, 4, 8}) {
    spec.hosts = hosts;
    const double tree = simulateCall(spec, allReduce(8 << 20), "allreduce:double_binary_tree").run.seconds;
    const double ring = simulateCall(spec, allReduce(8 << 20), "allreduce:ring").run.seconds;
    EXPECT_GT(tree, previous * 1.2) << hosts << " hosts";
    if (hosts >= 4) {
      EXPECT_GT(tree, 2 * ring) << hosts << " hosts";
    }
    previous = tree;
    EXPECT_NE(simulateCall(spec, allReduce(8 << 20)).algorithm, "double_binary_tree") << hosts << " hosts";
  }
}

}  // namespace
}  // namespace gyre::sim
