// The connection manager (src/transport/connection_manager.h): which
// transport each peer gets, lazy connection through it, progress, the wait
// handle's slices, failure reports; with fake transports that record what
// they were asked, then once with real ranks whose settings leave a peer
// that no transport reaches.
#include "transport/connection_manager.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/support/multiprocess.h"
#ifdef GYRE_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

namespace gyre::test {
namespace {

using transport::Capabilities;
using transport::ConnectionManager;

class FakeTransport;

class FakeConnection : public transport::Connection {
 public:
  FakeConnection(FakeTransport& t, int peer, Capabilities caps) : Connection(caps), t_(t), peer_(peer) {}
  transport::Transport& transport() override;
  int peer() const override { return peer_; }
  size_t maxMessageBytes() const override { return 1024; }
  void* trySendBuffer(size_t) override { return nullptr; }
  void sendCommit(size_t, const transport::MessageTag&) override {}
  bool trySendFrom(const void*, size_t, const transport::MessageTag&) override { return false; }
  const void* tryRecvBuffer(size_t, const transport::MessageTag&) override { return nullptr; }
  void recvRelease(size_t) override {}
  bool tryRecvInto(void*, size_t, const transport::MessageTag&) override { return false; }
  transport::ProgressResult progress(transport::ReadAhead readAhead) override {
    (readAhead != transport::ReadAhead::None ? readAheads : progressed)++;
    return {readAhead != transport::ReadAhead::None ? movesReadingAhead : moves, blocked};
  }
  int progressed = 0, readAheads = 0;
  bool blocked = false, moves = false, movesReadingAhead = false;

 private:
  FakeTransport& t_;
  int peer_;
};

// Reaches the peers in `reach`; those in `connectedAtCreation` have a
// connection before anyone asks (as shared memory's).
class FakeTransport : public transport::Transport {
 public:
  FakeTransport(const char* name, Capabilities caps, std::set<int> reach, std::set<int> connectedAtCreation = {})
      : name_(name), caps_(caps), reach_(std::move(reach)) {
    for (int p : connectedAtCreation) make(p);
  }
  const char* name() const override { return name_; }
  Capabilities capabilities() const override { return caps_; }
  bool canConnect(int peer, std::string* whyNot) const override {
    if (reach_.count(peer)) return true;
    if (whyNot) *whyNot = "cannot reach rank " + std::to_string(peer);
    return false;
  }
  void connect(std::span<const int> peers, Deadline) override {
    connectCalls.emplace_back(peers.begin(), peers.end());
    for (int p : peers) make(p);
  }
  transport::Connection* connection(int peer) override {
    auto it = conns_.find(peer);
    return it == conns_.end() ? nullptr : it->second.get();
  }
  int64_t spinNs() const override { return 0; }
  bool block(int64_t timeoutNs, FunctionRef<bool()> ready) override {
    blockSlices.push_back(timeoutNs);
    return ready();
  }
  bool hasPendingOutput() const override { return pendingOutput; }
  void report(int origin, const std::string& sentence) override { reported.push_back(std::to_string(origin) + ":" + sentence); }
  void shutdown() override { ++shutdowns; }
  void interrupt() override { ++interrupts; }
  std::optional<transport::PeerReport> peerReport() const override { return pendingReport; }

  FakeConnection& fake(int peer) { return *conns_.at(peer); }
  std::vector<std::vector<int>> connectCalls;
  std::vector<int64_t> blockSlices;
  std::vector<std::string> reported;
  int shutdowns = 0, interrupts = 0;
  bool pendingOutput = false;
  std::optional<transport::PeerReport> pendingReport;

 private:
  void make(int p) { conns_[p] = std::make_unique<FakeConnection>(*this, p, caps_); }
  const char* name_;
  Capabilities caps_;
  std::set<int> reach_;
  std::map<int, std::unique_ptr<FakeConnection>> conns_;
};

transport::Transport& FakeConnection::transport() { return t_; }

constexpr Capabilities kShmLike = transport::kPeerRead | transport::kReportsFailures | transport::kSameHostOnly;
constexpr Capabilities kTcpLike = transport::kDirectIO | transport::kNeedsProgress;

const auto describe = [](int peer) { return "rank " + std::to_string(peer) + " (host x)"; };

// Rank 0 of 4: ranks 1 and 2 share its host, rank 3 does not.
struct Rank0Of4 {
  ConnectionManager m{0, 4};
  FakeTransport* shm;
  FakeTransport* tcp;
  explicit Rank0Of4(std::string shmDisabledBy = {}, std::string tcpDisabledBy = {}) {
    auto s = std::make_unique<FakeTransport>("shm", kShmLike, std::set<int>{1, 2}, std::set<int>{1, 2});
    auto t = std::make_unique<FakeTransport>("tcp", kTcpLike, std::set<int>{1, 2, 3});
    shm = s.get();
    tcp = t.get();
    // Registered lowest priority first: the order of registration is not
    // the order of choice.
    m.add(std::move(t), 10, std::move(tcpDisabledBy));
    m.add(std::move(s), 20, std::move(shmDisabledBy));
  }
};

TEST(ConnectionManager, TheHighestPriorityTransportThatCanConnectAPeerIsChosen) {
  Rank0Of4 s;
  s.m.choose(describe);
  EXPECT_EQ(&s.m.transportOf(1), s.shm);
  EXPECT_EQ(&s.m.transportOf(2), s.shm);
  EXPECT_EQ(&s.m.transportOf(3), s.tcp);
  EXPECT_EQ(s.m.describeChoices(), "shm to 2 peers, tcp to 1 peer");
  // Shared memory's connections exist from the start; TCP's only once asked.
  EXPECT_NE(s.m.connection(1), nullptr);
  EXPECT_EQ(s.m.connection(3), nullptr);
  EXPECT_FALSE(s.m.everyPeerCan(transport::kPeerRead));
  EXPECT_FALSE(s.m.everyPeerCan(transport::kReportsFailures));
}

TEST(ConnectionManager, ADisabledTransportIsNeverChosen) {
  Rank0Of4 s("GYRE_TRANSPORT=tcp");
  s.m.choose(describe);
  for (int p : {1, 2, 3}) EXPECT_EQ(&s.m.transportOf(p), s.tcp) << p;
  EXPECT_EQ(s.m.connection(1), nullptr);
  EXPECT_EQ(s.m.describeChoices(), "tcp to 3 peers");
  // Its failure reports are not read either.
  s.shm->pendingReport = transport::PeerReport{1, "stale"};
  EXPECT_FALSE(s.m.peerReport());
}

TEST(ConnectionManager, APeerNoTransportReachesIsAnErrorNamingItAndEveryReason) {
  Rank0Of4 s("", "GYRE_TRANSPORT=shm");
  try {
    s.m.choose(describe);
    FAIL() << "choose() accepted a peer no transport reaches";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), gyreInvalidArgument);
    EXPECT_STREQ(e.what(),
                 "no transport reaches rank 3 (host x) from rank 0 (shm: cannot reach rank 3; tcp: disabled by "
                 "GYRE_TRANSPORT=shm)");
  }
}

TEST(ConnectionManager, ConnectMakesOnlyMissingConnectionsEachThroughItsTransport) {
  Rank0Of4 s;
  s.m.choose(describe);
  const int peers[] = {0, 1, 2, 3};  // this rank and connected peers are skipped
  s.m.connect(peers, Deadline::never());
  EXPECT_TRUE(s.shm->connectCalls.empty());
  ASSERT_EQ(s.tcp->connectCalls.size(), 1u);
  EXPECT_EQ(s.tcp->connectCalls[0], std::vector<int>{3});
  EXPECT_EQ(s.m.connection(3), s.tcp->connection(3));
  s.m.connect(peers, Deadline::never());
  EXPECT_EQ(s.tcp->connectCalls.size(), 1u) << "connected twice";
}

TEST(ConnectionManager, ProgressMovesOutputAndReadsAheadEverywhereOnlyWhenASendIsStuck) {
  Rank0Of4 s("GYRE_TRANSPORT=tcp");
  s.m.choose(describe);
  const int peers[] = {1, 2, 3};
  s.m.connect(peers, Deadline::never());
  s.m.progress();
  for (int p : peers) {
    EXPECT_EQ(s.tcp->fake(p).progressed, 1) << p;
    EXPECT_EQ(s.tcp->fake(p).readAheads, 0) << p;
  }
  s.tcp->fake(2).blocked = true;
  s.m.progress();
  for (int p : peers) EXPECT_EQ(s.tcp->fake(p).readAheads, 1) << p;
}

// The waiter keeps its core while bytes move (Communicator::waitUntil), so
// progress says whether any connection moved some, in either pass.
TEST(ConnectionManager, ProgressSaysWhetherAnyConnectionMovedBytes) {
  Rank0Of4 s("GYRE_TRANSPORT=tcp");
  s.m.choose(describe);
  const int peers[] = {1, 2, 3};
  s.m.connect(peers, Deadline::never());
  EXPECT_FALSE(s.m.progress());
  s.tcp->fake(3).moves = true;
  EXPECT_TRUE(s.m.progress());
  s.tcp->fake(3).moves = false;
  s.tcp->fake(1).blocked = true;  // the read-ahead pass runs; only it moves bytes
  s.tcp->fake(2).movesReadingAhead = true;
  EXPECT_TRUE(s.m.progress());
  EXPECT_FALSE(s.m.progress(transport::ReadAhead::None)) << "no read-ahead pass was asked for";
}

TEST(ConnectionManager, TheWaitHandleCutsSlicesWhenAnotherTransportHasOutputToMove) {
  Rank0Of4 s;
  s.m.choose(describe);
  auto notReady = [] { return false; };
  constexpr int64_t kSlice = 10'000'000;
  s.m.block(*s.shm, false, kSlice, notReady);
  s.tcp->pendingOutput = true;
  s.m.block(*s.shm, false, kSlice, notReady);
  s.tcp->pendingOutput = false;
  s.m.block(*s.shm, true, kSlice, notReady);
  // Its own output never cuts a transport's slices.
  s.tcp->pendingOutput = true;
  s.m.block(*s.tcp, false, kSlice, notReady);
  EXPECT_EQ(s.shm->blockSlices, (std::vector<int64_t>{kSlice, 1'000'000, 1'000'000}));
  EXPECT_EQ(s.tcp->blockSlices, (std::vector<int64_t>{kSlice}));
}

TEST(ConnectionManager, FailuresAreReportedThenEveryTransportStops) {
  Rank0Of4 s;
  s.m.choose(describe);
  EXPECT_FALSE(s.m.peerReport());
  s.shm->pendingReport = transport::PeerReport{2, "rank 2 ran out of memory"};
  auto r = s.m.peerReport();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->origin, 2);
  EXPECT_EQ(r->message, "rank 2 ran out of memory");
  s.m.report(1, "mismatch");
  EXPECT_EQ(s.shm->reported, std::vector<std::string>{"1:mismatch"});
  s.m.shutdown();
  s.m.interrupt();
  EXPECT_EQ(s.shm->shutdowns + s.tcp->shutdowns, 2);
  EXPECT_EQ(s.shm->interrupts + s.tcp->interrupts, 2);
}

TEST(ConnectionManager, EveryPeerCanNeedsEveryPeersTransport) {
  ConnectionManager m(1, 3);
  m.add(std::make_unique<FakeTransport>("shm", kShmLike, std::set<int>{0, 2}, std::set<int>{0, 2}), 20);
  m.add(std::make_unique<FakeTransport>("tcp", kTcpLike, std::set<int>{0, 2}), 10);
  m.choose(describe);
  EXPECT_TRUE(m.everyPeerCan(transport::kPeerRead));
  EXPECT_FALSE(m.everyPeerCan(transport::kDirectIO));
  ConnectionManager alone(0, 1);
  alone.choose(describe);
  EXPECT_FALSE(alone.everyPeerCan(transport::kPeerRead)) << "no peers: nothing to read";
}

// n ranks, each after setUp(rank), sum rank + 1 with a plain AllReduce.
void expectSum(int n, const std::function<void(int)>& setUp, const std::string& over) {
  RunOutcome out = runRanks(n, [&](int rank, int nranks, const gyreUniqueId& id) {
    setUp(rank);
    Checker check(rank);
    gyreComm_t comm = initRank(rank, nranks, id);
    if (!comm) return 1;
    int v = rank + 1;
    check.expectOk(gyreAllReduce(&v, &v, 1, gyreInt32, gyreSum, comm, nullptr), "allreduce");
    check.expect(v == nranks * (nranks + 1) / 2, "the sum over " + over);
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// n ranks, each after setUp(rank), whose init must fail with a message
// holding `needle` (its own finding, or a peer's report of it that came
// first, unless code says which).
void expectInitFails(int n, const std::function<void(int)>& setUp, const std::string& needle,
                     gyreResult_t code = gyreSuccess) {
  RunOutcome out = runRanks(n, [&](int rank, int nranks, const gyreUniqueId& id) {
    setUp(rank);
    gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
    cfg.timeoutMs = 20000;
    gyreComm_t comm = nullptr;
    const gyreResult_t r = gyreCommInitRankConfig(&comm, nranks, id, rank, &cfg);
    const std::string msg = gyreGetLastError(nullptr);
    Checker check(rank);
    check.expect(code != gyreSuccess ? r == code : (r == gyreInvalidArgument || r == gyreRemoteError),
                 "init must fail so: " + msg);
    check.expect(msg.find(needle) != std::string::npos, "the message names it: " + msg);
    if (r == gyreSuccess) gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// The verbs exchange's size follows GYRE_IB_QPS_PER_CONNECTION, so ranks
// that differ must not start it: every rank's init fails naming the setting
// (checked before any transport is made, so no device is needed). An
// out-of-range value is refused by name.
TEST(ConnectionManager, QueuePairsPerConnectionMustAgreeAndBeInRange) {
  expectInitFails(
      3, [](int rank) { setenv("GYRE_IB_QPS_PER_CONNECTION", rank == 2 ? "4" : "1", 1); },
      "rank 2 was started with GYRE_IB_QPS_PER_CONNECTION=4 where rank 0 has 1", gyreInvalidUsage);
  expectInitFails(2, [](int) { setenv("GYRE_IB_QPS_PER_CONNECTION", "17", 1); }, "GYRE_IB_QPS_PER_CONNECTION");
}

// Real ranks: two "hosts" (GYRE_HOSTID) and GYRE_TRANSPORT=shm leave each
// rank a peer that shared memory cannot reach and TCP may not: every rank's
// init fails at once, naming a peer and the setting.
TEST(ConnectionManager, GyreTransportShmAcrossHostsFailsInitOnEveryRank) {
  expectInitFails(
      4,
      [](int rank) {
        setenv("GYRE_TRANSPORT", "shm", 1);
        setenv("GYRE_HOSTID", rank < 2 ? "host-a" : "host-b", 1);
      },
      "shm: not on this host; tcp: disabled by GYRE_TRANSPORT=shm");
}

#ifdef GYRE_HAVE_VERBS
// GYRE_TRANSPORT=verbs on a host without an RDMA device (most CI hosts):
// every rank's init fails at once, naming the setting and what was found,
// never waiting for a peer. (Where there is a device, the Soft-RoCE VM test
// checks the same for a GYRE_IB_HCA that matches nothing.)
TEST(ConnectionManager, GyreTransportVerbsWithoutADeviceFailsInitOnEveryRank) {
  int devices = 0;
  if (ibv_device** list = ibv_get_device_list(&devices)) ibv_free_device_list(list);
  if (devices > 0) GTEST_SKIP() << "this host has an RDMA device";
  auto forceVerbs = [](int) { setenv("GYRE_TRANSPORT", "verbs", 1); };
  expectInitFails(3, forceVerbs, "no RDMA device on this host (ibv_get_device_list found none");
  expectInitFails(2, forceVerbs, "tcp: disabled by GYRE_TRANSPORT=verbs");
}
#endif

#ifdef GYRE_HAVE_UCX
// GYRE_TRANSPORT=ucx asking UCX to report dead peers, with UCX_TLS naming
// only UCX's shared memory: UCX 1.13 makes no endpoint that reports a dead
// peer over it. The first call that connects fails on every rank, naming
// the settings, where it used to crash in the failure path (a connection
// that broke as it was made had no connection to look at).
TEST(ConnectionManager, UcxWithoutATransportThatReportsDeadPeersFailsOnEveryRank) {
  RunOutcome out = runRanks(2, [](int rank, int nranks, const gyreUniqueId& id) {
    setenv("GYRE_TRANSPORT", "ucx", 1);
    setenv("GYRE_UCX_ERROR_MODE", "peer", 1);
    setenv("UCX_TLS", "posix,self", 1);
    setenv("UCX_LOG_LEVEL", "fatal", 1);  // UCX's own line says less than ours
    Checker check(rank);
    gyreComm_t comm = nullptr;
    gyreResult_t r = gyreCommInitRank(&comm, nranks, id, rank);
    std::string msg = gyreGetLastError(nullptr);
    if (r == gyreSuccess) {
      int v = rank + 1;
      r = gyreAllReduce(&v, &v, 1, gyreInt32, gyreSum, comm, nullptr);
      msg = gyreGetLastError(comm);
      gyreCommDestroy(comm);
    }
    // Its own finding, or the peer's report of the same that came first.
    check.expect(r == gyreSystemError || r == gyreRemoteError, "the call must fail: " + msg);
    check.expect(msg.find("reports a dead peer (UCX_TLS=posix,self, GYRE_UCX_ERROR_MODE peer)") != std::string::npos,
                 "the message names the settings: " + msg);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Without UCX's error handling (GYRE_UCX_ERROR_MODE=none) UCX's shared
// memory alone serves: the ranks sum exactly, and a rank that dies is still
// named on every other (the bootstrap's watch of its process sees it, not
// UCX).
TEST(ConnectionManager, UcxOverItsSharedMemoryAloneWorksAndADeadRankIsNamed) {
  RunOutcome out = runRanks(3, [](int rank, int nranks, const gyreUniqueId& id) {
    setenv("GYRE_TRANSPORT", "ucx", 1);
    setenv("GYRE_UCX_ERROR_MODE", "none", 1);
    setenv("UCX_TLS", "posix,cma,self", 1);
    setenv("UCX_LOG_LEVEL", "fatal", 1);
    Checker check(rank);
    gyreComm_t comm = nullptr;
    check.expectOk(gyreCommInitRank(&comm, nranks, id, rank), "init");
    if (!comm) return check.failures();
    std::vector<int32_t> v(3 << 20, rank + 1);  // 12 MiB: large pieces too
    check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt32, gyreSum, comm, nullptr), "allreduce");
    size_t wrong = 0;
    for (int32_t x : v) wrong += x != 6;
    check.expect(wrong == 0, std::to_string(wrong) + " elements are not 1+2+3");
    std::vector<int32_t> a(3 * (1 << 18), rank), b(a.size(), -1);  // 1 MiB blocks
    check.expectOk(gyreAllToAll(a.data(), b.data(), 1 << 18, gyreInt32, comm, nullptr), "alltoall");
    for (int p = 0; p < nranks; ++p)
      check.expect(b[static_cast<size_t>(p) << 18] == p && b[((static_cast<size_t>(p) + 1) << 18) - 1] == p,
                   "block " + std::to_string(p) + " is rank " + std::to_string(p) + "'s");
    if (rank == 2) _exit(0);  // gone without a word, mid-job
    const gyreResult_t r = gyreAllReduce(v.data(), v.data(), v.size(), gyreInt32, gyreSum, comm, nullptr);
    const std::string msg = gyreGetLastError(comm);
    check.expect(r == gyreRemoteError, std::string("expected a remote error, got ") + gyreGetErrorString(r) + ": " + msg);
    check.expect(msg.find("rank 2") != std::string::npos, "the error names rank 2: " + msg);
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// UCX_TLS naming no tcp: gyre gives UCX's tcp its options only where UCX
// may open tcp. It used to set tcp's receive segment regardless, and every
// rank's UCX warned at start of an option no transport took.
TEST(ConnectionManager, UcxWithoutTcpIsNotGivenTcpsOptions) {
  RunOutcome out = runRanks(2, [](int rank, int nranks, const gyreUniqueId& id) {
    setenv("GYRE_TRANSPORT", "ucx", 1);
    setenv("GYRE_UCX_ERROR_MODE", "none", 1);
    setenv("UCX_TLS", "sm,self", 1);  // UCX's log level: its default, warn
    Checker check(rank);
    gyreComm_t comm = initRank(rank, nranks, id, "ucx");
    if (!comm) return 1;
    int v = rank + 1;
    check.expectOk(gyreAllReduce(&v, &v, 1, gyreInt32, gyreSum, comm, nullptr), "allreduce");
    check.expect(v == 3, "1 + 2");
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  // (Only that line: UCX may warn of other things on a loaded host.)
  for (const RankOutcome& r : out.ranks)
    EXPECT_EQ(r.output.find("invalid configuration"), std::string::npos) << "rank " << r.rank << " said:\n" << r.output;
}
#endif

#ifdef GYRE_HAVE_UCX
// GYRE_NET_TRANSPORT=ucx: shared memory within each host, UCX between the
// hosts (two GYRE_HOSTIDs), as NCCL's shared memory and NET: the sum is
// exact, and each peer is reached by the transport its host calls for.
TEST(ConnectionManager, NetTransportUcxCarriesOtherHostsAndSharedMemoryTheHost) {
  RunOutcome out = runRanks(4, [](int rank, int nranks, const gyreUniqueId& id) {
    setenv("GYRE_NET_TRANSPORT", "ucx", 1);
    setenv("GYRE_HOSTID", rank < 2 ? "host-a" : "host-b", 1);
    Checker check(rank);
    gyreComm_t comm = initRank(rank, nranks, id);
    if (!comm) return 1;
    std::vector<int> v(70000, rank + 1);  // past UCX's one-part messages, in pieces
    check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt32, gyreSum, comm, nullptr), "allreduce");
    check.expect(v.front() == 10 && v.back() == 10, "the sum over shm and ucx");
    // Connections are made at first use: an AllToAll reaches every peer.
    std::vector<int> to(4, rank), from(4, -1);
    check.expectOk(gyreAllToAll(to.data(), from.data(), 1, gyreInt32, comm, nullptr), "alltoall");
    check.expect(from == std::vector<int>{0, 1, 2, 3}, "every peer's block");
    for (int p = 0; p < nranks; ++p) {
      if (p == rank) continue;
      char name[16] = {};
      check.expectOk(gyreCommPeerTransport(comm, p, name, sizeof name), "peer transport");
      const char* want = (p < 2) == (rank < 2) ? "shm" : "ucx";
      check.expect(std::string(name) == want, "rank " + std::to_string(p) + " over " + name + ", not " + want);
    }
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}
#endif

// GYRE_NET_TRANSPORT chooses within GYRE_TRANSPORT=auto: beside a transport
// forced for every peer it is refused, naming both; ranks that differ are
// refused at init; an unknown one is named.
TEST(ConnectionManager, NetTransportIsRefusedBesideAForcedTransportAndMustAgree) {
  expectInitFails(
      2,
      [](int) {
        setenv("GYRE_TRANSPORT", "tcp", 1);
        setenv("GYRE_NET_TRANSPORT", "tcp", 1);
      },
      "GYRE_NET_TRANSPORT=tcp chooses what reaches other hosts under GYRE_TRANSPORT=auto; GYRE_TRANSPORT=tcp",
      gyreInvalidArgument);
  expectInitFails(
      3, [](int rank) { setenv("GYRE_NET_TRANSPORT", rank == 1 ? "tcp" : "auto", 1); },
      "rank 1 was started with GYRE_NET_TRANSPORT=tcp where rank 0 has auto", gyreInvalidUsage);
  expectInitFails(2, [](int) { setenv("GYRE_NET_TRANSPORT", "infiniband", 1); },
                  "GYRE_NET_TRANSPORT=infiniband is not one of auto, tcp, ucx, verbs", gyreInvalidArgument);
}

// GYRE_SHM_DISABLE=1 on one host: every peer over TCP, and the collective
// still exact. What shows the transport: the direct AllReduce, which reads
// peers' memory through shared memory, is refused with it and runs without.
TEST(ConnectionManager, ShmDisableSendsLocalPeersOverTcp) {
  for (const char* disable : {"1", "0"}) {
    RunOutcome out = runRanks(3, [&](int rank, int n, const gyreUniqueId& id) {
      setenv("GYRE_SHM_DISABLE", disable, 1);
      Checker check(rank);
      gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
      cfg.timeoutMs = 20000;
      cfg.algo = "allreduce:direct";
      gyreComm_t comm = nullptr;
      gyreResult_t r = gyreCommInitRankConfig(&comm, n, id, rank, &cfg);
      std::string msg = gyreGetLastError(nullptr);
      int v = rank + 1;
      if (r == gyreSuccess) {
        r = gyreAllReduce(&v, &v, 1, gyreInt32, gyreSum, comm, nullptr);
        msg = gyreGetLastError(comm);
        gyreCommDestroy(comm);
      }
      // Refused on the rank that planned it, and on the others as its
      // report reaches them (in their init or their call).
      if (disable[0] == '1')
        check.expect(r != gyreSuccess && msg.find("reads peers' buffers") != std::string::npos,
                     "the direct AllReduce ran without shared memory: " + msg);
      else
        check.expect(r == gyreSuccess && v == 6, "the direct AllReduce over shared memory: " + msg);
      return check.failures();
    });
    EXPECT_FALSE(out.timedOut) << disable << out.describe();
    EXPECT_TRUE(out.allSucceeded()) << disable << out.describe();
  }
  // And the default choice with shared memory off is right, over TCP.
  expectSum(3, [](int) { setenv("GYRE_SHM_DISABLE", "1", 1); }, "TCP");
}

// GYRE_TCP_DISABLE=1 with two host ids: the peers on the other host are
// unreachable, named, on every rank; one host alone still works.
TEST(ConnectionManager, TcpDisableLeavesOtherHostsUnreachableAndSaysSo) {
  expectInitFails(
      4,
      [](int rank) {
        setenv("GYRE_TCP_DISABLE", "1", 1);
        setenv("GYRE_HOSTID", rank < 2 ? "host-a" : "host-b", 1);
      },
      "tcp: disabled by GYRE_TCP_DISABLE=1");
  expectSum(2, [](int) { setenv("GYRE_TCP_DISABLE", "1", 1); }, "shared memory");
}

// Every rank fails with gyreInvalidUsage, also the ones that hear of the
// mismatch from a faster peer before they finish the settings exchange (the
// report carries the finding's code); four ranks make that common.
TEST(ConnectionManager, RanksThatDisableDifferentTransportsAreRefusedAtInit) {
  for (int n : {2, 4})
    expectInitFails(
        n, [n](int rank) { setenv("GYRE_SHM_DISABLE", rank == n - 1 ? "1" : "0", 1); }, "GYRE_SHM_DISABLE",
        gyreInvalidUsage);
}

}  // namespace
}  // namespace gyre::test
