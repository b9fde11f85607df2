// One representative per orbit against every rank simulated: the same time,
// the same bytes on every link, the same messages, for the algorithms whose
// plans keep a symmetry of the cluster, on uniform and oversubscribed
// clusters; a cluster without symmetry is simulated in full.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "sim/simulate.h"
#include "sim/symmetry.h"

namespace gyre::sim {
namespace {

struct Case {
  const char* name;
  ClusterSpec spec;
};

ClusterSpec cluster(int hosts, int perHost, int nics, int hostsPerLeaf, double oversubscription) {
  ClusterSpec s;
  s.hosts = hosts;
  s.ranksPerHost = perHost;
  s.nicsPerHost = nics;
  s.hostsPerLeaf = hostsPerLeaf;
  s.oversubscription = oversubscription;
  return s;
}

// Uniform leaves of rail-style hosts; oversubscribed leaves of hosts whose
// NICs serve two ranks each; one switch of hosts with one shared NIC.
std::vector<Case> clusters() {
  return {{"4 hosts x 8, 2 leaves", cluster(4, 8, 8, 2, 1)},
          {"8 hosts x 4, 4 leaves, 2 ranks a NIC, 4:1", cluster(8, 4, 2, 2, 4)},
          {"4 hosts x 4, one NIC each, one switch", cluster(4, 4, 1, 32, 1)}};
}

collectives::CallRequest call(collectives::OpKind kind, size_t bytes, int n) {
  collectives::CallRequest req;
  req.desc.kind = kind;
  const bool blocks = kind != collectives::OpKind::AllReduce;
  req.desc.count = blocks ? bytes / 4 / size_t(n) : bytes / 4;
  req.elemSize = 4;
  return req;
}

bool near(double a, double b, double slack = 0) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)) + 1e-15 + slack;
}

// How far apart the full run ends ranks that the symmetry says are alike
// (those the aggregated run ends at the same time). The full run's own
// rounding: flows of alike ranks start a few ulps apart, and sharing a
// link among many flows amplifies that over its rounds (2.5e-8 relative on
// the oversubscribed cluster's 2 MiB Rabenseifner), while the aggregated
// run is alike by construction. Zero on most cases.
double fullRunsOwnSpread(const RunResult& agg, const RunResult& full) {
  std::map<double, std::pair<double, double>> byEnd;  // aggregated end -> the full run's range
  for (size_t r = 0; r < agg.rankSeconds.size() && r < full.rankSeconds.size(); ++r) {
    auto [it, fresh] = byEnd.try_emplace(agg.rankSeconds[r], full.rankSeconds[r], full.rankSeconds[r]);
    it->second.first = std::min(it->second.first, full.rankSeconds[r]);
    it->second.second = std::max(it->second.second, full.rankSeconds[r]);
  }
  double spread = 0;
  for (const auto& [end, range] : byEnd) spread = std::max(spread, range.second - range.first);
  return spread;
}

// Aggregated and full runs of one call: equal in everything the result says.
// Returns the aggregation (empty: none was used).
std::string expectSameAsFull(const ClusterSpec& spec, const collectives::CallRequest& req, const std::string& algo,
                             const std::string& what) {
  const CallResult agg = simulateCall(spec, req, algo);
  const CallResult full = simulateCall(spec, req, algo, nullptr, false, false);
  EXPECT_TRUE(full.run.aggregation.empty()) << what;
  EXPECT_EQ(agg.algorithm, full.algorithm) << what;
  const double slack = 2 * fullRunsOwnSpread(agg.run, full.run);
  EXPECT_LT(slack, 1e-7 * full.run.seconds) << what;
  EXPECT_TRUE(near(agg.run.seconds, full.run.seconds, slack))
      << what << ": " << agg.run.seconds << " s aggregated (" << agg.run.aggregation << "), " << full.run.seconds
      << " s full";
  EXPECT_EQ(agg.run.messages, full.run.messages) << what;
  EXPECT_TRUE(near(agg.run.bytesSent, full.run.bytesSent)) << what;
  EXPECT_EQ(agg.run.sentTo, full.run.sentTo) << what;
  EXPECT_EQ(agg.run.rankSeconds.size(), full.run.rankSeconds.size()) << what;
  for (size_t r = 0; r < std::min(agg.run.rankSeconds.size(), full.run.rankSeconds.size()); ++r)
    if (!near(agg.run.rankSeconds[r], full.run.rankSeconds[r], slack)) {
      ADD_FAILURE() << what << ": rank " << r << " ends at " << agg.run.rankSeconds[r] << " s aggregated, "
                    << full.run.rankSeconds[r] << " s full";
      break;
    }
  EXPECT_EQ(agg.linkBytes.size(), full.linkBytes.size()) << what;
  for (size_t l = 0; l < std::min(agg.linkBytes.size(), full.linkBytes.size()); ++l)
    if (!near(agg.linkBytes[l], full.linkBytes[l])) {
      ADD_FAILURE() << what << ": link " << l << " carried " << agg.linkBytes[l] << " B aggregated, "
                    << full.linkBytes[l] << " B full";
      break;
    }
  return agg.run.aggregation;
}

TEST(Symmetry, ElementsMapRepresentativesOntoEveryRankOnce) {
  for (const Case& c : clusters())
    for (const Symmetry& sym : clusterSymmetries(c.spec)) {
      const int n = c.spec.nranks();
      std::set<int> reps;
      for (int r = 0; r < n; ++r) {
        const int rep = sym.representative(r);
        reps.insert(rep);
        EXPECT_EQ(sym.apply(sym.elementOf(r), rep), r) << c.name << ", " << sym.describe();
        EXPECT_EQ(sym.pullBack(r, r), rep) << c.name << ", " << sym.describe();
        for (int e = 0; e < sym.order(); ++e) EXPECT_EQ(sym.apply(sym.inverse(e), sym.apply(e, r)), r);
      }
      EXPECT_EQ(int(reps.size()), sym.orbits()) << c.name << ", " << sym.describe();
      EXPECT_EQ(sym.orbits() * sym.order(), n);
    }
}

TEST(Symmetry, AggregatedRunsAreTheFullRunsForEveryAlgorithmThatKeepsOne) {
  using collectives::OpKind;
  struct Algo {
    OpKind op;
    const char* spec;
    bool symmetric;  // its plans keep a symmetry of these clusters
  };
  const Algo algos[] = {
      {OpKind::AllReduce, "allreduce:ring", true},
      {OpKind::AllReduce, "allreduce:recursive_doubling", true},
      {OpKind::AllReduce, "allreduce:rabenseifner", true},
      {OpKind::AllReduce, "allreduce:double_binary_tree", false},
      {OpKind::AllGather, "allgather:ring", true},
      {OpKind::ReduceScatter, "reducescatter:ring", true},
      {OpKind::AllToAll, "alltoall:pairwise", true},
      {OpKind::AllToAll, "alltoall:bruck", true},
  };
  for (const Case& c : clusters())
    for (const Algo& a : algos)
      for (size_t bytes : {size_t(64) << 10, size_t(2) << 20}) {
        const int n = c.spec.nranks();
        const std::string what = std::string(c.name) + ", " + a.spec + ", " + std::to_string(bytes) + " B";
        const std::string how = expectSameAsFull(c.spec, call(a.op, bytes, n), a.spec, what);
        if (a.symmetric) {
          EXPECT_FALSE(how.empty()) << what << ": simulated in full";
        }
      }
}

TEST(Symmetry, AggregatedRunsAreTheFullRunsAt256RanksIn4Leaves) {
  using collectives::OpKind;
  const ClusterSpec spec = cluster(32, 8, 8, 8, 2);
  struct Algo {
    OpKind op;
    const char* spec;
  };
  for (const Algo& a : {Algo{OpKind::AllReduce, "allreduce:ring"}, Algo{OpKind::AllReduce, "allreduce:recursive_doubling"},
                        Algo{OpKind::AllGather, "allgather:ring"}, Algo{OpKind::AllToAll, "alltoall:pairwise"},
                        Algo{OpKind::AllToAll, "alltoall:bruck"}}) {
    const std::string what = std::string("256 ranks, ") + a.spec;
    EXPECT_FALSE(expectSameAsFull(spec, call(a.op, size_t(2) << 20, 256), a.spec, what).empty()) << what;
  }
}

TEST(Symmetry, TheTunersChoiceAggregatedIsTheFullRun) {
  using collectives::OpKind;
  for (const Case& c : clusters())
    for (OpKind op : {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllToAll})
      for (size_t bytes : {size_t(8) * size_t(c.spec.nranks()), size_t(1) << 20})
        expectSameAsFull(c.spec, call(op, bytes, c.spec.nranks()), "",
                         std::string(c.name) + ", op " + std::to_string(int(op)) + ", " + std::to_string(bytes) + " B");
}

TEST(Symmetry, AClusterWithAPartLeafIsSimulatedInFull) {
  const ClusterSpec spec = cluster(5, 4, 4, 2, 1);  // leaves of 2, 2 and 1 hosts
  EXPECT_TRUE(clusterSymmetries(spec).empty());
  const std::string how =
      expectSameAsFull(spec, call(collectives::OpKind::AllReduce, 1 << 20, 20), "allreduce:ring", "5 hosts, part leaf");
  EXPECT_TRUE(how.empty()) << how;
}

TEST(Symmetry, APlanWhoseStepsDifferIsNotAnImage) {
  const ClusterSpec spec = cluster(2, 4, 4, 32, 1);
  const Symmetry sym = clusterSymmetries(spec).front();
  SimPlan a, b;
  a.algorithm = b.algorithm = "ring";
  SimStep s;
  s.prim = collectives::Prim::Send;
  s.sendPeer = 1;
  s.count = 10;
  a.steps.push_back(s);
  const int e = sym.elementOf(5);
  s.sendPeer = sym.apply(e, 1);
  b.steps.push_back(s);
  EXPECT_TRUE(planIsImage(b, a, sym, e));
  b.steps[0].count = 11;
  EXPECT_FALSE(planIsImage(b, a, sym, e));
  b.steps[0].count = 10;
  b.steps[0].sendPeer = 1;  // not mapped
  EXPECT_FALSE(planIsImage(b, a, sym, e) && sym.apply(e, 1) != 1);
}

}  // namespace
}  // namespace gyre::sim
