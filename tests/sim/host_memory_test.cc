// Ranks that are processes on one host, against closed forms: transfers
// share the host's memory (ClusterSpec::hostMemoryBytesPerSecond), a call
// that fits the host's cache runs faster within it (cacheBytes), a rank's
// own copies are charged only where the executor makes them beside its
// message (a CopySend over a socket, not into a shared-memory FIFO), and a
// FIFO's slot is copied in and then out (fifoSlotBytes).
#include <gtest/gtest.h>

#include "base/error.h"
#include "sim/cluster.h"
#include "sim/simulate.h"

namespace gyre::sim {
namespace {

using collectives::OpKind;

constexpr double kPort = 1e9;      // each rank's port, each way
constexpr double kLatency = 1e-6;  // through the host's switch
constexpr size_t kBlock = 16 * 1024;  // one message a step

// hosts x ranks, ports of 1 GB/s, NICs as fast, free local work unless
// copy says otherwise, no software cost.
ClusterSpec processes(int hosts, int ranks, double memory, double copy = 1e18) {
  ClusterSpec s;
  s.hosts = hosts;
  s.ranksPerHost = ranks;
  s.nicsPerHost = 1;
  s.intraBytesPerSecond = kPort;
  s.intraLatency = kLatency;
  s.nicBytesPerSecond = kPort;
  s.nicLatency = kLatency / 2;  // both ends: the same latency as within a host
  s.switchLatency = 0;
  s.hostMemoryBytesPerSecond = memory;
  s.copyBytesPerSecond = copy;
  s.reduceBytesPerSecond = 1e18;
  s.stepOverhead = 0;
  s.peerReads = false;
  return s;
}

// A call of `blocks` blocks per rank (the API's count is a block's).
CallResult callOf(const ClusterSpec& spec, OpKind kind, const char* algo, size_t blocks = 1) {
  collectives::CallRequest req;
  req.desc.kind = kind;
  req.desc.count = blocks * kBlock / 4;
  req.desc.root = kind == OpKind::Broadcast || kind == OpKind::Reduce ? 0 : -1;
  req.elemSize = 4;
  return simulateCall(spec, req, algo);
}
double secondsOf(const ClusterSpec& spec, OpKind kind, const char* algo, size_t blocks = 1) {
  return callOf(spec, kind, algo, blocks).run.seconds;
}

// Two ranks exchanging at once share the host's memory: each gets half of
// it. One way alone (a Broadcast) gets its port, the memory permitting.
TEST(HostMemory, TwoRanksSendingAtOnceShareIt) {
  const double oneWay = kBlock / kPort + kLatency;
  // Unlimited memory: the exchange takes a one-way transfer's time.
  EXPECT_NEAR(secondsOf(processes(1, 2, 0), OpKind::AllToAll, "alltoall:pairwise"), oneWay, oneWay * 1e-9);
  // Memory as fast as a port: the two directions take half each.
  const double shared = kBlock / (kPort / 2) + kLatency;
  EXPECT_NEAR(secondsOf(processes(1, 2, kPort), OpKind::AllToAll, "alltoall:pairwise"), shared, shared * 1e-9);
  // Twice a port: no longer the limit.
  EXPECT_NEAR(secondsOf(processes(1, 2, 2 * kPort), OpKind::AllToAll, "alltoall:pairwise"), oneWay, oneWay * 1e-9);
}

// Eight ranks of a ring AllGather send at once: every step's eight
// transfers share the memory, where each had its own port before.
TEST(HostMemory, EightRanksShareItEveryStep) {
  const double free = secondsOf(processes(1, 8, 0), OpKind::AllGather, "allgather:ring");
  const double shared = secondsOf(processes(1, 8, 2 * kPort), OpKind::AllGather, "allgather:ring");
  const double steps = 7;
  EXPECT_NEAR(free, steps * (kBlock / kPort + kLatency), free * 1e-9);
  EXPECT_NEAR(shared, steps * (kBlock / (2 * kPort / 8) + kLatency), shared * 1e-9);
}

// Across hosts the memory is each host's own and a NIC's transfer does not
// cross it.
TEST(HostMemory, TransfersBetweenHostsDoNotCrossIt) {
  const double a = secondsOf(processes(2, 1, 0), OpKind::AllToAll, "alltoall:pairwise");
  const double b = secondsOf(processes(2, 1, kPort / 100), OpKind::AllToAll, "alltoall:pairwise");
  EXPECT_DOUBLE_EQ(a, b);
}

// The ring AllGather's first step copies the rank's own block into its
// output and sends it: into a FIFO that is one pass (free here), over a
// socket a copy first. Receives cost no copy of their own either way.
TEST(LocalCopies, ACopySendIntoSharedMemoryIsOnePassAndOverASocketACopyFirst) {
  const double copy = 0.25e9;  // slow enough to see
  const double withinFree = secondsOf(processes(1, 2, 0), OpKind::AllGather, "allgather:ring");
  const double within = secondsOf(processes(1, 2, 0, copy), OpKind::AllGather, "allgather:ring");
  EXPECT_DOUBLE_EQ(within, withinFree);
  const double acrossFree = secondsOf(processes(2, 1, 0), OpKind::AllGather, "allgather:ring");
  const double across = secondsOf(processes(2, 1, 0, copy), OpKind::AllGather, "allgather:ring");
  EXPECT_NEAR(across - acrossFree, kBlock / copy, kBlock / copy * 1e-9);
}

// A call whose host working set (each rank's input and output: 4 blocks a
// rank in a 2-rank AllToAll) fits the cache moves cacheSpeedup times
// faster within the host; one that half fits, the blend of the two; links
// between hosts not at all.
TEST(HostCache, ACallThatFitsRunsFasterWithinTheHostOnly) {
  const double workingSet = 2 * 4.0 * kBlock;
  auto cached = [&](int hosts, int ranks, double cache) {
    ClusterSpec s = processes(hosts, ranks, 0);
    s.cacheBytes = cache;
    s.cacheSpeedup = 2;
    return secondsOf(s, OpKind::AllToAll, "alltoall:pairwise");
  };
  const double fits = kBlock / (2 * kPort) + kLatency;
  EXPECT_NEAR(cached(1, 2, 2 * workingSet), fits, fits * 1e-9);
  const double half = kBlock / (kPort / (0.5 / 2 + 0.5)) + kLatency;
  EXPECT_NEAR(cached(1, 2, workingSet / 2), half, half * 1e-9);
  EXPECT_DOUBLE_EQ(cached(2, 1, 2 * workingSet), secondsOf(processes(2, 1, 0), OpKind::AllToAll, "alltoall:pairwise"));
}

// One block through a FIFO whose slot it fills: the sender copies it in, the
// receiver then copies it out, one after the other.
TEST(HostFifo, AMessageOfOneSlotIsCopiedInThenOut) {
  ClusterSpec s = processes(1, 2, 0);
  const double plain = secondsOf(s, OpKind::Broadcast, "broadcast:chain");
  EXPECT_NEAR(plain, kBlock / kPort + kLatency, plain * 1e-9);
  s.fifoSlotBytes = kBlock;
  const double fifo = secondsOf(s, OpKind::Broadcast, "broadcast:chain");
  EXPECT_NEAR(fifo, 2 * kBlock / kPort + kLatency, fifo * 1e-9);
}

// Eight slots' worth: the receiver copies each slot out while the sender
// fills the next, so the message takes one slot's copy more than its bytes.
TEST(HostFifo, ALongMessagePaysOneSlotMore) {
  ClusterSpec s = processes(1, 2, 0);
  s.fifoSlotBytes = kBlock;
  const double t = secondsOf(s, OpKind::Broadcast, "broadcast:chain", 8);
  EXPECT_NEAR(t, 9 * kBlock / kPort + kLatency, t * 1e-9);
}

// A receive that reduces reads the slot in place: its reduction is its
// copy out (free here), none is added.
TEST(HostFifo, AReductionReadsTheSlotInPlace) {
  ClusterSpec s = processes(1, 2, 0);
  s.fifoSlotBytes = kBlock;
  const double t = secondsOf(s, OpKind::Reduce, "reduce:chain");
  EXPECT_NEAR(t, kBlock / kPort + kLatency, t * 1e-9);
}

// Across hosts there are no FIFOs: the slot changes nothing.
TEST(HostFifo, BetweenHostsItChangesNothing) {
  ClusterSpec s = processes(2, 1, 0);
  const double plain = secondsOf(s, OpKind::Broadcast, "broadcast:chain");
  s.fifoSlotBytes = kBlock;
  EXPECT_DOUBLE_EQ(secondsOf(s, OpKind::Broadcast, "broadcast:chain"), plain);
}

// The planner cuts as over gyre's shared memory: messages of a slot at most,
// and pairwise AllToAll's pieces within the FIFOs' budget (4 ranks, 8 slots:
// 128 KiB, collectives::pairwisePieceBytes).
TEST(HostFifo, PiecesAreCutAsTheTransportCutsThem) {
  ClusterSpec s = processes(1, 4, 0);
  const size_t blocks = (1 << 20) / kBlock;  // 1 MiB to each peer
  EXPECT_EQ(callOf(s, OpKind::AllToAll, "alltoall:pairwise", blocks).run.messages, 4u * 3 * 4);  // 256 KiB pieces
  s.fifoSlotBytes = 256 * 1024;
  EXPECT_EQ(callOf(s, OpKind::AllToAll, "alltoall:pairwise", blocks).run.messages, 4u * 3 * 8);  // 128 KiB
  s.fifoSlotBytes = 64 * 1024;
  EXPECT_EQ(callOf(s, OpKind::AllToAll, "alltoall:pairwise", blocks).run.messages, 4u * 3 * 16);  // a slot
}

// Every rank cuts a vector into the same pieces, as a communicator does
// (one chunk for all: the smaller of the FIFO's slot and the network's
// chunk): a ring across hosts whose ranks cut by their own neighbours'
// links deadlocked here with a slot other than the network's chunk.
TEST(HostFifo, EveryRankCutsAsTheOthersDo) {
  ClusterSpec s = processes(2, 4, 0);
  for (double slot : {4.0 * 1024, 16.0 * 1024, 1024.0 * 1024}) {
    s.fifoSlotBytes = slot;
    const CallResult r = callOf(s, OpKind::AllReduce, "allreduce:ring", 64);
    EXPECT_GT(r.run.seconds, 0) << slot;
  }
}

// The FIFO slots a call writes are in its working set: a pairwise AllToAll
// whose buffers just fit the cache runs slower once each rank's block in
// its FIFO is counted, and as fast as when everything fits once the cache
// holds those too.
TEST(HostCache, TheFifosSlotsAreInTheWorkingSet) {
  const double buffers = 2 * 4.0 * kBlock, fifos = 2.0 * kBlock;  // each rank's block to its peer, one slot
  auto seconds = [&](double cache) {
    ClusterSpec s = processes(1, 2, 0);
    s.fifoSlotBytes = kBlock;
    s.cacheBytes = cache;
    s.cacheSpeedup = 2;
    return secondsOf(s, OpKind::AllToAll, "alltoall:pairwise");
  };
  EXPECT_DOUBLE_EQ(seconds(buffers + fifos), seconds(4 * (buffers + fifos)));
  EXPECT_GT(seconds(buffers), 1.01 * seconds(buffers + fifos));
}

// A rooted call's ranks touch one buffer each, the root two: a 2-rank
// Broadcast's working set is both outputs and the root's input (3 blocks),
// a Reduce's both inputs and the root's output. A cache of 3 blocks holds
// all of it (as fast as a far larger cache); one a little smaller does not.
TEST(HostCache, ARootedCallTouchesOneBufferARankAndTheRootsOther) {
  const double touched = 3.0 * kBlock;
  for (const auto& [kind, algo] : {std::pair{OpKind::Broadcast, "broadcast:chain"}, std::pair{OpKind::Reduce, "reduce:chain"}}) {
    auto seconds = [&, kind = kind, algo = algo](double cache) {
      ClusterSpec s = processes(1, 2, 0, 1e9);  // copies that take time: the cache speeds them
      s.reduceBytesPerSecond = 1e9;
      s.cacheBytes = cache;
      s.cacheSpeedup = 2;
      return secondsOf(s, kind, algo);
    };
    EXPECT_DOUBLE_EQ(seconds(touched), seconds(10 * touched)) << algo;
    EXPECT_GT(seconds(0.9 * touched), 1.01 * seconds(touched)) << algo;
  }
}

// What each rank keeps in the cache beside a call's buffers counts once a
// rank of the host: a 2-rank AllToAll whose buffers just fit runs slower
// with a footprint per rank, exactly as with the cache cut by both ranks'
// footprints; 4 ranks lose twice as much of it. Across hosts nothing changes.
TEST(HostCache, EachRanksFootprintTakesItsShareOfTheCache) {
  auto seconds = [&](int hosts, int ranks, double cache, double perRank) {
    ClusterSpec s = processes(hosts, ranks, 0);
    s.cacheBytes = cache;
    s.cacheSpeedup = 2;
    s.cacheBytesPerRank = perRank;
    return secondsOf(s, OpKind::AllToAll, "alltoall:pairwise");
  };
  const double two = 2 * 4.0 * kBlock, four = 4 * 8.0 * kBlock;  // the buffers: 2 (4) ranks' in and out
  EXPECT_DOUBLE_EQ(seconds(1, 2, two, 0), seconds(1, 2, 10 * two, 0));
  EXPECT_GT(seconds(1, 2, two, kBlock), 1.01 * seconds(1, 2, two, 0));
  // Half of the working set's worth in the cache either way.
  EXPECT_DOUBLE_EQ(seconds(1, 2, two, two / 2), seconds(1, 2, two / 2, 0));
  EXPECT_DOUBLE_EQ(seconds(1, 4, four, four / 4), seconds(1, 4, four / 2, 0));
  ClusterSpec bad = processes(1, 2, 0);
  bad.cacheBytesPerRank = -1;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(HostCache, ASpeedupBelowOneIsRefused) {
  ClusterSpec s = processes(1, 2, 0);
  s.cacheBytes = 1 << 20;
  s.cacheSpeedup = 0.5;
  try {
    s.validate();
    ADD_FAILURE() << "a cache that slows the host was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the cache speedup must be 1 or more"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gyre::sim
