// gyreCommGrow: new processes join a running communicator's ranks through
// a join handle one of them made, the running ranks keeping their numbers;
// collectives on the larger communicator are exact, the old one still
// works; and a handle that is missing, differs between ranks, belongs to
// another communicator, or was spent already, is a named error on every
// rank at once, never a wait for the timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

gyreConfig_t configFor(const char* transport) {
  gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
  cfg.transport = transport;
  cfg.timeoutMs = 30000;
  return cfg;
}

// The handle's bytes from the rank that made it to each new process (what
// a job does out of band: a file, its launcher, a key-value store).
struct HandlePipe {
  int fd[2];
  HandlePipe() { EXPECT_EQ(pipe(fd), 0); }
  ~HandlePipe() {
    close(fd[0]);
    close(fd[1]);
  }
  void give(const gyreJoinHandle& h, int copies) {
    for (int i = 0; i < copies; ++i) EXPECT_EQ(write(fd[1], &h, sizeof h), static_cast<ssize_t>(sizeof h));
  }
  bool take(gyreJoinHandle* h) {
    size_t got = 0;
    while (got < sizeof *h) {
      const ssize_t n = read(fd[0], reinterpret_cast<char*>(h) + got, sizeof *h - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }
};

// On the grown communicator: its size, this rank's number, an AllReduce and
// an AllGather of the numbers, exact.
void checkGrown(Checker& check, gyreComm_t grown, int wantRank, int wantN) {
  int n = 0, me = -1;
  check.expectOk(gyreCommCount(grown, &n), "count");
  check.expectOk(gyreCommUserRank(grown, &me), "rank");
  check.expect(n == wantN && me == wantRank, "grown: rank " + std::to_string(me) + " of " + std::to_string(n) +
                                                 ", want " + std::to_string(wantRank) + " of " + std::to_string(wantN));
  std::vector<int32_t> v(5000, me + 1);
  check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt32, gyreSum, grown, nullptr), "allreduce");
  const int32_t sum = wantN * (wantN + 1) / 2;
  check.expect(v.front() == sum && v.back() == sum, "allreduce over the grown communicator: " +
                                                        std::to_string(v.front()) + ", want " + std::to_string(sum));
  std::vector<int32_t> all(static_cast<size_t>(wantN), -1);
  const int32_t mine = me;
  check.expectOk(gyreAllGather(&mine, all.data(), 1, gyreInt32, grown, nullptr), "allgather");
  for (int r = 0; r < wantN; ++r) check.expect(all[static_cast<size_t>(r)] == r, "allgather: ranks in order");
}

class Grow : public testing::TestWithParam<std::tuple<const char*, int, int>> {};

// `running` ranks make a communicator; rank 0 makes the handle; the others
// join as running..total-1; the running ranks pass the handle on rank 0 only.
TEST_P(Grow, NewProcessesJoinWithTheNextNumbers) {
  const char* transport = std::get<0>(GetParam());
  const int running = std::get<1>(GetParam()), total = std::get<2>(GetParam());
  HandlePipe handles;
  RunOptions o;
  o.timeoutSec = 90;
  RunOutcome out = runRanks(
      total,
      [&](int rank, int, const gyreUniqueId& id) {
        Checker check(rank);
        gyreConfig_t cfg = configFor(transport);
        if (rank >= running) {  // a new process: it knows only the handle
          gyreJoinHandle h;
          check.expect(handles.take(&h), "the handle");
          gyreComm_t grown = nullptr;
          check.expectOk(gyreCommGrow(nullptr, total, &h, rank, &grown, &cfg), "grow (joining)");
          if (grown) {
            checkGrown(check, grown, rank, total);
            check.expectOk(gyreCommDestroy(grown), "destroy");
          }
          return check.failures();
        }
        gyreComm_t comm = initRank(rank, running, id, transport, 30000);
        if (!comm) return 1;
        gyreJoinHandle h;
        if (rank == 0) {
          check.expectOk(gyreCommGetJoinHandle(comm, &h), "join handle");
          handles.give(h, total - running);
        }
        gyreComm_t grown = nullptr;
        check.expectOk(gyreCommGrow(comm, total, rank == 0 ? &h : nullptr, -1, &grown, nullptr), "grow");
        if (grown) {
          checkGrown(check, grown, rank, total);
          check.expectOk(gyreCommDestroy(grown), "destroy grown");
        }
        // The old communicator is untouched.
        int32_t x = 1;
        check.expectOk(gyreAllReduce(&x, &x, 1, gyreInt32, gyreSum, comm, nullptr), "allreduce on the old");
        check.expect(x == running, "the old communicator's sum");
        check.expectOk(gyreCommDestroy(comm), "destroy");
        return check.failures();
      },
      o);
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Sizes, Grow,
                         testing::Values(std::make_tuple("shm", 2, 4), std::make_tuple("tcp", 2, 4),
                                         std::make_tuple("shm", 1, 3), std::make_tuple("tcp", 3, 5)),
                         [](const auto& param) {
                           return std::string(std::get<0>(param.param)) + "_" +
                                  std::to_string(std::get<1>(param.param)) + "to" +
                                  std::to_string(std::get<2>(param.param));
                         });

// Every running rank fails alike, at once, with gyreInvalidUsage naming
// what is wrong; `setUp` gives each rank the handle it passes.
void expectRefusedOnEveryRank(const std::function<const gyreJoinHandle*(gyreComm_t, int rank, gyreJoinHandle&)>& setUp,
                              const std::function<int(int rank)>& newNranksOf, const std::string& want,
                              gyreResult_t code = gyreInvalidUsage) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", 30000);
    if (!comm) return 1;
    gyreJoinHandle storage;
    const gyreJoinHandle* h = setUp(comm, rank, storage);
    gyreComm_t grown = nullptr;
    const gyreResult_t r = gyreCommGrow(comm, newNranksOf(rank), h, -1, &grown, nullptr);
    const std::string msg = gyreGetLastError(comm);
    check.expect(r == code && grown == nullptr && contains(msg, want),
                 "grow gave " + std::to_string(r) + " (" + msg + "), want " + std::to_string(code) + " naming \"" +
                     want + "\"");
    // The communicator is still usable after the refusal.
    int32_t x = 1;
    check.expectOk(gyreAllReduce(&x, &x, 1, gyreInt32, gyreSum, comm, nullptr), "allreduce after");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(GrowRefuses, NoHandleOnAnyRank) {
  expectRefusedOnEveryRank([](gyreComm_t, int, gyreJoinHandle&) { return nullptr; }, [](int) { return 3; },
                           "no rank passed a join handle");
}

TEST(GrowRefuses, DifferentSizes) {
  expectRefusedOnEveryRank(
      [](gyreComm_t c, int rank, gyreJoinHandle& h) -> const gyreJoinHandle* {
        if (rank != 0) return nullptr;
        EXPECT_EQ(gyreCommGetJoinHandle(c, &h), gyreSuccess);
        return &h;
      },
      [](int rank) { return rank == 0 ? 3 : 4; }, "rank 0 for 3 ranks, rank 1 for 4");
}

TEST(GrowRefuses, ASizeThatDoesNotGrow) {
  expectRefusedOnEveryRank(
      [](gyreComm_t c, int rank, gyreJoinHandle& h) -> const gyreJoinHandle* {
        if (rank != 0) return nullptr;
        EXPECT_EQ(gyreCommGetJoinHandle(c, &h), gyreSuccess);
        return &h;
      },
      [](int) { return 2; }, "does not grow the communicator's 2 ranks", gyreInvalidArgument);
}

TEST(GrowRefuses, TwoDifferentHandles) {
  expectRefusedOnEveryRank(
      [](gyreComm_t c, int, gyreJoinHandle& h) -> const gyreJoinHandle* {
        EXPECT_EQ(gyreCommGetJoinHandle(c, &h), gyreSuccess);
        return &h;
      },
      [](int) { return 3; }, "ranks 0 and 1 passed different join handles");
}

// A handle of another communicator: here a split child's, made of the
// same processes (the case a job that grew or split meets).
TEST(GrowRefuses, AHandleOfAnotherCommunicator) {
  expectRefusedOnEveryRank(
      [](gyreComm_t c, int rank, gyreJoinHandle& h) -> const gyreJoinHandle* {
        gyreComm_t child = nullptr;
        EXPECT_EQ(gyreCommSplit(c, 0, rank, &child, nullptr), gyreSuccess);
        if (rank == 0) {
          EXPECT_EQ(gyreCommGetJoinHandle(child, &h), gyreSuccess);
        }
        EXPECT_EQ(gyreCommDestroy(child), gyreSuccess);
        return rank == 0 ? &h : nullptr;
      },
      [](int) { return 3; }, "was made by another communicator");
}

TEST(GrowRefuses, BytesThatAreNoHandle) {
  expectRefusedOnEveryRank(
      [](gyreComm_t, int rank, gyreJoinHandle& h) -> const gyreJoinHandle* {
        std::memset(&h, 0x5a, sizeof h);
        return rank == 1 ? &h : nullptr;
      },
      [](int) { return 3; }, "not a gyre join handle", gyreInvalidArgument);
}

// A handle used once is spent: the running ranks refuse it at once, and a
// new process that comes with it is told at once that its rendezvous is
// over (its root is gone), rather than waiting for the timeout.
TEST(GrowRefuses, AStaleHandleOnEveryRankAndOnTheNewProcess) {
  HandlePipe joiner, latecomer;
  RunOptions o;
  o.timeoutSec = 90;
  RunOutcome out = runRanks(
      4,
      [&](int rank, int, const gyreUniqueId& id) {
        Checker check(rank);
        gyreConfig_t cfg = configFor("shm");
        if (rank >= 2) {
          gyreJoinHandle h;
          check.expect((rank == 2 ? joiner : latecomer).take(&h), "the handle");
          gyreComm_t grown = nullptr;
          if (rank == 2) {  // joins the first grow
            check.expectOk(gyreCommGrow(nullptr, 3, &h, 2, &grown, &cfg), "grow (joining)");
            if (grown) check.expectOk(gyreCommDestroy(grown), "destroy");
          } else {  // comes later with the spent handle
            cfg.timeoutMs = 600000;  // would be a wait of 10 minutes, were the refusal not final
            const gyreResult_t r = gyreCommGrow(nullptr, 3, &h, 2, &grown, &cfg);
            const std::string msg = gyreGetLastError(nullptr);
            check.expect(r == gyreRemoteError && contains(msg, "its rendezvous is over"),
                         "a stale handle on a new process: " + std::to_string(r) + " (" + msg + ")");
          }
          return check.failures();
        }
        gyreComm_t comm = initRank(rank, 2, id, "shm", 30000);
        if (!comm) return 1;
        gyreJoinHandle h;
        if (rank == 0) {
          check.expectOk(gyreCommGetJoinHandle(comm, &h), "join handle");
          joiner.give(h, 1);
        }
        gyreComm_t grown = nullptr;
        check.expectOk(gyreCommGrow(comm, 3, rank == 0 ? &h : nullptr, -1, &grown, nullptr), "grow");
        if (grown) check.expectOk(gyreCommDestroy(grown), "destroy grown");
        if (rank == 0) latecomer.give(h, 1);  // after the grow
        // Again with the same handle: spent.
        const gyreResult_t r = gyreCommGrow(comm, 3, rank == 0 ? &h : nullptr, -1, &grown, nullptr);
        const std::string msg = gyreGetLastError(comm);
        check.expect(r == gyreInvalidUsage && contains(msg, "the join handle is stale"),
                     "a spent handle: " + std::to_string(r) + " (" + msg + ")");
        check.expectOk(gyreCommDestroy(comm), "destroy");
        return check.failures();
      },
      o);
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(GrowRefuses, ANewProcessWithANumberOfTheRunningRanksOrNone) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", 30000);
    if (!comm) return 1;
    if (rank == 0) {
      gyreJoinHandle h;
      check.expectOk(gyreCommGetJoinHandle(comm, &h), "join handle");
      gyreComm_t grown = nullptr;
      check.expect(gyreCommGrow(nullptr, 4, &h, 1, &grown, nullptr) == gyreInvalidArgument &&
                       contains(gyreGetLastError(nullptr), "takes one of 2..3"),
                   std::string("newRank 1: ") + gyreGetLastError(nullptr));
      check.expect(gyreCommGrow(nullptr, 4, &h, 4, &grown, nullptr) == gyreInvalidArgument, "newRank 4");
      check.expect(gyreCommGrow(nullptr, 4, nullptr, 2, &grown, nullptr) == gyreInvalidArgument, "no handle");
      check.expect(gyreCommGrow(comm, 4, &h, 0, &grown, nullptr) == gyreInvalidArgument &&
                       contains(gyreGetLastError(nullptr), "passes -1"),
                   std::string("a running rank's newRank: ") + gyreGetLastError(nullptr));
      check.expect(gyreCommGrow(comm, 4, &h, -1, nullptr, nullptr) == gyreInvalidArgument, "newcomm NULL");
      check.expect(gyreCommGetJoinHandle(comm, nullptr) == gyreInvalidArgument, "handle NULL");
      check.expect(gyreCommGetJoinHandle(nullptr, &h) == gyreInvalidArgument, "comm NULL");
    }
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
