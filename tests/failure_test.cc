// Failures and bad input: killed ranks, aborts, timeouts, mismatched calls
// and arguments. Each must end with an error naming the problem on every
// surviving rank, within a bound, and leave nothing in /dev/shm.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/exact_values.h"
#include "device/backend.h"
#include "tests/support/multiprocess.h"
#include "tests/support/shm_names.h"

namespace gyre::test {
namespace {

// The run's ranks' segments left behind (shm_names.h).
std::vector<std::string> segmentsLeftBy(const RunOutcome& out, const std::set<std::string>& before) {
  std::vector<pid_t> pids;
  for (const RankOutcome& r : out.ranks) pids.push_back(r.pid);
  return shmSegmentsOf(std::span<const pid_t>(pids), before);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- a rank killed with SIGKILL in the middle of AllReduce ----

int killedRankBody(int rank, int nranks, const gyreUniqueId& id, const char* transport,
                   int victim) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, nranks, id, transport, 30000);
  if (!comm) return 1;
  const size_t count = 4 << 20;  // 16 MiB of floats: each call takes a while
  std::vector<float> buf(count, 1.0f);
  std::atomic<bool> inCall{false};
  std::thread killer;
  if (rank == victim) {
    killer = std::thread([&] {
      while (!inCall.load()) {
      }
      kill(getpid(), SIGKILL);  // dies mid-operation, like a crashed worker
    });
  }
  auto start = std::chrono::steady_clock::now();
  gyreResult_t r = gyreSuccess;
  for (int i = 0; i < 1000 && r == gyreSuccess; ++i) {
    if (i == 2) inCall.store(true);
    r = gyreAllReduce(buf.data(), buf.data(), count, gyreFloat32, gyreSum, comm, nullptr);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string msg = gyreGetLastError(comm);
  check.expect(r == gyreRemoteError,
               std::string("expected a remote error, got ") + gyreGetErrorString(r) + ": " + msg);
  check.expect(contains(msg, "rank " + std::to_string(victim)),
               "the error names the dead rank: " + msg);
  check.expect(secs < 25,
               "the failure was detected before the 30 s timeout (" + std::to_string(secs) + " s)");
  gyreResult_t async = gyreSuccess;
  check.expectOk(gyreCommGetAsyncError(comm, &async), "async error query");
  check.expect(async == gyreRemoteError, "the communicator reports the remote error afterwards");
  gyreResult_t again =
      gyreAllReduce(buf.data(), buf.data(), 1, gyreFloat32, gyreSum, comm, nullptr);
  check.expect(again == gyreInvalidUsage, "a call on the failed communicator is refused");
  check.expectOk(gyreCommDestroy(comm), "destroy after failure");
  std::printf("rank %d: %s\n", rank, msg.c_str());
  return check.failures() ? 1 : 0;
}

class KilledRank : public testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(KilledRank, SurvivorsGetRemoteErrorNamingTheDeadRank) {
  const char* transport = std::get<0>(GetParam());
  const int nranks = std::get<1>(GetParam());
  const int victim = 1;
  RunOptions o;
  o.timeoutSec = 60;
  const std::set<std::string> before = shmNames();
  RunOutcome out = runRanks(
      nranks,
      [&](int r, int n, const gyreUniqueId& id) {
        return killedRankBody(r, n, id, transport, victim);
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    if (r.rank == victim)
      EXPECT_EQ(r.signal, SIGKILL) << out.describe();
    else
      EXPECT_EQ(r.exitCode, 0) << out.describe();
  }
  const std::vector<std::string> left = segmentsLeftBy(out, before);
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << left.front();
}

auto killedRankName = [](const auto& p) {
  return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
};
INSTANTIATE_TEST_SUITE_P(Transports, KilledRank,
                         testing::Combine(testing::Values(GYRE_TEST_TRANSPORTS), testing::Values(2, 3, 4)),
                         killedRankName);
#ifdef GYRE_HAVE_UCX
// Shared memory within two hosts and UCX between them (GYRE_NET_TRANSPORT):
// the victim, rank 1, alone on its host with 3 ranks, beside a peer with 4.
// Without UCX's error handling ("shm_ucx_none") only the bootstrap's watch
// connection to the victim (another host: no pidfd) sees it die.
INSTANTIATE_TEST_SUITE_P(Hosts, KilledRank,
                         testing::Combine(testing::Values("shm_ucx", "shm_ucx_none"), testing::Values(3, 4)),
                         killedRankName);
// UCX's two error modes (GYRE_UCX_ERROR_MODE): over tcp without UCX's error
// handling (a victim dies mid-rendezvous: its pieces go zero-copy), and
// with it.
INSTANTIATE_TEST_SUITE_P(UcxErrorModes, KilledRank,
                         testing::Combine(testing::Values("ucx_tcp", "ucx_peer"), testing::Values(2, 3)),
                         killedRankName);
#endif

// ---- clean runs leave nothing behind, and segments are unlinked at once ----

TEST(SharedMemory, NothingLeftInDevShmDuringOrAfterARun) {
  const std::set<std::string> before = shmNames();
  RunOutcome out = runRanks(3, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm");
    if (!comm) return 1;
    // Already unlinked while in use: a kill now would leak nothing.
    const pid_t me = getpid();
    for (const std::string& name : shmSegmentsOf(std::span<const pid_t>(&me, 1), {}))
      check.fail("segment still linked: " + name);
    std::vector<float> v(1000, 1.0f);
    check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr),
                   "allreduce");
    check.expect(v[0] == 3.0f, "result");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  EXPECT_TRUE(segmentsLeftBy(out, before).empty());
}

// ---- gyreCommAbort from another thread ends a blocked call ----

TEST(Abort, FromAnotherThreadEndsABlockedCall) {
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", 60000);
    if (!comm) return 1;
    if (rank == 1) {
      // Takes no part until rank 0 is done, so rank 0's call blocks.
      char b;
      check.expect(read(gate[0], &b, 1) == 1, "gate");
      gyreCommDestroy(comm);
      return check.failures();
    }
    std::vector<float> v(1 << 20, 1.0f);
    std::atomic<bool> started{false};
    std::thread aborter([&] {
      while (!started.load()) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the call block first
      check.expectOk(gyreCommAbort(comm), "abort");
    });
    started.store(true);
    gyreResult_t r =
        gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
    std::string msg = gyreGetLastError(nullptr);
    aborter.join();
    check.expect(r != gyreSuccess, "the blocked call returned an error");
    check.expect(contains(msg, "abort"), "the message says it was aborted: " + msg);
    check.expect(write(gate[1], "x", 1) == 1, "release rank 1");
    return check.failures();
  });
  close(gate[0]);
  close(gate[1]);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- gyreCommRevoke: the calls stop, the communicator stays ----

class Revoke : public testing::TestWithParam<const char*> {};

TEST_P(Revoke, FromAnotherThreadStopsTheCallsAndThePeersHearOfIt) {
  const char* transport = GetParam();
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport, 60000);
    if (!comm) return 1;
    std::vector<float> v(1 << 20, 1.0f);
    if (rank == 1) {
      // Takes no part until rank 0 has revoked, then calls: it must fail
      // at once, naming rank 0, not wait out the timeout.
      char b;
      check.expect(read(gate[0], &b, 1) == 1, "gate");
      const gyreResult_t r =
          gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
      const std::string msg = gyreGetLastError(comm);
      check.expect(r != gyreSuccess && r != gyreTimeout,
                   std::string("the peer's call: ") + gyreGetErrorString(r) + ": " + msg);
      check.expect(contains(msg, "rank 0") && contains(msg, "revoked"),
                   "the peer's error names the revoke: " + msg);
      check.expectOk(gyreCommDestroy(comm), "destroy");
      return check.failures();
    }
    // The revoke may come before the call starts or while it is blocked
    // (rank 1 is not there): either way the call ends, saying why.
    std::thread revoker([&] { check.expectOk(gyreCommRevoke(comm, GYRE_REVOKE_DEFAULT), "revoke"); });
    gyreResult_t r = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
    std::string msg = gyreGetLastError(comm);
    revoker.join();
    if (r == gyreSuccess) {  // the call cannot finish without rank 1; it never returns success
      check.expect(false, "the call succeeded without its peer");
    }
    check.expect(r == gyreInvalidUsage, std::string("revoked call: ") + gyreGetErrorString(r));
    check.expect(contains(msg, "revoked"), "the message says it was revoked: " + msg);
    // Quiescent: no error pending, and every later call fails by name.
    gyreResult_t async = gyreInternalError;
    check.expectOk(gyreCommGetAsyncError(comm, &async), "async error");
    check.expect(async == gyreSuccess,
                 std::string("a revoked communicator is quiescent: ") + gyreGetErrorString(async));
    r = gyreBroadcast(v.data(), v.data(), 4, gyreFloat32, 0, comm, nullptr);
    msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidUsage && contains(msg, "revoked"), "a later call: " + msg);
    check.expect(write(gate[1], "x", 1) == 1, "release rank 1");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  close(gate[0]);
  close(gate[1]);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, Revoke, testing::Values("shm", "tcp"));

TEST(RevokeArguments, BadFlagsAndANullCommunicatorAreNamed) {
  EXPECT_EQ(gyreCommRevoke(nullptr, GYRE_REVOKE_DEFAULT), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "comm is NULL")) << gyreGetLastError(nullptr);
  RunOutcome out = runRanks(1, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm");
    if (!comm) return 1;
    check.expect(gyreCommRevoke(comm, 7) == gyreInvalidArgument, "flags 7");
    check.expect(contains(gyreGetLastError(nullptr), "flags 7"), gyreGetLastError(nullptr));
    // The communicator is untouched by the refused revoke.
    float x = 1.0f;
    check.expectOk(gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, comm, nullptr), "allreduce");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- no progress within GYRE_TIMEOUT_MS ----

class Timeout : public testing::TestWithParam<const char*> {};

TEST_P(Timeout, ACallWithAMissingPeerTimesOut) {
  const char* transport = GetParam();
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport, 500);
    if (!comm) return 1;
    if (rank == 1) {
      char b;
      check.expect(read(gate[0], &b, 1) == 1, "gate");
      gyreCommDestroy(comm);
      return check.failures();
    }
    std::vector<float> v(1000, 1.0f);
    gyreResult_t r =
        gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
    std::string msg = gyreGetLastError(nullptr);
    check.expect(r == gyreTimeout, std::string("timeout expected, got ") + gyreGetErrorString(r));
    check.expect(contains(msg, "500 ms") && contains(msg, "rank 1"),
                 "message names the wait: " + msg);
    check.expect(write(gate[1], "x", 1) == 1, "release rank 1");
    gyreCommDestroy(comm);
    return check.failures();
  });
  close(gate[0]);
  close(gate[1]);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, Timeout, testing::Values(GYRE_TEST_TRANSPORTS));

// ---- mismatched calls are errors on every rank, not hangs ----

class Mismatch : public testing::TestWithParam<const char*> {};

TEST_P(Mismatch, DifferentCountsFailOnEveryRank) {
  const char* transport = GetParam();
  RunOutcome out = runRanks(3, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport, 20000);
    if (!comm) return 1;
    std::vector<float> v(300000, 1.0f);
    size_t count = rank == 1 ? 200000 : 300000;
    gyreResult_t r = gyreAllReduce(v.data(), v.data(), count, gyreFloat32, gyreSum, comm, nullptr);
    check.expect(r != gyreSuccess && r != gyreTimeout,
                 std::string("an error before the timeout, got ") + gyreGetErrorString(r) + ": " +
                     gyreGetLastError(nullptr));
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, Mismatch, testing::Values(GYRE_TEST_TRANSPORTS));

TEST(Mismatch, DifferentTransportSettingsAreRefusedAtInit) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
    cfg.transport = rank == 0 ? "tcp" : "auto";
    cfg.timeoutMs = 20000;
    gyreComm_t comm = nullptr;
    gyreResult_t r = gyreCommInitRankConfig(&comm, n, id, rank, &cfg);
    std::string msg = gyreGetLastError(nullptr);
    Checker check(rank);
    // Its own finding, or rank 0's report of the same one (which reaches a
    // rank still in the settings exchange first): the same code either way.
    check.expect(r == gyreInvalidUsage, std::string("invalid usage expected, got ") + gyreGetErrorString(r) + ": " + msg);
    check.expect(contains(msg, "GYRE_TRANSPORT"), "message names the setting: " + msg);
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(Mismatch, DifferentRankCountsAreRefusedAtRendezvous) {
  RunOutcome out = runRanks(2, [](int rank, int, const gyreUniqueId& id) {
    gyreComm_t comm = nullptr;
    gyreResult_t r = gyreCommInitRank(&comm, rank == 0 ? 2 : 3, id, rank);
    std::string msg = gyreGetLastError(nullptr);
    Checker check(rank);
    check.expect(r == gyreInvalidUsage,
                 std::string("invalid usage expected, got ") + gyreGetErrorString(r) + ": " + msg);
    check.expect(contains(msg, "nranks"), "message names nranks: " + msg);
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- bad arguments: invalid-argument with a message, communicator usable ----

int badArgumentsBody(int rank, int nranks, const gyreUniqueId& id) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, nranks, id);
  if (!comm) return 1;
  std::vector<float> a(100, 1.0f), b(100);
  auto expectInvalid = [&](gyreResult_t r, const char* what, const char* mentions) {
    std::string msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidArgument,
                 std::string(what) + ": expected invalid argument, got " + gyreGetErrorString(r));
    check.expect(contains(msg, mentions),
                 std::string(what) + ": message should mention '" + mentions + "': " + msg);
  };
  expectInvalid(gyreAllReduce(nullptr, b.data(), 100, gyreFloat32, gyreSum, comm, nullptr),
                "null sendbuff", "sendbuff");
  expectInvalid(gyreAllReduce(a.data(), nullptr, 100, gyreFloat32, gyreSum, comm, nullptr),
                "null recvbuff", "recvbuff");
  expectInvalid(gyreAllReduce(a.data(), b.data(), 100, static_cast<gyreDataType_t>(42), gyreSum,
                              comm, nullptr),
                "unknown dtype", "datatype 42");
  expectInvalid(gyreAllReduce(a.data(), b.data(), 100, gyreFloat32, static_cast<gyreRedOp_t>(-1),
                              comm, nullptr),
                "unknown op", "op -1");
  expectInvalid(
      gyreAllReduce(a.data(), b.data(), SIZE_MAX / 2, gyreFloat32, gyreSum, comm, nullptr),
      "count overflow", "overflow");
  expectInvalid(gyreAllReduce(a.data(), a.data() + 1, 50, gyreFloat32, gyreSum, comm, nullptr),
                "partial overlap", "overlap");
  // A stream on a host without a GPU (1 is GYRE_STREAM_LEGACY, which with
  // host memory is a host call, so another handle).
  if (!gyre::device::backend())
    expectInvalid(gyreAllReduce(a.data(), b.data(), 100, gyreFloat32, gyreSum, comm,
                                reinterpret_cast<gyreStream_t>(16)),
                "stream without CUDA", "no GPU to run on");
  expectInvalid(gyreAllReduce(a.data(), b.data(), 100, gyreFloat32, gyreSum, nullptr, nullptr),
                "null comm", "comm");
  int out = 0;
  expectInvalid(gyreCommCount(comm, nullptr), "null count pointer", "count");
  expectInvalid(gyreCommUserRank(nullptr, &out), "null comm for rank", "comm");
  // Zero elements with null buffers is allowed (nothing to touch).
  check.expectOk(gyreAllReduce(nullptr, nullptr, 0, gyreFloat32, gyreSum, comm, nullptr),
                 "count 0 with null buffers");
  // Still usable, still correct.
  gyreResult_t async = gyreInternalError;
  check.expectOk(gyreCommGetAsyncError(comm, &async), "async");
  check.expect(async == gyreSuccess, "bad arguments did not break the communicator");
  check.expectOk(gyreAllReduce(a.data(), b.data(), 100, gyreFloat32, gyreSum, comm, nullptr),
                 "valid call after bad ones");
  check.expect(b[99] == float(nranks), "valid call's result");
  check.expectOk(gyreCommDestroy(comm), "destroy");
  return check.failures();
}

TEST(BadArguments, AreInvalidArgumentAndLeaveTheCommunicatorUsable) {
  RunOutcome out = runRanks(2, badArgumentsBody);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(BadArguments, InitRejectsBadRanksCountsAndIds) {
  gyreUniqueId id;
  ASSERT_EQ(gyreGetUniqueId(&id), gyreSuccess);
  gyreComm_t comm = nullptr;
  EXPECT_EQ(gyreCommInitRank(&comm, 0, id, 0), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "nranks"));
  EXPECT_EQ(gyreCommInitRank(&comm, 2, id, 2), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "rank 2"));
  EXPECT_EQ(gyreCommInitRank(&comm, 2, id, -1), gyreInvalidArgument);
  EXPECT_EQ(gyreCommInitRank(nullptr, 2, id, 0), gyreInvalidArgument);
  gyreUniqueId garbage;
  std::memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_EQ(gyreCommInitRank(&comm, 1, garbage, 0), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "unique id"));
  gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
  cfg.magic = 0;
  EXPECT_EQ(gyreCommInitRankConfig(&comm, 1, id, 0, &cfg), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "GYRE_CONFIG_INITIALIZER"));
  cfg = GYRE_CONFIG_INITIALIZER;
  cfg.transport = "carrier-pigeon";
  EXPECT_EQ(gyreCommInitRankConfig(&comm, 1, id, 0, &cfg), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "carrier-pigeon"));
  EXPECT_EQ(comm, nullptr);
}

TEST(BadArguments, MalformedEnvironmentValuesAreNamed) {
  gyreUniqueId id;
  ASSERT_EQ(gyreGetUniqueId(&id), gyreSuccess);
  setenv("GYRE_TIMEOUT_MS", "soon", 1);
  gyreComm_t comm = nullptr;
  EXPECT_EQ(gyreCommInitRank(&comm, 1, id, 0), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "GYRE_TIMEOUT_MS=soon")) << gyreGetLastError(nullptr);
  unsetenv("GYRE_TIMEOUT_MS");
  EXPECT_EQ(comm, nullptr);
}

TEST(BadArguments, UnknownAlgorithmIsRefusedAtInitListingTheValidOnes) {
  gyreUniqueId id;
  ASSERT_EQ(gyreGetUniqueId(&id), gyreSuccess);
  gyreComm_t comm = nullptr;
  setenv("GYRE_ALGO", "quantum", 1);
  EXPECT_EQ(gyreCommInitRank(&comm, 1, id, 0), gyreInvalidArgument);
  std::string msg = gyreGetLastError(nullptr);
  EXPECT_TRUE(contains(msg, "quantum") && contains(msg, "ring") && contains(msg, "recursive_doubling")) << msg;
  setenv("GYRE_ALGO", "allreduce:ring@0-1K,bogus@1K-", 1);
  EXPECT_EQ(gyreCommInitRank(&comm, 1, id, 0), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "bogus")) << gyreGetLastError(nullptr);
  for (const char* empty : {"allreduce:ring@5-2", "allreduce:ring@64K-64K", "ring@1M-1K"}) {
    setenv("GYRE_ALGO", empty, 1);
    EXPECT_EQ(gyreCommInitRank(&comm, 1, id, 0), gyreInvalidArgument) << empty;
    EXPECT_TRUE(contains(gyreGetLastError(nullptr), "is empty")) << gyreGetLastError(nullptr);
  }
  setenv("GYRE_ALGO", "teleport:ring", 1);
  EXPECT_EQ(gyreCommInitRank(&comm, 1, id, 0), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "teleport")) << gyreGetLastError(nullptr);
  unsetenv("GYRE_ALGO");
  EXPECT_EQ(comm, nullptr);
}

class CallMismatch : public testing::TestWithParam<const char*> {};

TEST_P(CallMismatch, BothSidesAreNamedOnEveryRank) {
  const char* transport = GetParam();
  RunOutcome out = runRanks(3, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport, 20000);
    if (!comm) return 1;
    std::vector<float> v(1000, 1.0f);
    gyreResult_t r = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, rank == 1 ? gyreMax : gyreSum,
                                   comm, nullptr);
    std::string msg = gyreGetLastError(nullptr);
    check.expect(r != gyreSuccess && r != gyreTimeout, std::string("an error, got ") + gyreGetErrorString(r));
    check.expect(contains(msg, "max") && contains(msg, "sum") && contains(msg, "allreduce #1"),
                 "the message names both calls: " + msg);
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, CallMismatch, testing::Values(GYRE_TEST_TRANSPORTS));

TEST(Errors, EveryResultHasAString) {
  for (int r = 0; r < gyreNumResults; ++r)
    EXPECT_STRNE(gyreGetErrorString(static_cast<gyreResult_t>(r)), "unknown result code") << r;
  int v = 0;
  EXPECT_EQ(gyreGetVersion(&v), gyreSuccess);
  EXPECT_EQ(v, GYRE_VERSION_CODE);
}

}  // namespace
}  // namespace gyre::test
