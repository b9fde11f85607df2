// The tuner: the cost model's file format and its errors, the choices it
// makes for call shapes (with a stand-in communicator), and, in real rank
// processes, the model loaded from a file, measured at creation, written
// out, inherited by a split, and rejected when ranks disagree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/tuner.h"
#include "core/error.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

using collectives::CallRequest;
using collectives::CostModel;
using collectives::OpKind;

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

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

TEST(TunerChoice, HierarchicalWhenTheNetworkIsTheSlowLink) {
  FakeEnv env(8, 2, false);  // two hosts of four ranks
  env.params().model = CostModel::parse("network.bandwidth_gbps = 0.2\nnetwork.latency_us = 50\n", "slow");
  EXPECT_EQ(choose(env, OpKind::AllReduce, 64u << 20), "hierarchical");
  // As fast as shared memory: crossing with every rank costs nothing extra.
  env.params().model = CostModel::parse("network.bandwidth_gbps = 50\nnetwork.latency_us = 0.3\n", "fast");
  EXPECT_NE(choose(env, OpKind::AllReduce, 64u << 20), "hierarchical");
}

TEST(TunerChoice, SingleCopyWhenReadsAreFastAndNeverWithoutThem) {
  FakeEnv env(4, 1, true);
  env.params().model = CostModel::parse("read.bandwidth_gbps = 40\n", "fast reads");
  EXPECT_EQ(choose(env, OpKind::AllGather, 64u << 20), "direct");
  FakeEnv noReads(4, 1, false);
  noReads.params().model = env.params().model;
  EXPECT_EQ(choose(noReads, OpKind::AllGather, 64u << 20), "ring");
}

// GYRE_MAPPED_BUFFERS=1: reads of peers' gyreMemAlloc buffers run at memory
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

// With more ranks than cores, a direct Broadcast's readers share the cores:
// the chain or the tree, never direct (measured behind the chain at every
// size with 4 ranks on 2 cores).
TEST(TunerChoice, CrowdedBroadcastNeverReadsDirectly) {
  FakeEnv crowded(4, 1, true);
  crowded.params().cores = 2;
  for (size_t bytes = 8; bytes <= (256u << 20); bytes *= 2)
    EXPECT_NE(choose(crowded, OpKind::Broadcast, bytes), "direct") << bytes;
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

}  // namespace
}  // namespace gyre::test
