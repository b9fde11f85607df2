// AllToAllv when ranks send different totals (a mixture of experts'
// imbalance), and the blockwise algorithm that makes that safe: the
// single-copy threshold, the plans both ends of every block build (without
// processes), then real ranks: the automatic choice with rank-dependent
// totals, blocks on both sides of the threshold in one call, empty blocks,
// and counts that disagree between a sender and its receiver, which must be
// an error naming both counts on every rank, never a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "collectives/alltoall.h"
#include "collectives/cost_model.h"
#include "collectives/planner.h"
#include "collectives/tuner.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

using collectives::CallRequest;
using collectives::CallShape;
using collectives::CostModel;
using collectives::OpKind;
using collectives::Plan;
using collectives::Prim;
using collectives::Step;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- the threshold ----

CallShape oneHost(int n, bool canRead, bool mapped, int cores = 0) {
  CallShape s;
  s.op = OpKind::AllToAllv;
  s.nranks = n;
  s.perHost = n;
  s.cores = cores;
  s.canRead = canRead;
  s.mappedReads = canRead && mapped;
  return s;
}

TEST(BlockwiseThreshold, NeverReadsWithoutReads) {
  const CostModel fast = CostModel::parse("read.bandwidth_gbps = 100\nread.latency_us = 0.01\n", "fast reads");
  for (int n : {2, 3, 4, 8})
    for (bool mapped : {false, true}) {
      EXPECT_EQ(collectives::blockwiseReadThreshold(oneHost(n, false, mapped), CostModel{}), SIZE_MAX);
      EXPECT_EQ(collectives::blockwiseReadThreshold(oneHost(n, false, mapped), fast), SIZE_MAX);
    }
}

// The smallest power of two at which the direct AllToAll's formula is no
// more than pairwise's: at T it is, at T/2 (from 64 bytes up) it is not.
TEST(BlockwiseThreshold, IsWhereReadsStartToPay) {
  const CostModel models[] = {CostModel{},
                              CostModel::parse("read.bandwidth_gbps = 100\nread.latency_us = 0.01\n", "fast reads")};
  int finite = 0;
  for (const CostModel& m : models)
    for (int n : {2, 3, 4, 8})
      for (int cores : {0, 2})
        for (bool mapped : {false, true}) {
          CallShape s = oneHost(n, true, mapped, cores);
          const size_t t = collectives::blockwiseReadThreshold(s, m);
          const std::string where = m.source + ", " + std::to_string(n) + " ranks, " + std::to_string(cores) +
                                    " cores" + (mapped ? ", mapped" : "");
          // Only AllToAll's shape counts: the call's bytes and operation do not.
          s.bytes = 12345;
          EXPECT_EQ(collectives::blockwiseReadThreshold(s, m), t) << where;
          if (t == SIZE_MAX) continue;
          ++finite;
          EXPECT_GE(t, 64u) << where;
          EXPECT_LE(t, size_t{1} << 30) << where;
          EXPECT_EQ(t & (t - 1), 0u) << where << ": " << t;
          s.op = OpKind::AllToAll;
          s.bytes = t;
          EXPECT_LE(collectives::costDirectAllToAll(s, m), collectives::costPairwiseAllToAll(s, m)) << where;
          if (t > 64) {
            s.bytes = t / 2;
            EXPECT_GT(collectives::costDirectAllToAll(s, m), collectives::costPairwiseAllToAll(s, m)) << where;
          }
        }
  EXPECT_GT(finite, 0);
  // With the built-in numbers: mapped buffers read from a few KiB up.
  const size_t mapped2 = collectives::blockwiseReadThreshold(oneHost(2, true, true, 2), CostModel{});
  EXPECT_GE(mapped2, 1024u);
  EXPECT_LE(mapped2, 64u * 1024);
}

// ---- plans, without processes ----

// A communicator as the planner sees it: one host, any rank.
class FakeEnv final : public collectives::PlanEnv {
 public:
  FakeEnv(int rank, int nranks, bool canRead, bool mapped, size_t chunk = 256 * 1024)
      : rank_(rank), nranks_(nranks), canRead_(canRead), chunk_(chunk) {
    world_ = collectives::Group::all(rank, nranks);
    tuning_.perHost = nranks;
    tuning_.mappedBuffers = mapped;
    tuning_.blockwiseReadBytes = collectives::blockwiseThresholdOf(*this);  // as the communicator sets it
  }
  const collectives::TuningParams& tuning() const override { return tuning_; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const collectives::Group& world() const override { return world_; }
  bool sameHost(int) const override { return true; }
  int hostIndex(int) const override { return 0; }
  size_t chunkBytes(std::span<const int>) override { return chunk_; }
  bool canReadPeerMemory() const override { return canRead_; }
  // As the communicator sets it for one host over shared memory.
  void cutPairwisePiecesAsOneHost(int slots) {
    tuning_.localFifoSlots = slots;  // one host of nranks_ ranks: pairwisePieceBytes(nranks_, slots)
    tuning_.blockwiseReadBytes = collectives::blockwiseThresholdOf(*this);
  }

 private:
  int rank_, nranks_;
  bool canRead_;
  size_t chunk_;
  collectives::Group world_;
  collectives::TuningParams tuning_;
};

// counts[s][d]: what rank s sends rank d (elements), blocks packed in order.
using Counts = std::vector<std::vector<size_t>>;

struct RankCall {
  std::vector<size_t> sc, sd, rc, rd;
  CallRequest req;
};

RankCall callOf(const Counts& counts, int me, size_t elemSize) {
  const int n = static_cast<int>(counts.size());
  RankCall c;
  c.sc.resize(n);
  c.sd.resize(n);
  c.rc.resize(n);
  c.rd.resize(n);
  size_t so = 0, ro = 0;
  for (int p = 0; p < n; ++p) {
    c.sc[p] = counts[me][p];
    c.sd[p] = so;
    so += c.sc[p];
    c.rc[p] = counts[p][me];
    c.rd[p] = ro;
    ro += c.rc[p];
  }
  c.req.desc.kind = OpKind::AllToAllv;
  c.req.elemSize = elemSize;
  c.req.sendCounts = c.sc.data();
  c.req.sendDispls = c.sd.data();
  c.req.recvCounts = c.rc.data();
  c.req.recvDispls = c.rd.data();
  return c;
}

Plan planFor(const char* algo, const Counts& counts, int me, bool canRead, bool mapped, size_t elemSize = 4,
             size_t chunk = 256 * 1024) {
  FakeEnv env(me, static_cast<int>(counts.size()), canRead, mapped, chunk);
  RankCall c = callOf(counts, me, elemSize);
  Plan plan;
  collectives::findAlgorithm(OpKind::AllToAllv, algo)->build(c.req, env, plan);
  return plan;
}

// One message of a connection, as its sender or its receiver plans it.
struct Message {
  bool addresses;
  size_t count;
  uint64_t blockCount;
  bool operator==(const Message&) const = default;
};

std::string show(const std::vector<Message>& ms) {
  std::string s;
  for (const Message& m : ms)
    s += std::string(m.addresses ? "A" : "D") + std::to_string(m.count) + "/" +
         (m.blockCount == collectives::kNoBlock ? std::string("-") : std::to_string(m.blockCount)) + " ";
  return s;
}

// Which lane a step is in: -1 the prologue, lanes.size() the epilogue.
int laneOf(const Plan& plan, size_t i) {
  if (plan.lanes.empty()) return 0;
  if (i < plan.lanes.front().begin) return -1;
  for (size_t l = 0; l < plan.lanes.size(); ++l)
    if (i >= plan.lanes[l].begin && i < plan.lanes[l].end) return static_cast<int>(l);
  return static_cast<int>(plan.lanes.size());
}

// Messages in the order the connection carries them (the steps' order:
// prologue, the one lane that talks to that peer, epilogue), checking that
// one lane at most sends (or receives) them within the lanes.
std::vector<Message> messages(const Plan& plan, int peer, bool sending) {
  std::vector<Message> out;
  int lane = -2;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const bool send = (s.prim == Prim::Send || s.prim == Prim::SendAddresses) && s.sendPeer == peer;
    const bool recv = (s.prim == Prim::Recv || s.prim == Prim::RecvAddresses) && s.recvPeer == peer;
    if (sending ? !send : !recv) continue;
    const int l = laneOf(plan, i);
    if (l >= 0 && l < static_cast<int>(plan.lanes.size())) {
      EXPECT_TRUE(lane == -2 || lane == l) << "messages " << (sending ? "to" : "from") << " rank " << peer
                                           << " in two lanes";
      lane = l;
    }
    out.push_back({s.prim == Prim::SendAddresses || s.prim == Prim::RecvAddresses, s.count, s.blockCount});
  }
  return out;
}

// Elements of block p -> me read from p.
size_t readFrom(const Plan& plan, int p) {
  size_t total = 0;
  for (const Step& s : plan.steps)
    if (s.prim == Prim::ReadCopy && s.recvPeer == p) total += s.count;
  return total;
}

Counts mixedCounts(int n) {
  // Both sides of any threshold up to 256 KiB, empty blocks included.
  const size_t sizes[] = {0, 1, 15, 16, 17, 1023, 1024, 1025, 2048, 4096, 65536, 65537, 0, 300001};
  Counts c(n, std::vector<size_t>(n));
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) c[s][d] = sizes[(s * 5 + d * 3) % std::size(sizes)];
  return c;
}

TEST(BlockwisePlan, BothEndsOfEveryBlockAgreeOnEveryMessage) {
  for (int n : {2, 3, 4, 5})
    for (bool mapped : {false, true}) {
      int reads = 0, passes = 0;
      for (size_t esz : {size_t{1}, size_t{4}, size_t{8}}) {
        const Counts counts = mixedCounts(n);
        FakeEnv probe(0, n, true, mapped);
        CallShape shape = collectives::callShape(callOf(counts, 0, esz).req, probe);
        const size_t t = collectives::blockwiseReadThreshold(shape, probe.tuning().model);
        std::vector<Plan> plans;
        for (int r = 0; r < n; ++r) plans.push_back(planFor("blockwise", counts, r, true, mapped, esz));
        for (int p = 0; p < n; ++p)
          for (int q = 0; q < n; ++q) {
            if (p == q) continue;
            const std::string where = std::to_string(n) + " ranks, " + std::to_string(esz) + "-byte elements" +
                                      (mapped ? ", mapped" : "") + ", block " + std::to_string(p) + " -> " +
                                      std::to_string(q);
            const std::vector<Message> sent = messages(plans[p], q, true), taken = messages(plans[q], p, false);
            EXPECT_EQ(sent, taken) << where << ": sent " << show(sent) << "taken " << show(taken);
            const bool read = counts[p][q] * esz >= t;
            reads += read;
            passes += !read;
            EXPECT_EQ(readFrom(plans[q], p), read ? counts[p][q] : 0) << where;
            // Its messages: the block's (addresses, or its pieces), then a
            // "done" where the reverse block was read.
            const bool reverseRead = counts[q][p] * esz >= t;
            ASSERT_FALSE(sent.empty()) << where;
            EXPECT_EQ(sent.front().addresses, read) << where;
            EXPECT_EQ(sent.front().blockCount, counts[p][q]) << where;
            const Message& last = sent.back();
            EXPECT_EQ(last.blockCount == collectives::kNoBlock && last.count == 0 && !last.addresses, reverseRead)
                << where << ": " << show(sent);
          }
      }
      EXPECT_GT(passes, 0) << n << " ranks: no block through the connection";
      // Mapped buffers read from a few KiB up with the built-in numbers.
      if (mapped) {
        EXPECT_GT(reads, 0) << n << " ranks: no block read";
      }
    }
}

// On a host of 3 or more ranks pairwise and blockwise cut their blocks into
// the smaller pieces that keep the host's FIFOs in cache, and both ends of
// every block cut them alike.
TEST(PairwisePieces, OneHostOfManyRanksCutsSmallerPiecesAlikeAtBothEnds) {
  for (int n : {2, 3, 4, 8}) {
    const size_t piece = collectives::pairwisePieceBytes(n, 8);
    Counts counts(n, std::vector<size_t>(n));
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) counts[s][d] = 100000 + 4099 * size_t(s) + 7 * size_t(d);  // 400-500 KB blocks
    for (const char* algo : {"pairwise", "blockwise"}) {
      std::vector<Plan> plans;
      for (int r = 0; r < n; ++r) {
        FakeEnv env(r, n, false, false);
        env.cutPairwisePiecesAsOneHost(8);
        RankCall c = callOf(counts, r, 4);
        plans.emplace_back();
        collectives::findAlgorithm(OpKind::AllToAllv, algo)->build(c.req, env, plans.back());
      }
      size_t largest = 0;
      for (int p = 0; p < n; ++p)
        for (int q = 0; q < n; ++q) {
          if (p == q) continue;
          const std::vector<Message> sent = messages(plans[p], q, true), taken = messages(plans[q], p, false);
          EXPECT_EQ(sent, taken) << algo << ", " << n << " ranks, " << p << " -> " << q;
          for (const Message& m : sent) largest = std::max(largest, m.count * 4);
        }
      if (n == 2) EXPECT_EQ(largest, size_t{256} << 10) << algo << ": 2 ranks keep the link's pieces";
      else EXPECT_EQ(largest, piece) << algo << ", " << n << " ranks";
    }
  }
}

// Without reads (TCP, or cross-process reads forbidden), blockwise is
// pairwise, step for step.
TEST(BlockwisePlan, IsPairwiseWherePeersCannotBeRead) {
  for (int n : {2, 3, 5}) {
    const Counts counts = mixedCounts(n);
    for (int r = 0; r < n; ++r) {
      const Plan b = planFor("blockwise", counts, r, false, true, 4, 4096);
      const Plan p = planFor("pairwise", counts, r, false, true, 4, 4096);
      ASSERT_EQ(b.steps.size(), p.steps.size()) << n << " ranks, rank " << r;
      for (size_t i = 0; i < b.steps.size(); ++i) {
        const Step &x = b.steps[i], &y = p.steps[i];
        EXPECT_TRUE(x.prim == y.prim && x.src == y.src && x.dst == y.dst && x.srcOffset == y.srcOffset &&
                    x.dstOffset == y.dstOffset && x.count == y.count && x.sendPeer == y.sendPeer &&
                    x.recvPeer == y.recvPeer && x.blockCount == y.blockCount)
            << n << " ranks, rank " << r << ", step " << i;
      }
      ASSERT_EQ(b.lanes.size(), p.lanes.size());
      for (size_t l = 0; l < b.lanes.size(); ++l) {
        EXPECT_EQ(b.lanes[l].begin, p.lanes[l].begin);
        EXPECT_EQ(b.lanes[l].end, p.lanes[l].end);
      }
    }
  }
}

// The automatic choice for AllToAllv never looks at this rank's counts.
TEST(BlockwiseChoice, AutomaticChoiceIgnoresThisRanksCounts) {
  for (int n : {2, 3, 4, 8})
    for (bool canRead : {false, true})
      for (bool mapped : {false, true}) {
        Counts counts(n, std::vector<size_t>(n, 16));
        for (int d = 0; d < n; ++d) counts[0][d] = 16u << 20;  // rank 0 sends 64 MiB to everyone
        for (int s = 0; s < n; ++s) counts[s][0] = 16u << 20;
        const char* want = canRead ? "blockwise" : "pairwise";
        for (int r = 0; r < n; ++r) {
          FakeEnv env(r, n, canRead, mapped);
          RankCall c = callOf(counts, r, 4);
          EXPECT_STREQ(collectives::chooseAlgorithm(c.req, env)->name, want) << n << " ranks, rank " << r;
          const std::string log = collectives::describeEstimates(c.req, env);
          EXPECT_TRUE(contains(log, canRead && mapped ? "bytes and more read" : "every block through the connection"))
              << log;
        }
      }
}

// ---- in real ranks ----

// The log level is read once per process, at its first line: set before
// anything so the ranks' choice and threshold lines can be checked.
const bool kInfoLogs = [] {
  setenv("GYRE_DEBUG", "INFO", 1);
  return true;
}();

constexpr unsigned char kFill = 0xA5;
constexpr size_t kGap = 3;     // elements left untouched before each block
constexpr size_t kGuard = 64;  // bytes after the last

// Where the buffers come from and what the tuner is told.
enum class Memory {
  Malloc,      // plain memory: reads go through the kernel
  MemAlloc,    // gyreMemAllocHost buffers, GYRE_MAPPED_BUFFERS unset
  Mapped,      // gyreMemAllocHost buffers and GYRE_MAPPED_BUFFERS=1
  FastReads,   // plain memory, a model in which kernel reads pay early
};

const char* memoryName(Memory m) {
  switch (m) {
    case Memory::Malloc: return "malloc";
    case Memory::MemAlloc: return "memalloc";
    case Memory::Mapped: return "mapped";
    case Memory::FastReads: return "fastreads";
  }
  return "?";
}

// A buffer from malloc or gyreMemAllocHost, filled with kFill.
class Buffer {
 public:
  Buffer(size_t bytes, bool memAlloc) : memAlloc_(memAlloc) {
    if (memAlloc_) {
      void* p = nullptr;
      if (gyreMemAllocHost(&p, bytes) != gyreSuccess) throw std::runtime_error(gyreGetLastError(nullptr));
      data_ = static_cast<unsigned char*>(p);
    } else {
      data_ = static_cast<unsigned char*>(std::malloc(bytes));
      if (!data_) throw std::runtime_error("malloc");
    }
    std::memset(data_, kFill, bytes);
  }
  ~Buffer() {
    if (memAlloc_) gyreMemFree(data_);
    else std::free(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  unsigned char* data() { return data_; }

 private:
  bool memAlloc_;
  unsigned char* data_ = nullptr;
};

bool untouched(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != kFill) return false;
  return true;
}

std::string modelFile() {
  static const std::string path = [] {
    std::string p = std::string(testing::TempDir()) + "/gyre-blockwise-" + std::to_string(getpid()) + ".model";
    std::ofstream(p) << "read.bandwidth_gbps = 50\nread.latency_us = 0.01\n";
    return p;
  }();
  return path;
}

// Sets up this rank's environment and communicator.
gyreComm_t startRank(int rank, int n, const gyreUniqueId& id, const char* transport, Memory memory,
                     const char* algo, int timeoutMs = 60000) {
  if (memory == Memory::Mapped) setenv("GYRE_MAPPED_BUFFERS", "1", 1);
  if (memory == Memory::FastReads) setenv("GYRE_TUNER_FILE", modelFile().c_str(), 1);
  if (algo) setenv("GYRE_ALGO", (std::string("alltoallv:") + algo).c_str(), 1);
  return initRank(rank, n, id, transport, timeoutMs);
}

// One AllToAllv in which rank s sends rank d count(s, d) elements, checked
// exactly: every block, the gaps between them, past the end, the input.
// Blocks lie in reverse rank order, kGap elements apart.
// sendGap and recvGap (elements before each block) move the displacements.
bool checkedAllToAllv(gyreComm_t comm, int me, int n, gyreDataType_t t, Memory memory,
                      const std::function<size_t(int, int)>& count, uint64_t salt, Checker& check,
                      size_t sendGap = kGap, size_t recvGap = kGap) {
  const size_t esz = dtypeBytes(t);
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t sendEnd = 0, recvEnd = 0;
  for (int k = n - 1; k >= 0; --k) {
    sc[k] = count(me, k);
    sd[k] = sendEnd + sendGap;
    sendEnd = sd[k] + sc[k];
    rc[k] = count(k, me);
    rd[k] = recvEnd + recvGap;
    recvEnd = rd[k] + rc[k];
  }
  const bool memAlloc = memory == Memory::MemAlloc || memory == Memory::Mapped;
  Buffer send(sendEnd * esz + kGuard, memAlloc), recv(recvEnd * esz + kGuard, memAlloc);
  for (int p = 0; p < n; ++p) fillPattern(send.data() + sd[p] * esz, sc[p], t, (salt * n + me) * n + p);
  const std::vector<unsigned char> saved(send.data(), send.data() + sendEnd * esz);
  std::string what = std::string("alltoallv ") + dtypeLabel(t) + " #" + std::to_string(salt) + " (sends";
  for (int p = 0; p < n; ++p) what += " " + std::to_string(sc[p]);
  what += ")";
  if (!check.expectOk(gyreAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), t, comm,
                                    nullptr),
                      what))
    return false;
  bool ok = true;
  for (int q = 0; q < n; ++q) {
    std::string bad;
    const size_t wrong = countPatternWrong(recv.data() + rd[q] * esz, rc[q], t, (salt * n + q) * n + me, &bad);
    ok &= check.expect(wrong == 0, what + ": block from rank " + std::to_string(q) + ": " + std::to_string(wrong) +
                                       " wrong; " + bad);
    ok &= check.expect(untouched(recv.data() + (rd[q] - recvGap) * esz, recvGap * esz),
                       what + ": wrote into the gap before block " + std::to_string(q));
  }
  ok &= check.expect(untouched(recv.data() + recvEnd * esz, kGuard), what + ": wrote past the end");
  ok &= check.expect(std::memcmp(saved.data(), send.data(), saved.size()) == 0, what + ": modified sendbuff");
  return ok;
}

struct Case {
  const char* transport;
  int nranks;
  Memory memory;
  const char* algo;  // nullptr: automatic
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.algo ? c.algo : "auto") << ", " << c.transport << ", " << c.nranks << " ranks, " << memoryName(c.memory);
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(c.algo ? c.algo : "auto") + "_" + c.transport + "_" + std::to_string(c.nranks) + "_" +
         memoryName(c.memory);
}

RunOutcome runCase(const Case& c, const std::function<int(gyreComm_t, int, int, Checker&)>& body) {
  RunOptions options;
  options.timeoutSec = 120;
  return runRanks(c.nranks,
                  [&](int rank, int n, const gyreUniqueId& id) {
                    Checker check(rank);
                    gyreComm_t comm = startRank(rank, n, id, c.transport, c.memory, c.algo);
                    if (!comm) return 1;
                    body(comm, rank, n, check);
                    check.expectOk(gyreCommDestroy(comm), "destroy");
                    return check.failures() ? 1 : 0;
                  },
                  options);
}

// Rank 0's log says which algorithm ran and what the threshold was.
void expectLogged(const Case& c, const RunOutcome& out) {
  if (out.ranks.empty()) return;
  const std::string& log = out.ranks[0].output;
  const bool reads = std::string(c.transport) == "shm";
  if (!c.algo) {
    EXPECT_TRUE(contains(log, reads ? ": blockwise (automatic" : ": pairwise (automatic")) << log;
  }
  // Blockwise ran (the automatic choice where peers can be read): its threshold.
  if (c.algo ? std::string(c.algo) == "blockwise" : reads) {
    // Reads pay from some size up where the model is told they are fast;
    // without reads, never.
    std::string want = "alltoallv blockwise on " + std::to_string(c.nranks) + " ranks: ";
    if (!reads) want = "every block passes through the connection";
    if (reads && (c.memory == Memory::Mapped || c.memory == Memory::FastReads))
      want = "bytes and more are read from the sender's buffer";
    EXPECT_TRUE(contains(log, want)) << log;
  }
}

class Imbalance : public testing::TestWithParam<Case> {};

// The reported failure: rank 0 sends every peer `big` elements, the others
// `small`, so each rank's own average block differs; with the choice made
// from it, rank 0 ran direct and the others pairwise, and the call failed.
TEST_P(Imbalance, RankDependentTotalsRunAndAreExact) {
  const Case c = GetParam();
  RunOutcome out = runCase(c, [&c](gyreComm_t comm, int me, int n, Checker& check) {
    const std::pair<size_t, size_t> shapes[] = {{4096, 256}, {65536, 16}, {16, 65536}, {300001, 0}, {0, 1000}};
    uint64_t salt = 0;
    for (auto [big, small] : shapes)
      for (int repeat = 0; repeat < 2; ++repeat) {
        auto count = [big = big, small = small](int s, int) { return s == 0 ? big : small; };
        if (!checkedAllToAllv(comm, me, n, gyreFloat32, c.memory, count, ++salt, check)) return 1;
      }
    return 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  expectLogged(c, out);
}

std::vector<Case> imbalanceCases() {
  std::vector<Case> cases;
  for (int n : {2, 3, 4})
    for (Memory m : {Memory::Malloc, Memory::MemAlloc, Memory::Mapped, Memory::FastReads})
      cases.push_back({"shm", n, m, nullptr});
  cases.push_back({"tcp", 3, Memory::Malloc, nullptr});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Auto, Imbalance, testing::ValuesIn(imbalanceCases()), caseName);

class MixedBlocks : public testing::TestWithParam<Case> {};

// Every pair of ranks sees blocks of every size in turn (empty ones, on
// both sides of the threshold, several pieces), in several dtypes; then
// calls that are all empty, and one in which rank 0 sends nothing but
// receives large blocks.
TEST_P(MixedBlocks, BlocksOnBothSidesOfTheThresholdInOneCall) {
  const Case c = GetParam();
  RunOutcome out = runCase(c, [&c](gyreComm_t comm, int me, int n, Checker& check) {
    const size_t sizes[] = {0, 1, 15, 16, 17, 511, 1023, 1024, 1025, 2047, 2048, 2049, 4096, 65537, 0, 200003};
    const size_t kinds = std::size(sizes);
    uint64_t salt = 0;
    for (gyreDataType_t t : {gyreFloat32, gyreInt8, gyreFloat64})
      for (size_t i = 0; i < kinds; ++i) {
        auto count = [&](int s, int d) { return sizes[(size_t(s) * 5 + size_t(d) * 3 + i) % kinds]; };
        if (!checkedAllToAllv(comm, me, n, t, c.memory, count, ++salt, check)) return 1;
      }
    auto none = [](int, int) { return size_t{0}; };
    auto zeroFromRank0 = [](int s, int) { return s == 0 ? size_t{0} : size_t{70000}; };
    for (int repeat = 0; repeat < 2; ++repeat) {
      if (!checkedAllToAllv(comm, me, n, gyreFloat32, c.memory, none, ++salt, check)) return 1;
      if (!checkedAllToAllv(comm, me, n, gyreFloat32, c.memory, zeroFromRank0, ++salt, check)) return 1;
    }
    return 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  expectLogged(c, out);
}

std::vector<Case> mixedCases() {
  std::vector<Case> cases;
  for (int n : {2, 3, 4})
    for (Memory m : {Memory::Mapped, Memory::FastReads}) cases.push_back({"shm", n, m, nullptr});
  cases.push_back({"shm", 3, Memory::Malloc, nullptr});
  cases.push_back({"shm", 3, Memory::Mapped, "blockwise"});
  cases.push_back({"tcp", 3, Memory::Malloc, "blockwise"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Calls, MixedBlocks, testing::ValuesIn(mixedCases()), caseName);

class PlanReuse : public testing::TestWithParam<Case> {};

// A call with the same four arrays as the last reuses its plan; one that
// differs anywhere (a displacement on either side, one count) must not.
TEST_P(PlanReuse, OnlyIdenticalArraysReuseThePlan) {
  const Case c = GetParam();
  RunOutcome out = runCase(c, [&c](gyreComm_t comm, int me, int n, Checker& check) {
    auto base = [](int s, int d) { return size_t(300 + 700 * s + 1100 * d); };
    auto oneMore = [](int s, int d) { return size_t(300 + 700 * s + 1100 * d) + (s == 1 && d == 0 ? 1 : 0); };
    struct Call {
      std::function<size_t(int, int)> count;
      size_t sendGap, recvGap;
    };
    const Call calls[] = {{base, 3, 3},    {base, 3, 3}, {base, 5, 3}, {base, 5, 3}, {base, 5, 0},
                          {oneMore, 5, 0}, {base, 5, 0}, {base, 3, 3}, {base, 3, 3}};
    uint64_t salt = 0;
    for (const Call& call : calls)
      if (!checkedAllToAllv(comm, me, n, gyreFloat32, c.memory, call.count, ++salt, check, call.sendGap,
                            call.recvGap))
        return 1;
    return 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

std::vector<Case> reuseCases() {
  return {{"shm", 2, Memory::Malloc, nullptr},
          {"shm", 3, Memory::Mapped, nullptr},
          {"shm", 4, Memory::FastReads, nullptr},
          {"tcp", 3, Memory::Malloc, nullptr}};
}

INSTANTIATE_TEST_SUITE_P(Calls, PlanReuse, testing::ValuesIn(reuseCases()), caseName);

// ---- counts that disagree ----

struct MismatchCase {
  const char* name;
  size_t sent;      // rank 1's sendcounts[0]
  size_t expected;  // rank 0's recvcounts[1]
};

struct MismatchParam {
  Case run;
  MismatchCase counts;
};

void PrintTo(const MismatchParam& p, std::ostream* os) {
  PrintTo(p.run, os);
  *os << ", " << p.counts.name;
}

class CountsMismatch : public testing::TestWithParam<MismatchParam> {};

// Rank 1 sends rank 0 a block of one size, rank 0 expects another; every
// other block agrees. The first error every rank sees (from that call, or
// from the next where its part of it was done before rank 0 objected) names
// both counts, within a hard bound and never as a timeout.
TEST_P(CountsMismatch, EveryRankGetsAnErrorNamingBothCounts) {
  const MismatchParam p = GetParam();
  RunOptions options;
  options.timeoutSec = 60;
  RunOutcome out = runRanks(
      p.run.nranks,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = startRank(rank, n, id, p.run.transport, p.run.memory, p.run.algo, 20000);
        if (!comm) return 1;
        // A clean call first.
        checkedAllToAllv(comm, rank, n, gyreFloat32, p.run.memory, [](int, int) { return size_t{100}; }, 1, check);
        std::vector<size_t> sc(n, 100), sd(n), rc(n, 100), rd(n);
        if (rank == 1) sc[0] = p.counts.sent;
        if (rank == 0) rc[1] = p.counts.expected;
        size_t so = 0, ro = 0;
        for (int q = 0; q < n; ++q) {
          sd[q] = so;
          so += sc[q];
          rd[q] = ro;
          ro += rc[q];
        }
        const bool memAlloc = p.run.memory == Memory::MemAlloc || p.run.memory == Memory::Mapped;
        Buffer send(so * 4 + kGuard, memAlloc), recv(ro * 4 + kGuard, memAlloc);
        gyreResult_t first = gyreAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                                           gyreFloat32, comm, nullptr);
        std::string msg = gyreGetLastError(comm), where = "the mismatched call";
        if (first == gyreSuccess) {
          float v[4] = {1, 2, 3, 4};
          first = gyreAllReduce(v, v, 4, gyreFloat32, gyreSum, comm, nullptr);
          msg = gyreGetLastError(comm);
          where = "the next call";
        }
        std::printf("rank %d: first error, from %s: %s: %s\n", rank, where.c_str(), gyreGetErrorString(first),
                    msg.c_str());
        check.expect(first != gyreSuccess, "no error from the mismatched call or the next one");
        check.expect(first != gyreTimeout, "a timeout, not a mismatch error: " + msg);
        const std::string names = "rank 1 sends rank 0 a block of " + std::to_string(p.counts.sent) + " x float32";
        const std::string expects = "rank 0's recvcounts[1] is " + std::to_string(p.counts.expected);
        check.expect(contains(msg, names) && contains(msg, expects),
                     "the error from " + where + " should say '" + names + "' and '" + expects + "': " + msg);
        gyreCommDestroy(comm);
        return check.failures() ? 1 : 0;
      },
      options);
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

std::vector<MismatchParam> mismatchParams() {
  // With mapped buffers the threshold is a few KiB: 16 elements pass
  // through the connection and 65536 are read.
  const MismatchCase bothSmall{"both_through_the_connection", 21, 20};
  const MismatchCase readVsSent{"sender_offers_a_read_receiver_expects_data", 65536, 16};
  const MismatchCase sentVsRead{"sender_sends_data_receiver_expects_a_read", 16, 65536};
  const MismatchCase bothRead{"both_read", 65536, 65537};
  // Two pieces against one of the same size: every piece the receiver
  // takes has the size it expects.
  const MismatchCase wholePieces{"a_whole_piece_more", 131072, 65536};
  std::vector<MismatchParam> ps;
  for (const MismatchCase& m : {bothSmall, readVsSent, sentVsRead, bothRead, wholePieces})
    ps.push_back({{"shm", 3, Memory::Mapped, nullptr}, m});
  for (const MismatchCase& m : {readVsSent, sentVsRead}) {
    ps.push_back({{"shm", 2, Memory::Mapped, nullptr}, m});
    ps.push_back({{"shm", 4, Memory::Mapped, nullptr}, m});
    ps.push_back({{"shm", 3, Memory::FastReads, nullptr}, m});
  }
  for (const MismatchCase& m : {bothSmall, wholePieces}) {
    ps.push_back({{"shm", 2, Memory::Malloc, nullptr}, m});
    ps.push_back({{"tcp", 3, Memory::Malloc, nullptr}, m});
  }
  ps.push_back({{"shm", 3, Memory::Malloc, "pairwise"}, wholePieces});
  ps.push_back({{"shm", 3, Memory::Malloc, "direct"}, bothSmall});
  return ps;
}

std::string mismatchName(const testing::TestParamInfo<MismatchParam>& info) {
  const Case& c = info.param.run;
  return std::string(info.param.counts.name) + "_" + (c.algo ? c.algo : "auto") + "_" + c.transport + "_" +
         std::to_string(c.nranks) + "_" + memoryName(c.memory);
}

INSTANTIATE_TEST_SUITE_P(Counts, CountsMismatch, testing::ValuesIn(mismatchParams()), mismatchName);

}  // namespace
}  // namespace gyre::test
