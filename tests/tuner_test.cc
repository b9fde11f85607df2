// The tuner: the cost model's file format and its errors, the choices it
// makes for call shapes (with a stand-in communicator), and, in real rank
// processes, the model loaded from a file, measured at creation, written
// out, inherited by a split, and rejected when ranks disagree.
#include "collectives/tuner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "collectives/cost_model.h"
#include "collectives/online_tuner.h"
#include "tests/support/error_of.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

using collectives::CallRequest;
using collectives::CostModel;
using collectives::OpKind;

TEST(CostModelFile, FormatParsesBackToTheSameNumbers) {
  CostModel m;
  m.local = {0.7, 3.5};
  m.network = {12.5, 11.0};
  m.reduceGBps = 9.25;
  m.readGBps = 4.5;
  const CostModel back = CostModel::parse(m.format(), "test");
  EXPECT_EQ(back.fingerprint(), m.fingerprint());
  EXPECT_EQ(back.source, "test");
  EXPECT_NE(CostModel{}.fingerprint(), m.fingerprint());
}

TEST(CostModelFile, KeysMayBeGivenInPartAndInAnyOrder) {
  const CostModel m = CostModel::parse("# comment\n\n  network.bandwidth_gbps = 12 # 100GbE\nlocal.latency_us=0.2\n", "f");
  EXPECT_EQ(m.network.gbps, 12);
  EXPECT_EQ(m.local.latencyUs, 0.2);
  EXPECT_EQ(m.reduceGBps, CostModel{}.reduceGBps);  // the rest keep the built-in numbers
}

TEST(CostModelFile, ErrorsNameTheFileLineAndProblem) {
  const std::string noEquals = errorOf([] { CostModel::parse("local.latency_us = 1\n\nnonsense\n", "m.txt"); });
  EXPECT_NE(noEquals.find("m.txt:3"), std::string::npos) << noEquals;
  EXPECT_NE(noEquals.find("key = value"), std::string::npos) << noEquals;
  const std::string unknown = errorOf([] { CostModel::parse("local.latncy_us = 1\n", "m.txt"); });
  EXPECT_NE(unknown.find("m.txt:1"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("local.latncy_us"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("local.latency_us"), std::string::npos) << unknown;  // lists the valid keys
  for (const char* bad : {"reduce.bandwidth_gbps = -1\n", "reduce.bandwidth_gbps = 0\n", "reduce.bandwidth_gbps = x\n",
                          "reduce.bandwidth_gbps = 3 GB\n", "reduce.bandwidth_gbps = inf\n", "reduce.bandwidth_gbps =\n"}) {
    const std::string e = errorOf([&] { CostModel::parse(bad, "m.txt"); });
    EXPECT_NE(e.find("positive number"), std::string::npos) << bad << ": " << e;
  }
  const std::string missing = errorOf([] { CostModel::load("/nonexistent/gyre-model.txt"); });
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
}

// A communicator as the planner sees it, without processes.
class FakeEnv final : public collectives::PlanEnv {
 public:
  FakeEnv(int nranks, int hosts, bool canRead) : nranks_(nranks), hosts_(hosts), canRead_(canRead) {
    world_ = collectives::Group::all(0, nranks);
    tuning_.hosts = hosts;
    tuning_.perHost = (nranks + hosts - 1) / hosts;
  }
  collectives::TuningParams& params() { return tuning_; }
  const collectives::TuningParams& tuning() const override { return tuning_; }
  int rank() const override { return 0; }
  int nranks() const override { return nranks_; }
  const collectives::Group& world() const override { return world_; }
  bool sameHost(int peer) const override { return hostIndex(peer) == 0; }
  int hostIndex(int r) const override { return r * hosts_ / nranks_; }
  size_t chunkBytes(std::span<const int>) override { return 256 * 1024; }
  bool canReadPeerMemory() const override { return canRead_; }

 private:
  int nranks_, hosts_;
  bool canRead_;
  collectives::Group world_;
  collectives::TuningParams tuning_;
};

std::string choose(FakeEnv& env, OpKind op, size_t bytes) {
  CallRequest req;
  req.desc.kind = op;
  req.desc.count = bytes / 4;
  req.desc.root = 0;
  req.elemSize = 4;
  return collectives::chooseAlgorithm(req, env)->name;
}

TEST(TunerChoice, LatencyAlgorithmsForSmallAndBandwidthAlgorithmsForLarge) {
  for (int n : {2, 3, 4, 8}) {
    FakeEnv env(n, 1, false);
    EXPECT_EQ(choose(env, OpKind::AllReduce, 8), "recursive_doubling") << n << " ranks";
    const std::string big = choose(env, OpKind::AllReduce, 256u << 20);
    EXPECT_NE(big, "recursive_doubling") << n << " ranks";
    if (n > 2) {
      EXPECT_EQ(choose(env, OpKind::Broadcast, 8), "binomial_tree") << n << " ranks";
    }
    EXPECT_EQ(choose(env, OpKind::Broadcast, 64u << 20), "chain") << n << " ranks";
    EXPECT_EQ(choose(env, OpKind::AllGather, 64u << 20), "ring") << n << " ranks";
    EXPECT_EQ(choose(env, OpKind::AllToAll, 64u << 20), "pairwise") << n << " ranks";
  }
}

TEST(TunerChoice, EveryOperationHasAChoiceAtEverySizeAndRankCount) {
  for (int n = 2; n <= 9; ++n)
    for (int hosts : {1, 2})
      for (bool canRead : {false, true}) {
        FakeEnv env(n, hosts, canRead && hosts == 1);
        for (int k = static_cast<int>(OpKind::AllReduce); k < static_cast<int>(OpKind::SendRecv); ++k)
          for (size_t bytes : {size_t{0}, size_t{8}, size_t{4096}, size_t{1} << 20, size_t{256} << 20}) {
            const std::string name = choose(env, static_cast<OpKind>(k), bytes);
            EXPECT_FALSE(name.empty());
            if (!env.canReadPeerMemory()) {
              EXPECT_NE(name, "direct");
            }
            if (hosts == 1) {
              EXPECT_NE(name, "hierarchical");
            }
          }
      }
}

// Small AllToAll: where each message is system calls on both sides
// (TCP, UCX over tcp), pairwise's n-1 messages a rank cost more than
// Bruck's log2 n rounds, though they run at once; over shared memory their
// latencies overlap and pairwise keeps its lead. Large blocks stay
// pairwise everywhere (Bruck moves every block log2 n times).
TEST(TunerChoice, SmallAllToAllOverSocketsTakesBruck) {
  for (int n : {4, 8}) {
    FakeEnv shm(n, 1, false);
    EXPECT_EQ(choose(shm, OpKind::AllToAll, 64), "pairwise") << n << " ranks over shared memory";
    FakeEnv tcp(n, 1, false);
    tcp.params().localSockets = true;
    EXPECT_EQ(choose(tcp, OpKind::AllToAll, 64), "bruck") << n << " ranks over sockets";
    EXPECT_EQ(choose(tcp, OpKind::AllToAll, 64u << 20), "pairwise") << n << " ranks over sockets";
    // Across hosts the network's flag counts, not the host's.
    FakeEnv hosts(n, 2, false);
    hosts.params().localSockets = true;
    EXPECT_EQ(choose(hosts, OpKind::AllToAll, 64), n == 4 ? "pairwise" : "bruck") << n << " ranks, 2 hosts";
    hosts.params().networkSockets = true;
    EXPECT_EQ(choose(hosts, OpKind::AllToAll, 64), "bruck") << n << " ranks on 2 hosts over TCP";
  }
}

// Crowded (more ranks than cores) pairwise's exchanges overlap more than
// Bruck's dependent rounds: 8 ranks on 2 cores took Bruck for blocks of up
// to 2 KiB, where pairwise ran in 0.65-0.82 of its time.
TEST(TunerChoice, CrowdedSmallAllToAllStaysPairwise) {
  for (int n : {4, 8}) {
    FakeEnv crowded(n, 1, false);
    crowded.params().cores = 2;
    for (size_t bytes : {size_t{8}, size_t{64}, size_t{2048}, size_t{256} << 10})
      EXPECT_EQ(choose(crowded, OpKind::AllToAll, bytes), "pairwise") << n << " ranks, " << bytes;
    // Over sockets each message is system calls, crowded or not.
    crowded.params().localSockets = true;
    EXPECT_EQ(choose(crowded, OpKind::AllToAll, 64), "bruck") << n << " ranks over sockets";
  }
}

TEST(TunerChoice, HierarchicalWhenTheNetworkIsTheSlowLink) {
  FakeEnv env(8, 2, false);  // two hosts of four ranks
  env.params().model = CostModel::parse("network.bandwidth_gbps = 0.2\nnetwork.latency_us = 50\n", "slow");
  EXPECT_EQ(choose(env, OpKind::AllReduce, 64u << 20), "hierarchical");
  // As fast as shared memory: crossing with every rank costs nothing extra.
  env.params().model = CostModel::parse("network.bandwidth_gbps = 50\nnetwork.latency_us = 0.3\n", "fast");
  EXPECT_NE(choose(env, OpKind::AllReduce, 64u << 20), "hierarchical");
}

// Across hosts both trees' traffic passes each host's one link (a host
// interior in one tree and a leaf in the other: up to 2 S each way), more than
// the ring's 2(n-1)/n S. Two ranks per host on 2 and 4 namespace hosts at
// 1 Gbit/s, 64 MiB: the tree reached 85% and 40% of the link, the ring 95%
// and 91% (docs/PERFORMANCE-transports.md); so with the built-in model and
// with the one GYRE_TUNER=calibrate measured there (network 0.12 GB/s).
TEST(TunerChoice, LargeAllReduceAcrossHostsTakesTheRingOverTheDoubleTree) {
  for (const char* model : {"", "network.bandwidth_gbps = 0.12\nnetwork.latency_us = 60\n"})
    for (int hosts : {2, 4}) {
      FakeEnv env(2 * hosts, hosts, false);
      env.params().model = CostModel::parse(model, "test");
      for (size_t bytes : {size_t{16} << 20, size_t{64} << 20, size_t{256} << 20})
        EXPECT_NE(choose(env, OpKind::AllReduce, bytes), "double_binary_tree")
            << hosts << " hosts, " << bytes << " bytes, model '" << model << "'";
    }
}

TEST(TunerChoice, SingleCopyWhenReadsAreFastAndNeverWithoutThem) {
  FakeEnv env(4, 1, true);
  env.params().model = CostModel::parse("read.bandwidth_gbps = 40\n", "fast reads");
  EXPECT_EQ(choose(env, OpKind::AllGather, 64u << 20), "direct");
  FakeEnv noReads(4, 1, false);
  noReads.params().model = env.params().model;
  EXPECT_EQ(choose(noReads, OpKind::AllGather, 64u << 20), "ring");
}

// GYRE_MAPPED_BUFFERS=1: reads of peers' gyreMemAllocHost buffers run at memory
// speed, so single-copy algorithms win the large copying calls on one host;
// never the reducing ones (measured slower than the ring), never across
// hosts or without cross-process reads.
TEST(TunerChoice, MappedBuffersMakeSingleCopyWinLargeCallsOnOneHost) {
  for (int n : {2, 4}) {
    FakeEnv plain(n, 1, true);
    FakeEnv mapped(n, 1, true);
    mapped.params().mappedBuffers = true;
    for (OpKind op : {OpKind::AllToAll, OpKind::AllGather, OpKind::Broadcast}) {
      EXPECT_NE(choose(plain, op, 64u << 20), "direct") << n << " ranks, " << collectives::opKindName(op);
      EXPECT_EQ(choose(mapped, op, 64u << 20), "direct") << n << " ranks, " << collectives::opKindName(op);
    }
    for (OpKind op : {OpKind::ReduceScatter, OpKind::AllReduce})
      EXPECT_EQ(choose(mapped, op, 64u << 20), choose(plain, op, 64u << 20))
          << n << " ranks, " << collectives::opKindName(op);
    EXPECT_NE(choose(mapped, OpKind::AllToAll, 8), "direct") << "a read's round trip still costs at 8 bytes";
  }
  FakeEnv noReads(2, 1, false);
  noReads.params().mappedBuffers = true;
  EXPECT_NE(choose(noReads, OpKind::AllToAll, 64u << 20), "direct");
  FakeEnv twoHosts(4, 2, false);
  twoHosts.params().mappedBuffers = true;
  EXPECT_NE(choose(twoHosts, OpKind::AllGather, 64u << 20), "direct");
}

// With more ranks than cores, the chain's hops share the cores as the
// direct readers do (4 ranks on 2 cores: the chain 1.8-3.1x behind direct
// at 64 KiB-8 MiB in two of three sweeps): the tree for latency-bound
// sizes, direct from the middle up. Without crowding the chain keeps the
// middle sizes.
TEST(TunerChoice, CrowdedBroadcastReadsDirectlyInTheMiddle) {
  FakeEnv crowded(4, 1, true);
  crowded.params().cores = 2;
  EXPECT_NE(choose(crowded, OpKind::Broadcast, 1024), "direct");
  for (size_t bytes = 256u << 10; bytes <= (4u << 20); bytes *= 2)
    EXPECT_EQ(choose(crowded, OpKind::Broadcast, bytes), "direct") << bytes;
  FakeEnv roomy(4, 1, true);
  roomy.params().cores = 4;
  EXPECT_EQ(choose(roomy, OpKind::Broadcast, 1u << 20), "chain");
}

// Beyond the cache (the root's buffer and the outputs past read.cache_mib)
// the readers' copies come cold and the chain, whose pieces stay in cache,
// wins again (4 ranks on 2 cores, 64-256 MiB: 1.4-1.8x in sweeps 7-9).
// Without the slowdown direct would keep them; mapped buffers are plain
// streaming copies and keep their rate.
TEST(TunerChoice, CrowdedBroadcastBeyondTheCacheGoesBackToTheChain) {
  FakeEnv crowded(4, 1, true);
  crowded.params().cores = 2;
  for (size_t bytes : {size_t{64} << 20, size_t{256} << 20})
    EXPECT_EQ(choose(crowded, OpKind::Broadcast, bytes), "chain") << bytes;
  crowded.params().model = CostModel::parse("read.cold_slowdown = 1\n", "no slowdown");
  EXPECT_EQ(choose(crowded, OpKind::Broadcast, size_t{256} << 20), "direct");
  crowded.params().model = CostModel::parse("read.cache_mib = 4096\n", "a large cache");
  EXPECT_EQ(choose(crowded, OpKind::Broadcast, size_t{256} << 20), "direct");
  FakeEnv mapped(4, 1, true);
  mapped.params().cores = 2;
  mapped.params().mappedBuffers = true;
  EXPECT_EQ(choose(mapped, OpKind::Broadcast, size_t{256} << 20), "direct");
}

// Crowded steps cost 12x the oversubscription (a 4-rank step on 2 cores,
// 20-30 times one of 2 ranks at 32-128 KiB): the algorithms with fewer
// steps keep 32 KiB, where the ring's 2(n-1) or n-1 steps lost by
// 1.3-1.7x in most sweeps; with a core each the ring has it.
TEST(TunerChoice, CrowdedRanksTakeFewerStepsAtMiddleSizes) {
  FakeEnv crowded(4, 1, false);
  crowded.params().cores = 2;
  EXPECT_EQ(choose(crowded, OpKind::AllReduce, 32u << 10), "recursive_doubling");
  EXPECT_EQ(choose(crowded, OpKind::ReduceScatter, 8u << 10), "recursive_halving");
  FakeEnv roomy(4, 1, false);
  roomy.params().cores = 4;
  EXPECT_NE(choose(roomy, OpKind::AllReduce, 32u << 10), "recursive_doubling");
  EXPECT_NE(choose(roomy, OpKind::ReduceScatter, 8u << 10), "recursive_halving");
}

// Recursive-doubling AllGather: pairwise swaps, ahead of Bruck's shifted
// rounds and the ring at latency-bound sizes with 4 ranks (gyre-algo-sweep);
// the ring's even pieces for large ones; one exchange either way at 2.
TEST(TunerChoice, RecursiveDoublingAllGatherForSmallBlocks) {
  FakeEnv four(4, 1, false);
  four.params().cores = 2;
  EXPECT_EQ(choose(four, OpKind::AllGather, 8), "recursive_doubling");
  EXPECT_EQ(choose(four, OpKind::AllGather, 4096), "recursive_doubling");
  EXPECT_EQ(choose(four, OpKind::AllGather, 16u << 20), "ring");
  FakeEnv two(2, 1, false);
  EXPECT_EQ(choose(two, OpKind::AllGather, 64u << 10), "ring");
}

TEST(TunerChoice, SmallMessageSettingStillForcesRecursiveDoubling) {
  FakeEnv env(4, 1, false);
  env.params().smallMessageBytes = 1 << 20;
  EXPECT_EQ(choose(env, OpKind::AllReduce, 512 << 10), "recursive_doubling");
  EXPECT_NE(choose(env, OpKind::AllReduce, 64u << 20), "recursive_doubling");
}

TEST(TunerChoice, ChainPiecesShrinkAsTheChainGrows) {
  FakeEnv two(2, 1, false), eight(8, 1, false);
  collectives::CallShape s;
  s.op = OpKind::Broadcast;
  s.bytes = 64u << 20;
  s.nranks = 2;
  EXPECT_EQ(collectives::chainPieceBytes(s, two.tuning().model), s.localChunk);  // one hop: no pipeline to fill
  s.nranks = 8;
  const size_t piece = collectives::chainPieceBytes(s, eight.tuning().model);
  EXPECT_LT(piece, s.localChunk);
  EXPECT_GE(piece, 4096u);
  s.bytes = 100;
  EXPECT_EQ(collectives::chainPieceBytes(s, eight.tuning().model), 4096u);
}

// Pairwise AllToAll's pieces on one host: the host's FIFOs (ranks^2 x slots
// x piece) within 16 MiB, a power of two, 16 KiB at least.
TEST(TunerChoice, PairwisePiecesKeepTheHostsFifosWithinTheCacheBudget) {
  EXPECT_EQ(collectives::pairwisePieceBytes(1, 8), SIZE_MAX);
  EXPECT_EQ(collectives::pairwisePieceBytes(2, 8), SIZE_MAX);
  EXPECT_EQ(collectives::pairwisePieceBytes(3, 8), size_t{128} << 10);
  EXPECT_EQ(collectives::pairwisePieceBytes(4, 8), size_t{128} << 10);
  EXPECT_EQ(collectives::pairwisePieceBytes(4, 16), size_t{64} << 10);
  EXPECT_EQ(collectives::pairwisePieceBytes(8, 8), size_t{32} << 10);
  EXPECT_EQ(collectives::pairwisePieceBytes(64, 64), size_t{16} << 10);
  for (int n = 3; n <= 16; ++n)
    for (int slots : {2, 8, 64}) {
      const size_t p = collectives::pairwisePieceBytes(n, slots);
      EXPECT_EQ(p & (p - 1), 0u) << n << " ranks, " << slots << " slots";
      EXPECT_TRUE(p == (size_t{16} << 10) || size_t(n) * n * slots * p <= (size_t{16} << 20)) << n << ", " << slots;
      EXPECT_GT(size_t(n) * n * slots * 2 * p, size_t{16} << 20) << n << ", " << slots << ": not the largest";
    }
}

// gyreEstimate's answer (modelChoice) is the tuner's own: the algorithm
// chooseAlgorithm takes and the estimate rankedCandidates gives it, on one
// host and across hosts, with and without reads, and under
// GYRE_SMALL_MSG_BYTES (which forces recursive doubling, cheapest or not).
TEST(TunerChoice, ModelChoiceIsTheTunersChoiceAndItsEstimate) {
  for (auto [n, hosts, reads, small] :
       {std::tuple{4, 1, true, size_t{0}}, std::tuple{8, 2, false, size_t{0}},
        std::tuple{3, 1, false, size_t{0}}, std::tuple{4, 1, true, size_t{1} << 20}}) {
    FakeEnv env(n, hosts, reads);
    env.params().smallMessageBytes = small;
    for (OpKind op : {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce, OpKind::AllGather,
                      OpKind::ReduceScatter, OpKind::AllToAll})
      for (size_t bytes = 4; bytes <= (size_t{256} << 20); bytes *= 16) {
        CallRequest req;
        req.desc.kind = op;
        req.desc.count = bytes / 4;
        req.elemSize = 4;
        const collectives::Candidate c =
            collectives::modelChoice(collectives::callShape(req, env), env.tuning());
        const std::string what = std::string(collectives::opKindName(op)) + " " +
                                 std::to_string(bytes) + " bytes, " + std::to_string(n) +
                                 " ranks on " + std::to_string(hosts) + " host(s)";
        EXPECT_EQ(c.algo, collectives::chooseAlgorithm(req, env)) << what;
        bool listed = false;
        for (const collectives::Candidate& r : collectives::rankedCandidates(req, env))
          if (r.algo == c.algo) {
            listed = true;
            EXPECT_EQ(r.us, c.us) << what;
          }
        EXPECT_TRUE(listed) << what;
        if (!small) {
          EXPECT_EQ(c.us, collectives::rankedCandidates(req, env).front().us) << what;
        }
      }
  }
}

TEST(TunerChoice, EstimatesAreListedForTheLog) {
  FakeEnv env(4, 1, false);
  CallRequest req;
  req.desc.kind = OpKind::AllReduce;
  req.desc.count = 1000;
  const std::string s = collectives::describeEstimates(req, env);
  EXPECT_NE(s.find("ring "), std::string::npos) << s;
  EXPECT_NE(s.find("recursive_doubling "), std::string::npos) << s;
  EXPECT_EQ(s.find("direct"), std::string::npos) << s;  // not applicable without reads
}

// ---- GYRE_TUNER_ONLINE: the bookkeeping, without processes ----

using collectives::OnlineTuner;

CallRequest request(OpKind op, size_t bytes) {
  CallRequest req;
  req.desc.kind = op;
  req.desc.count = bytes / 4;
  req.elemSize = 4;
  return req;
}

// Runs a class's trials to their end: each call "takes" timeOf(candidate)
// us; returns the picks in order.
std::vector<OnlineTuner::Pick> runTrials(OnlineTuner& t, const CallRequest& req, FakeEnv& env,
                                         const std::function<double(int)>& timeOf) {
  std::vector<OnlineTuner::Pick> picks;
  for (int call = 0; call < 100000; ++call) {
    const OnlineTuner::Pick p = t.pick(req, env);
    picks.push_back(p);
    if (p.candidate < 0) ADD_FAILURE() << "call " << call << " is not a trial";
    if (p.candidate < 0 || t.record(p, timeOf(p.candidate))) break;
  }
  return picks;
}

TEST(OnlineTuner, TriesTheModelsBestCandidatesInBatchesThenKeepsTheFastest) {
  FakeEnv env(4, 1, false);
  const CallRequest req = request(OpKind::AllReduce, 32 << 10);
  const std::vector<collectives::Candidate> ranked = collectives::rankedCandidates(req, env);
  OnlineTuner t(1000);
  const std::vector<OnlineTuner::Pick> picks = runTrials(t, req, env, [](int c) { return 10.0 - c; });
  ASSERT_FALSE(picks.empty());
  // Candidates: the model's order, its best first, none beyond kCandidateFactor of it.
  std::vector<int> perCandidate(OnlineTuner::kMaxCandidates, 0);
  int candidates = 0;
  for (const OnlineTuner::Pick& p : picks) {
    ASSERT_LT(p.candidate, OnlineTuner::kMaxCandidates);
    EXPECT_EQ(p.algo, ranked[static_cast<size_t>(p.candidate)].algo);
    EXPECT_LE(ranked[static_cast<size_t>(p.candidate)].us, ranked[0].us * OnlineTuner::kCandidateFactor);
    candidates = std::max(candidates, p.candidate + 1);
    ++perCandidate[static_cast<size_t>(p.candidate)];
  }
  ASSERT_GE(candidates, 2);
  const size_t batch = picks.size() / (size_t(candidates) * OnlineTuner::kTrials);
  ASSERT_EQ(picks.size(), batch * size_t(candidates) * OnlineTuner::kTrials);
  EXPECT_GT(batch, 1u) << "a 32 KiB call is short: several per trial";
  for (int c = 0; c < candidates; ++c) EXPECT_EQ(perCandidate[size_t(c)], int(batch) * OnlineTuner::kTrials);
  // Consecutive calls of one candidate, the first of each batch untimed.
  for (size_t i = 0; i < picks.size(); ++i) {
    EXPECT_EQ(picks[i].candidate, int((i / batch) % size_t(candidates))) << i;
    EXPECT_EQ(picks[i].timed, i % batch != 0) << i;
  }
  const std::vector<double> medians = t.localMedians(picks.back());
  ASSERT_EQ(medians.size(), size_t(candidates));
  const std::string line = t.settle(picks.back(), medians);
  const collectives::Algorithm* fastest = ranked[size_t(candidates - 1)].algo;  // timeOf: the last is fastest
  EXPECT_EQ(t.settled(req), fastest);
  EXPECT_EQ(line.rfind(fastest->name, 0), 0u) << line;
  EXPECT_NE(line.find("the model's pick: " + std::string(ranked[0].algo->name)), std::string::npos) << line;
  for (int i = 0; i < 50; ++i) {  // kept, untimed
    const OnlineTuner::Pick p = t.pick(req, env);
    EXPECT_EQ(p.algo, fastest);
    EXPECT_EQ(p.candidate, -1);
    EXPECT_FALSE(t.record(p, 1.0));
  }
}

TEST(OnlineTuner, TheAgreedTimesDecideAndTheMedianDropsAnOutlier) {
  FakeEnv env(2, 1, false);
  const CallRequest req = request(OpKind::AllReduce, 16 << 20);  // long calls: one per trial
  OnlineTuner t(0);
  int call = 0;
  // Candidate 0 is preempted once (1000 us) but fastest by median.
  const std::vector<OnlineTuner::Pick> picks =
      runTrials(t, req, env, [&](int c) { return c == 0 && call++ == 0 ? 1000.0 : 10.0 + c; });
  ASSERT_EQ(picks.front().timed, true);
  std::vector<double> medians = t.localMedians(picks.back());
  ASSERT_GE(medians.size(), 2u);
  EXPECT_EQ(medians[0], 10.0);
  // Another rank was slower on candidate 0: the slowest rank's time counts.
  medians[0] = 50;
  t.settle(picks.back(), medians);
  EXPECT_EQ(t.settled(req)->name, collectives::rankedCandidates(req, env)[1].algo->name);
  for (int i = 0; i < 5000; ++i) EXPECT_EQ(t.pick(req, env).candidate, -1) << "retune 0: measured once";
}

TEST(OnlineTuner, MeasuresAgainAfterTheRetunePeriodAndEachClassApart) {
  FakeEnv env(4, 1, false);
  const CallRequest small = request(OpKind::AllReduce, 1 << 10), large = request(OpKind::AllGather, 8 << 20);
  OnlineTuner t(3);
  std::vector<OnlineTuner::Pick> picks = runTrials(t, small, env, [](int c) { return 1.0 + c; });
  t.settle(picks.back(), t.localMedians(picks.back()));
  int candidates = 0;
  for (const OnlineTuner::Pick& p : picks) candidates = std::max(candidates, p.candidate + 1);
  const size_t batch = picks.size() / (size_t(candidates) * OnlineTuner::kTrials);
  // Another class has its own books.
  EXPECT_EQ(t.settled(large), nullptr);
  EXPECT_EQ(t.pick(large, env).candidate, 0);
  size_t settledCalls = 0;
  while (t.pick(small, env).candidate < 0) ++settledCalls;
  EXPECT_EQ(settledCalls, 3 * batch) << "three trials' worth of calls, then measured again";
}

TEST(OnlineTuner, ALongRetunePeriodNeverWrapsRoundToAShortOne) {
  // GYRE_TUNER_RETUNE accepts up to 2^63-1 trials; times a batch of many
  // calls it used to wrap round to a few, measuring again almost at once.
  FakeEnv env(4, 1, false);
  const CallRequest small = request(OpKind::AllReduce, 1 << 10);
  OnlineTuner probe(1);
  std::vector<OnlineTuner::Pick> picks = runTrials(probe, small, env, [](int c) { return 1.0 + c; });
  int candidates = 0;
  for (const OnlineTuner::Pick& p : picks) candidates = std::max(candidates, p.candidate + 1);
  const uint64_t batch = picks.size() / (size_t(candidates) * OnlineTuner::kTrials);
  ASSERT_GE(batch, 2u);
  // The smallest period whose product with the batch passes 2^64: it wrapped to under one batch.
  const uint64_t retune = UINT64_MAX / batch + 1;
  ASSERT_LE(retune, uint64_t(INT64_MAX));
  OnlineTuner t(retune);
  picks = runTrials(t, small, env, [](int c) { return 1.0 + c; });
  t.settle(picks.back(), t.localMedians(picks.back()));
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(t.pick(small, env).candidate, -1) << "call " << i;
}

TEST(OnlineTuner, LeavesToTheModelWhatItCannotMeasureTheSameOnEveryRank) {
  FakeEnv env(4, 1, true);
  OnlineTuner t(1000);
  CallRequest v = request(OpKind::AllToAllv, 0);
  std::vector<size_t> counts(4, 100), displs = {0, 100, 200, 300};
  v.sendCounts = counts.data();
  v.sendDispls = displs.data();
  v.recvCounts = counts.data();
  v.recvDispls = displs.data();
  EXPECT_EQ(t.pick(v, env).algo, nullptr) << "AllToAllv: each rank's size is its own";
  FakeEnv one(1, 1, false);
  EXPECT_EQ(t.pick(request(OpKind::AllReduce, 4096), one).algo, nullptr);
  env.params().smallMessageBytes = 64 << 10;
  EXPECT_EQ(t.pick(request(OpKind::AllReduce, 4096), env).algo, nullptr) << "GYRE_SMALL_MSG_BYTES still forces";
  const OnlineTuner::Pick gather = t.pick(request(OpKind::Gather, 4096), env);
  EXPECT_NE(gather.algo, nullptr);
  EXPECT_EQ(gather.candidate, -1) << "one candidate: nothing to measure";
}

// ---- in real ranks ----

// The log level is read once per process, at the first log line: set it
// before anything (the ranks are forked from this process) so the ranks'
// model and choice lines can be checked.
const bool kInfoLogs = [] {
  setenv("GYRE_DEBUG", "INFO", 1);
  return true;
}();

std::string tempPath(const char* name) {
  return std::string(testing::TempDir()) + "/gyre-tuner-" + std::to_string(getpid()) + "-" + name;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

// A correct AllReduce at sizes on both sides of every threshold.
int allReduceRuns(gyreComm_t comm, int rank, int nranks, Checker& check) {
  for (size_t count : {size_t{1}, size_t{1000}, size_t{100000}, size_t{1} << 20}) {
    std::vector<float> v(count, float(rank + 1));
    check.expectOk(gyreAllReduce(v.data(), v.data(), count, gyreFloat32, gyreSum, comm, nullptr), "allreduce");
    const float want = float(nranks * (nranks + 1) / 2);
    check.expect(v.front() == want && v.back() == want, "allreduce of " + std::to_string(count) + " is wrong");
  }
  return check.failures();
}

TEST(TunerInRanks, ModelFromAFileIsUsedAndLogged) {
  const std::string path = tempPath("model.txt");
  writeFile(path, "local.latency_us = 0.5\nlocal.bandwidth_gbps = 3\n");
  RunOutcome out = runRanks(3, [&](int r, int n, const gyreUniqueId& id) {
    setenv("GYRE_TUNER_FILE", path.c_str(), 1);
    Checker check(r);
    gyreComm_t comm = initRank(r, n, id);
    if (!comm) return 1;
    allReduceRuns(comm, r, n, check);
    gyreCommDestroy(comm);
    return check.failures();
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  EXPECT_NE(out.ranks[0].output.find("tuner model (" + path + "): local 0.50us 3.00GB/s"), std::string::npos)
      << out.ranks[0].output;
  EXPECT_NE(out.ranks[0].output.find("(automatic; model: "), std::string::npos) << out.ranks[0].output;
  std::remove(path.c_str());
}

TEST(TunerInRanks, BadFileOrSettingFailsInitNamingIt) {
  const std::string path = tempPath("bad.txt");
  writeFile(path, "local.latency_us = 0.5\nlocal.bandwidth = 3\n");
  RunOutcome out = runRanks(2, [&](int r, int n, const gyreUniqueId& id) {
    setenv("GYRE_TUNER_FILE", path.c_str(), 1);
    gyreComm_t comm = initRank(r, n, id, nullptr, 10000);
    if (comm) return 1;
    unsetenv("GYRE_TUNER_FILE");
    setenv("GYRE_TUNER", "sometimes", 1);
    gyreComm_t again = nullptr;  // the setting fails before any rendezvous
    if (gyreCommInitRank(&again, n, id, r) == gyreSuccess) return 1;
    std::printf("second: %s\n", gyreGetLastError(nullptr));
    return 0;
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    EXPECT_NE(r.output.find(path + ":2: unknown key 'local.bandwidth'"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("GYRE_TUNER=sometimes must be calibrate or builtin"), std::string::npos) << r.output;
  }
  std::remove(path.c_str());
}

TEST(TunerInRanks, RanksWithDifferentModelsAreToldOnEveryRank) {
  const std::string a = tempPath("a.txt"), b = tempPath("b.txt");
  writeFile(a, "reduce.bandwidth_gbps = 5\n");
  writeFile(b, "reduce.bandwidth_gbps = 6\n");
  RunOutcome out = runRanks(3, [&](int r, int n, const gyreUniqueId& id) {
    setenv("GYRE_TUNER_FILE", (r == 2 ? b : a).c_str(), 1);
    gyreComm_t comm = initRank(r, n, id, nullptr, 20000);
    return comm ? 1 : 0;
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  EXPECT_NE(out.ranks[0].output.find("rank 2 was started with a different tuner model"), std::string::npos)
      << out.ranks[0].output;
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(TunerInRanks, CalibratedModelIsWrittenOutLoadsBackAndPassesToASplit) {
  const std::string dump = tempPath("dump.txt");
  RunOutcome out = runRanks(4, [&](int r, int n, const gyreUniqueId& id) {
    setenv("GYRE_TUNER", "calibrate", 1);
    setenv("GYRE_TUNER_DUMP_FILE", dump.c_str(), 1);
    Checker check(r);
    gyreComm_t comm = initRank(r, n, id);
    if (!comm) return 1;
    allReduceRuns(comm, r, n, check);
    gyreComm_t half = nullptr;
    check.expectOk(gyreCommSplit(comm, r % 2, r, &half, nullptr), "split");
    if (half) {
      allReduceRuns(half, r / 2, 2, check);
      gyreCommDestroy(half);
    }
    gyreCommDestroy(comm);
    return check.failures();
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  const std::string& log0 = out.ranks[0].output;
  ASSERT_NE(log0.find("tuner calibrated in"), std::string::npos) << log0;
  // The split's child logs the same model, without measuring again.
  size_t first = log0.find("tuner model (calibrated)");
  ASSERT_NE(first, std::string::npos) << log0;
  size_t second = log0.find("tuner model (calibrated)", first + 1);
  ASSERT_NE(second, std::string::npos) << log0;
  auto modelLine = [&](size_t at) { return log0.substr(at, log0.find('\n', at) - at); };
  EXPECT_EQ(modelLine(first).substr(0, modelLine(first).find(';')), modelLine(second).substr(0, modelLine(second).find(';')));
  size_t calibrations = 0;
  for (size_t at = log0.find("tuner calibrated in"); at != std::string::npos; at = log0.find("tuner calibrated in", at + 1))
    ++calibrations;
  EXPECT_EQ(calibrations, 1u) << log0;
  const CostModel loaded = CostModel::load(dump);
  loaded.validate(dump);
  std::remove(dump.c_str());
}

// GYRE_TUNER_ONLINE=1 with a measurement again every 2 trials' worth of
// calls: every class goes through trials, agreement and settled calls over
// and over, in plain, nonblocking and grouped calls alike, and every result
// must be exact (ranks that disagreed on an algorithm would fail or hang).
TEST(TunerInRanks, OnlineChoicesAgreeOnEveryRankAndEveryResultIsExact) {
  RunOutcome out = runRanks(3, [&](int r, int n, const gyreUniqueId& id) {
    setenv("GYRE_TUNER_ONLINE", "1", 1);
    setenv("GYRE_TUNER_RETUNE", "2", 1);
    Checker check(r);
    gyreComm_t comm = initRank(r, n, id, nullptr, 60000);
    if (!comm) return 1;
    const float sum = float(n * (n + 1) / 2);
    for (int iter = 0; iter < 200 && check.failures() == 0; ++iter) {
      // 12 bytes: trials all along (batches of 1024 calls); the larger ones
      // settle and are measured again several times.
      for (size_t count : {size_t{3}, size_t{70000}, size_t{300000}}) {
        std::vector<float> v(count, float(r + 1));
        if (iter % 5 == 4) {  // nonblocking, as DDP's buckets are
          gyreRequest_t req = nullptr;
          check.expectOk(gyreIallReduce(v.data(), v.data(), count, gyreFloat32, gyreSum, comm, &req), "iallreduce");
          check.expectOk(gyreWait(req), "wait");
        } else {
          check.expectOk(gyreAllReduce(v.data(), v.data(), count, gyreFloat32, gyreSum, comm, nullptr), "allreduce");
        }
        check.expect(v.front() == sum && v[count / 2] == sum && v.back() == sum,
                     "allreduce of " + std::to_string(count) + " at iteration " + std::to_string(iter));
      }
      const size_t block = 60000;
      std::vector<int32_t> mine(block, r * 7 + iter), all(block * size_t(n), -1), part(block, -1);
      std::vector<int32_t> bc(block * 3, r == 1 ? iter : -1);
      if (iter % 7 == 6) check.expectOk(gyreGroupStart(), "group start");
      check.expectOk(gyreAllGather(mine.data(), all.data(), block, gyreInt32, comm, nullptr), "allgather");
      check.expectOk(gyreBroadcast(bc.data(), bc.data(), bc.size(), gyreInt32, 1, comm, nullptr), "broadcast");
      if (iter % 7 == 6) check.expectOk(gyreGroupEnd(), "group end");
      check.expectOk(gyreReduceScatter(all.data(), part.data(), block, gyreInt32, gyreSum, comm, nullptr),
                     "reducescatter");
      for (int q = 0; q < n; ++q)
        check.expect(all[size_t(q) * block] == q * 7 + iter && all[size_t(q + 1) * block - 1] == q * 7 + iter,
                     "allgather block " + std::to_string(q) + " at iteration " + std::to_string(iter));
      check.expect(bc.front() == iter && bc.back() == iter, "broadcast at iteration " + std::to_string(iter));
      const int32_t parts = n * (r * 7 + iter);  // every rank's copy of the gathered block r
      check.expect(part.front() == parts && part.back() == parts, "reducescatter at iteration " + std::to_string(iter));
    }
    gyreCommDestroy(comm);
    return check.failures();
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  const std::string& log0 = out.ranks[0].output;
  for (const char* op : {"allreduce of 280000 bytes", "allreduce of 1200000 bytes", "allgather of 240000 bytes",
                         "reducescatter of 240000 bytes", "broadcast of 720000 bytes"})
    EXPECT_NE(log0.find(std::string(op) + " on 3 ranks"), std::string::npos) << op << "\n" << log0;
  EXPECT_NE(log0.find("(measured, slowest rank's median of " + std::to_string(OnlineTuner::kTrials) + ": "),
            std::string::npos)
      << log0;
}

TEST(TunerInRanks, OnlineSettingIsCheckedAndMustMatchOnEveryRank) {
  RunOutcome out = runRanks(2, [&](int r, int n, const gyreUniqueId& id) {
    gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
    cfg.tunerOnline = 2;
    gyreComm_t comm = nullptr;
    if (gyreCommInitRankConfig(&comm, n, id, r, &cfg) != gyreInvalidArgument) return 1;
    std::printf("config: %s\n", gyreGetLastError(nullptr));
    setenv("GYRE_TUNER_ONLINE", "yes", 1);
    if (gyreCommInitRank(&comm, n, id, r) != gyreInvalidArgument) return 1;
    std::printf("env: %s\n", gyreGetLastError(nullptr));
    // Rank 1 turns it on through its config only: the ranks would choose apart.
    unsetenv("GYRE_TUNER_ONLINE");
    cfg.tunerOnline = r;
    cfg.timeoutMs = 20000;
    if (gyreCommInitRankConfig(&comm, n, id, r, &cfg) == gyreSuccess) return 1;
    std::printf("mixed: %s\n", gyreGetLastError(nullptr));
    return 0;
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    EXPECT_NE(r.output.find("config.tunerOnline=2 must be 0 or 1"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("GYRE_TUNER_ONLINE=yes must be an integer from 0 to 1"), std::string::npos) << r.output;
  }
  EXPECT_NE(out.ranks[0].output.find("rank 1 was started with different GYRE_TUNER_ONLINE"), std::string::npos)
      << out.ranks[0].output;
}

}  // namespace
}  // namespace gyre::test
