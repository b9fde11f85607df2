// Plans on tiny clusters against closed forms: gyre's own ring AllReduce on
// uniform links, messages in order between a pair, and the errors for what
// cannot be simulated or never ends.
#include <gtest/gtest.h>

#include "base/error.h"
#include "sim/cluster.h"
#include "sim/plan_runner.h"
#include "sim/simulate.h"

namespace gyre::sim {
namespace {

// One host of n ranks on a switch: every rank's port 1 GB/s each way, 1 us
// through the switch, no software cost, local work free.
ClusterSpec uniformHost(int n) {
  ClusterSpec s;
  s.hosts = 1;
  s.ranksPerHost = n;
  s.nicsPerHost = 1;
  s.intraBytesPerSecond = 1e9;
  s.intraLatency = 1e-6;
  s.copyBytesPerSecond = 1e18;
  s.reduceBytesPerSecond = 1e18;
  s.stepOverhead = 0;
  s.peerReads = false;
  return s;
}

collectives::CallRequest allReduce(size_t bytes) {
  collectives::CallRequest req;
  req.desc.kind = collectives::OpKind::AllReduce;
  req.desc.count = bytes / 4;
  req.elemSize = 4;
  return req;
}

TEST(SimulatedPlans, GyresRingAllReduceTakesTheRingsClosedFormTime) {
  for (int n : {2, 3, 4, 8}) {
    const size_t bytes = size_t(n) * 16 * 1024;  // a block of 16 KiB per rank: one message per step
    const CallResult r = simulateCall(uniformHost(n), allReduce(bytes), "allreduce:ring");
    EXPECT_STREQ(r.algorithm.c_str(), "ring");
    // 2 (n - 1) steps, each one block over a port (1 GB/s) plus the path's
    // latency (1 us through the switch).
    const double block = double(bytes) / n;
    const double expected = 2.0 * (n - 1) * (block / 1e9 + 1e-6);
    EXPECT_NEAR(r.run.seconds, expected, expected * 1e-9) << n << " ranks";
    EXPECT_EQ(r.run.messages, uint64_t(2 * (n - 1) * n)) << n << " ranks";
    EXPECT_DOUBLE_EQ(r.run.bytesSent, 2.0 * (n - 1) * n * block) << n << " ranks";
  }
}

// The error running two ranks' plans on a uniform host ends with ("" when
// none), and its code.
std::pair<std::string, gyreResult_t> errorOfRunning(const std::vector<collectives::Plan>& plans) {
  EventLoop loop;
  FlowNetwork net(loop);
  Cluster cluster(uniformHost(int(plans.size())), net);
  try {
    runPlans(plans, 4, cluster, net, loop);
  } catch (const Error& e) {
    return {e.what(), e.code()};
  }
  return {"", gyreSuccess};
}

// A rank that waits for a message nobody sends: the run says who waits.
TEST(SimulatedPlans, APlanThatNeverEndsIsAnErrorNamingTheRankAndItsWait) {
  std::vector<collectives::Plan> plans(2);
  plans[0].algorithm = plans[1].algorithm = "lonely";
  collectives::Step recv;
  recv.prim = collectives::Prim::Recv;
  recv.recvPeer = 1;
  recv.count = 4;
  plans[0].steps.push_back(recv);
  const auto [what, code] = errorOfRunning(plans);
  EXPECT_NE(what.find("rank 0 (lonely) waits at step 0 (recv from rank 1)"), std::string::npos) << what;
  EXPECT_EQ(code, gyreInternalError);
}

// A rank's messages to a peer its plan lists go where its first one went
// (the route and mail box found once); to a peer it does not list, they are
// found anew each time: the same times either way, and in order.
TEST(SimulatedPlans, MessagesToAPeerThePlanDoesNotListTakeTheSameTimes) {
  auto run = [](bool listed) {
    std::vector<collectives::Plan> plans(2);
    plans[0].algorithm = plans[1].algorithm = "pair";
    if (listed) plans[0].peers = {1};
    plans[1].peers = {0};
    for (size_t count : {250000, 125000, 500000}) {
      collectives::Step send;
      send.prim = collectives::Prim::Send;
      send.sendPeer = 1;
      send.count = count;
      plans[0].steps.push_back(send);
      collectives::Step recv;
      recv.prim = collectives::Prim::Recv;
      recv.recvPeer = 0;
      recv.count = count;
      plans[1].steps.push_back(recv);
    }
    EventLoop loop;
    FlowNetwork net(loop);
    Cluster cluster(uniformHost(2), net);
    return runPlans(plans, 4, cluster, net, loop);
  };
  const RunResult listed = run(true), unlisted = run(false);
  EXPECT_EQ(listed.rankSeconds, unlisted.rankSeconds);
  EXPECT_EQ(listed.messages, 3u);
  EXPECT_EQ(listed.bytesSent, 3.5e6);
  // 3.5 MB one after another at 1 GB/s; the last arrives a path's latency
  // later (a few microseconds) and is received at once (local work free).
  EXPECT_GT(listed.rankSeconds[1], 3.5e-3);
  EXPECT_LT(listed.rankSeconds[1], 3.5e-3 + 1e-5);
  EXPECT_DOUBLE_EQ(listed.rankSeconds[0], 3.5e-3);
}

TEST(SimulatedPlans, WhatIsNotSimulatedIsAnErrorNamingIt) {
  std::vector<collectives::Plan> plans(2);
  plans[1].algorithm = "moe";
  collectives::Step s;
  s.prim = collectives::Prim::Resolve;
  plans[1].steps.push_back(s);
  const auto [what, code] = errorOfRunning(plans);
  EXPECT_NE(what.find("rank 1's plan (moe) resolves steps while it runs"), std::string::npos) << what;
  EXPECT_EQ(code, gyreInvalidArgument);
}

TEST(SimulatedPlans, AClusterOutOfRangeIsAnErrorNamingTheField) {
  ClusterSpec s = uniformHost(8);
  s.nicsPerHost = 3;
  try {
    s.validate();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NICs per host must be at least 1 and divide the ranks per host (8)"),
              std::string::npos)
        << e.what();
  }
  s = uniformHost(8);
  s.oversubscription = 0.5;
  EXPECT_THROW(s.validate(), Error);
}

}  // namespace
}  // namespace gyre::sim

namespace gyre::sim {
namespace {

// Whatever the tuner picks, on one host and across hosts, every rank's plan
// runs to its end: the runner keeps each pair's messages in order and runs
// lanes side by side as the executor does.
TEST(SimulatedPlans, TheTunersChoiceOfEveryCollectiveRunsToTheEnd) {
  using collectives::OpKind;
  for (int hosts : {1, 2, 3}) {
    ClusterSpec spec;
    spec.hosts = hosts;
    spec.ranksPerHost = 4;
    spec.nicsPerHost = 4;
    spec.hostsPerLeaf = 2;
    for (OpKind op : {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllToAll, OpKind::Broadcast,
                      OpKind::Reduce}) {
      for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{16} << 20}) {
        collectives::CallRequest req;
        req.desc.kind = op;
        req.desc.count = std::max<size_t>(1, bytes / 4);
        req.desc.root = op == OpKind::Broadcast || op == OpKind::Reduce ? 1 : -1;
        req.elemSize = 4;
        const CallResult r = simulateCall(spec, req);
        const std::string what = std::to_string(hosts) + " hosts, op " + std::to_string(int(op)) + ", " +
                                 std::to_string(bytes) + " B: " + r.algorithm;
        EXPECT_GT(r.run.seconds, 0) << what;
        EXPECT_GT(r.run.messages, 0u) << what;
        EXPECT_EQ(r.run.rankSeconds.size(), size_t(spec.nranks())) << what;
      }
    }
  }
}

}  // namespace
}  // namespace gyre::sim

namespace gyre::sim {
namespace {

// With record, every step of every rank is kept with its times, in the
// run's span, and the trace of them is a Chrome trace's JSON array.
TEST(SimulatedPlans, RecordedStepsCoverEveryRankAndEndWithTheRun) {
  collectives::CallRequest req;
  req.desc.kind = collectives::OpKind::AllReduce;
  req.desc.count = 3 * 4096;
  req.elemSize = 4;
  const CallResult r = simulateCall(uniformHost(3), req, "allreduce:ring", nullptr, true);
  ASSERT_FALSE(r.run.steps.empty());
  std::vector<int> perRank(3, 0);
  Time last = 0;
  for (const StepRecord& s : r.run.steps) {
    ASSERT_GE(s.rank, 0);
    ASSERT_LT(s.rank, 3);
    ++perRank[size_t(s.rank)];
    EXPECT_LE(s.start, s.end);
    last = std::max(last, s.end);
  }
  // A ring of 3 ranks: 2 (3 - 1) steps that move a block each, and as many
  // on every rank.
  for (int n : perRank) {
    EXPECT_GE(n, 4);
    EXPECT_EQ(n, perRank[0]);
  }
  EXPECT_DOUBLE_EQ(last, r.run.seconds);
  const std::string json = chromeTrace(r.run, "ring \"3\"");
  EXPECT_EQ(json.front(), '[');
  EXPECT_NE(json.find("\"name\":\"recv-reduce-send\""), std::string::npos) << json.substr(0, 400);
  EXPECT_EQ(json.find("\\\"3\\\""), std::string::npos);  // the title's quotes are not the JSON's
}

}  // namespace
}  // namespace gyre::sim
