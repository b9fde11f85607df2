// Ranks that are processes on a host's CPU cores (ClusterSpec::coresPerHost),
// against closed forms: a message within the host is copied in on its
// sender's core and out (or reduced) on its receiver's, the last FIFO slot's
// copy out after the message is in; a core's work is shared by everything
// that runs on it, its ranks and their directions; a step that received what
// it sends wrote the slot in its own pass; a rank that slept on a shared
// core pays a switch to run again; between hosts the socket's copies stay in
// the link's rate.
#include <gtest/gtest.h>

#include "base/error.h"
#include "sim/cluster.h"
#include "sim/simulate.h"

namespace gyre::sim {
namespace {

using collectives::OpKind;

constexpr double kCore = 1e9;        // a core's copy into a FIFO
constexpr double kLatency = 1e-6;    // through the host's switch
constexpr size_t kBlock = 16 * 1024;  // one message a step
constexpr double b = kBlock;

// hosts x ranks on `cores` cores a host; ports and NICs that never limit,
// free reductions and own copies unless set, no software cost.
ClusterSpec onCores(int hosts, int ranks, int cores) {
  ClusterSpec s;
  s.hosts = hosts;
  s.ranksPerHost = ranks;
  s.nicsPerHost = 1;
  s.intraBytesPerSecond = 1e18;
  s.intraLatency = kLatency;
  s.nicBytesPerSecond = 1e18;
  s.nicLatency = kLatency / 2;
  s.switchLatency = 0;
  s.copyBytesPerSecond = 1e18;
  s.reduceBytesPerSecond = 1e18;
  s.stepOverhead = 0;
  s.peerReads = false;
  s.coresPerHost = cores;
  s.coreBytesPerSecond = kCore;
  return s;
}

CallResult callOf(const ClusterSpec& spec, OpKind kind, const char* algo, size_t blocks = 1, bool aggregate = true) {
  collectives::CallRequest req;
  req.desc.kind = kind;
  req.desc.count = blocks * kBlock / 4;
  req.desc.root = kind == OpKind::Broadcast || kind == OpKind::Reduce ? 0 : -1;
  req.elemSize = 4;
  return simulateCall(spec, req, algo, nullptr, false, aggregate);
}
double secondsOf(const ClusterSpec& spec, OpKind kind, const char* algo, size_t blocks = 1) {
  return callOf(spec, kind, algo, blocks).run.seconds;
}

// A message of one slot: the sender's core copies it in, then the
// receiver's copies it out, at the read rate (another core wrote it).
TEST(HostCores, ASlotIsCopiedInThenReadOutOnTheOtherCore) {
  ClusterSpec s = onCores(1, 2, 2);
  s.fifoSlotBytes = b;
  s.coreReadBytesPerSecond = kCore / 2;
  const double t = secondsOf(s, OpKind::Broadcast, "broadcast:chain");
  EXPECT_NEAR(t, b / kCore + kLatency + b / (kCore / 2), t * 1e-9);
}

// Without FIFOs each message's copy in and copy out run side by side: one
// way alone takes a copy's time; two ranks sending to each other at once
// each give their core both a copy in and a copy out, half the rate each.
TEST(HostCores, TwoRanksSendingToEachOtherHalveTheirCores) {
  const ClusterSpec s = onCores(1, 2, 2);
  const double oneWay = secondsOf(s, OpKind::Broadcast, "broadcast:chain");
  EXPECT_NEAR(oneWay, b / kCore + kLatency, oneWay * 1e-9);
  const double both = secondsOf(s, OpKind::AllToAll, "alltoall:pairwise");
  EXPECT_NEAR(both, 2 * b / kCore + kLatency, both * 1e-9);
}

// Two ranks on one core take turns: the exchange's four copies on one core.
TEST(HostCores, RanksOfOneCoreShareIt) {
  const double one = secondsOf(onCores(1, 2, 1), OpKind::AllToAll, "alltoall:pairwise");
  EXPECT_NEAR(one, 4 * b / kCore + kLatency, one * 1e-9);
  // More cores than ranks: the idle ones change nothing.
  EXPECT_DOUBLE_EQ(secondsOf(onCores(1, 2, 8), OpKind::AllToAll, "alltoall:pairwise"),
                   secondsOf(onCores(1, 2, 2), OpKind::AllToAll, "alltoall:pairwise"));
}

// A receive that reduces costs its core the reduction, at the reduction's
// rate; reading the slot in place, it copies nothing out. The middle rank of
// a 3-rank chain reduces straight into its next slot, so its send copies
// nothing more: each piece is one copy in (rank 1's) and two reductions.
TEST(HostCores, AReductionWritesTheSlotItSends) {
  ClusterSpec s = onCores(1, 2, 2);
  s.fifoSlotBytes = b;
  s.reduceBytesPerSecond = kCore / 4;
  const double two = secondsOf(s, OpKind::Reduce, "reduce:chain");
  EXPECT_NEAR(two, b / kCore + kLatency + 4 * b / kCore, two * 1e-9);
  s.ranksPerHost = s.coresPerHost = 3;
  const CallResult three = callOf(s, OpKind::Reduce, "reduce:chain");
  // The chain pipelines 4 pieces (besides each rank's empty hello).
  ASSERT_EQ(three.run.messages, 3u + 2 * 4);
  const double p = b / 4, reduce = 4 * p / kCore;
  // Rank 1's first piece in, rank 2's reduction of it, then rank 0 reduces
  // the 4 pieces one after another (rank 2 keeps pace, reducing each while
  // rank 0 reduces the one before).
  const double t = p / kCore + kLatency + reduce + kLatency + 4 * reduce;
  EXPECT_NEAR(three.run.seconds, t, t * 1e-9);
}

// A copy that fills a FIFO slot and writes its output in the same pass pays
// for the second destination (ClusterSpec::secondWriteCost): the chain
// Broadcast's root (a CopySend: its input to its output and the slot) and
// its middle rank (a RecvCopySend: the slot it receives to its output and
// the next rank's slot); the last rank writes its output only. Without
// FIFOs nothing writes two.
TEST(HostCores, ASecondDestinationCostsItsShare) {
  auto seconds = [&](int ranks, double second, double slot) {
    ClusterSpec s = onCores(1, ranks, ranks);
    s.fifoSlotBytes = slot;
    s.secondWriteCost = second;
    return secondsOf(s, OpKind::Broadcast, "broadcast:chain");
  };
  const double two = seconds(2, 0.5, b);
  EXPECT_NEAR(two, 1.5 * b / kCore + kLatency + b / kCore, two * 1e-9);
  EXPECT_NEAR(seconds(3, 0.5, b) - seconds(3, 0, b), 2 * 0.5 * b / kCore, two * 1e-9);
  EXPECT_DOUBLE_EQ(seconds(3, 0.5, 0), seconds(3, 0, 0));
}

// Ranks that take turns on a core get the cache's shared speed-up
// (sharedCoreCacheSpeedup): 2 ranks on one core exchanging a block that
// fits move it at that speed-up where set, at cacheSpeedup where not; with
// a core each they take cacheSpeedup whatever the shared one is.
TEST(HostCores, RanksSharingACoreGetTheSharedCacheSpeedup) {
  auto seconds = [&](int cores, double shared) {
    ClusterSpec s = onCores(1, 2, cores);
    s.cacheBytes = 1 << 30;
    s.cacheSpeedup = 4;
    s.sharedCoreCacheSpeedup = shared;
    return secondsOf(s, OpKind::AllToAll, "alltoall:pairwise");
  };
  // One core: the exchange's four copies one after another (RanksOfOneCoreShareIt).
  EXPECT_NEAR(seconds(1, 2), 4 * b / (2 * kCore) + kLatency, seconds(1, 2) * 1e-9);
  EXPECT_NEAR(seconds(1, 0), 4 * b / (4 * kCore) + kLatency, seconds(1, 0) * 1e-9);
  EXPECT_DOUBLE_EQ(seconds(2, 2), seconds(2, 0));
  ClusterSpec bad = onCores(1, 2, 1);
  bad.sharedCoreCacheSpeedup = 0.5;
  EXPECT_THROW(bad.validate(), Error);
}

// Where ranks share a core, a rank that slept (every lane waiting for a
// message) costs its core a switch to run again; with a core of its own it
// costs nothing. The 2-rank chain's receiver sleeps twice, for the root's
// hello and for the data; everything runs on the one core, so the call
// takes the two switches longer.
TEST(HostCores, ARankThatSleptRunsAgainAfterASwitchWhereItSharesTheCore) {
  constexpr double kSwitch = 10e-6;
  auto seconds = [&](int cores, double sw) {
    ClusterSpec s = onCores(1, 2, cores);
    s.fifoSlotBytes = b;
    s.coreSwitchSeconds = sw;
    return secondsOf(s, OpKind::Broadcast, "broadcast:chain");
  };
  const double shared = seconds(1, kSwitch) - seconds(1, 0);
  EXPECT_NEAR(shared, 2 * kSwitch, kSwitch * 1e-6);
  EXPECT_DOUBLE_EQ(seconds(2, kSwitch), seconds(2, 0));
}

// A rank's own copy (a CopySend over a socket copies first) runs on its core
// at the copy rate, beside what else the core does.
TEST(HostCores, OwnCopiesTakeTheCoreAtTheCopyRate) {
  ClusterSpec s = onCores(2, 1, 1);
  s.copyBytesPerSecond = kCore / 2;
  ClusterSpec free = s;
  free.coresPerHost = 0;
  // Between hosts a message's copies are the link's; the own copy is the
  // same with cores as without: nothing else runs on the core.
  const double with = secondsOf(s, OpKind::AllGather, "allgather:ring");
  EXPECT_NEAR(with, secondsOf(free, OpKind::AllGather, "allgather:ring"), with * 1e-9);
  EXPECT_NEAR(with, b / (kCore / 2) + kLatency, with * 1e-9);
}

// Between hosts the cores carry no message: the NIC's rate has the socket's
// copies, as without cores.
TEST(HostCores, MessagesBetweenHostsDoNotCrossThem) {
  ClusterSpec s = onCores(2, 1, 1);
  s.nicBytesPerSecond = kCore / 10;
  ClusterSpec free = s;
  free.coresPerHost = 0;
  EXPECT_DOUBLE_EQ(secondsOf(s, OpKind::AllToAll, "alltoall:pairwise"),
                   secondsOf(free, OpKind::AllToAll, "alltoall:pairwise"));
}

// A single-copy read of a peer's memory (not mapped: the kernel copies it)
// runs on the reader's core at the peer read rate: the direct Broadcast's
// readers, each on its own core, take b at that rate instead of the core's.
TEST(HostCores, PeersMemoryIsReadAtTheKernelsRate) {
  ClusterSpec s = onCores(1, 3, 3);
  s.peerReads = true;
  ClusterSpec slow = s;
  slow.peerReadBytesPerSecond = kCore / 4;
  const double fast = secondsOf(s, OpKind::Broadcast, "broadcast:direct");
  const double t = secondsOf(slow, OpKind::Broadcast, "broadcast:direct");
  EXPECT_NEAR(t - fast, b / (kCore / 4) - b / kCore, t * 1e-9);
  // Two readers on one core take turns.
  ClusterSpec shared = slow;
  shared.ranksPerHost = 5;
  shared.coresPerHost = 2;  // ranks 1 and 3 on core 1, 2 and 4 with the root on core 0
  const double both = secondsOf(shared, OpKind::Broadcast, "broadcast:direct");
  EXPECT_GT(both - t, 0.99 * b / (kCore / 4)) << both << " against " << t;
}

// The tuner sees the cores, as a communicator's does (TuningParams::cores):
// 8 ranks on 2 cores take pairwise for small AllToAll blocks where, with a
// core each, Bruck's fewer rounds win.
TEST(HostCores, TheTunerSeesThem) {
  ClusterSpec s = onCores(1, 8, 8);
  s.fifoSlotBytes = 256 * 1024;
  s.intraBytesPerSecond = 10e9;
  s.stepOverhead = 1e-6;
  collectives::CallRequest req;
  req.desc.kind = OpKind::AllToAll;
  req.desc.count = 128;  // 512-byte blocks
  req.elemSize = 4;
  EXPECT_EQ(simulateCall(s, req).algorithm, "bruck");
  s.coresPerHost = 2;
  EXPECT_EQ(simulateCall(s, req).algorithm, "pairwise");
}

// One representative per orbit gives the full run's time where ranks share
// cores, as long as the symmetry keeps each core's ranks together: 8 ranks
// on 2 and on 4 cores (rotations and XORs that keep l % C), and on 3 (no
// move inside the host keeps them: every rank simulated).
TEST(HostCores, SymmetriesKeepEachCoresRanksTogether) {
  for (int cores : {2, 3, 4}) {
    ClusterSpec s = onCores(2, 8, cores);
    s.fifoSlotBytes = b;
    s.coreReadBytesPerSecond = kCore / 2;
    s.reduceBytesPerSecond = kCore / 3;
    s.coreSwitchSeconds = 2e-6;
    for (const char* algo : {"allreduce:ring", "allreduce:hierarchical"}) {
      const CallResult agg = callOf(s, OpKind::AllReduce, algo, 64, true);
      const CallResult full = callOf(s, OpKind::AllReduce, algo, 64, false);
      EXPECT_NEAR(agg.run.seconds, full.run.seconds, full.run.seconds * 1e-9) << cores << " cores, " << algo;
      if (cores != 3) {
        EXPECT_FALSE(agg.run.aggregation.empty()) << cores << " cores, " << algo;
      }
    }
  }
}

TEST(HostCores, OutOfRangeIsNamed) {
  ClusterSpec s = onCores(1, 2, -1);
  try {
    s.validate();
    ADD_FAILURE() << "negative cores were taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the cores per host must be 0 to 4096"), std::string::npos) << e.what();
  }
  s = onCores(1, 2, 2);
  s.coreReadBytesPerSecond = -1;
  EXPECT_THROW(s.validate(), Error);
  s = onCores(1, 2, 2);
  s.coreSwitchSeconds = -1;
  EXPECT_THROW(s.validate(), Error);
  s = onCores(1, 2, 2);
  s.peerReadBytesPerSecond = -1;
  EXPECT_THROW(s.validate(), Error);
  s = onCores(1, 2, 2);
  s.secondWriteCost = -0.5;
  EXPECT_THROW(s.validate(), Error);
}

}  // namespace
}  // namespace gyre::sim
