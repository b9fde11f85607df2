// gyreCommShrink: a communicator of the survivors, after an explicit
// exclusion or a killed rank, checked with exact collectives on it; a
// failure during the shrink and bad input end in named errors, never a hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// On the shrunk communicator: its size and this rank's place (the
// survivors in the parent's order), then an AllReduce of the old ranks and
// an AllGather of them, both exact.
void checkChild(Checker& check, gyreComm_t child, int oldRank, const std::vector<int>& survivors) {
  int n = 0, me = -1;
  check.expectOk(gyreCommCount(child, &n), "count");
  check.expectOk(gyreCommUserRank(child, &me), "rank");
  const int want = static_cast<int>(std::find(survivors.begin(), survivors.end(), oldRank) - survivors.begin());
  check.expect(n == static_cast<int>(survivors.size()) && me == want,
               "shrunk to rank " + std::to_string(me) + " of " + std::to_string(n) + ", want " +
                   std::to_string(want) + " of " + std::to_string(survivors.size()));
  std::vector<int32_t> v(1000, oldRank);
  check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt32, gyreSum, child, nullptr), "allreduce");
  int32_t sum = 0;
  for (int r : survivors) sum += r;
  check.expect(v.front() == sum && v.back() == sum, "allreduce over the survivors: " + std::to_string(v.front()) +
                                                        ", want " + std::to_string(sum));
  std::vector<int32_t> all(survivors.size(), -1);
  const int32_t mine = oldRank;
  check.expectOk(gyreAllGather(&mine, all.data(), 1, gyreInt32, child, nullptr), "allgather");
  check.expect(std::equal(all.begin(), all.end(), survivors.begin()), "allgather: the survivors in order");
}

class ShrinkExcluding : public testing::TestWithParam<std::tuple<const char*, int>> {};

// Every rank but the excluded one calls it on a healthy communicator; the
// excluded rank goes on with its own work (here: it waits, then leaves).
TEST_P(ShrinkExcluding, TheOthersGetACommunicatorOfTheirOwn) {
  const char* transport = std::get<0>(GetParam());
  const int nranks = std::get<1>(GetParam());
  const int excluded = 1;
  std::vector<int> survivors;
  for (int r = 0; r < nranks; ++r)
    if (r != excluded) survivors.push_back(r);
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  RunOptions o;
  o.timeoutSec = 90;
  RunOutcome out = runRanks(
      nranks,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, transport, 30000);
        if (!comm) return 1;
        int32_t x = 1;
        check.expectOk(gyreAllReduce(&x, &x, 1, gyreInt32, gyreSum, comm, nullptr), "allreduce before");
        if (rank == excluded) {
          // Alive and holding its communicator while the others shrink
          // without it; it leaves once they are done.
          char b;
          for (int i = 0; i < n - 1; ++i) check.expect(read(done[0], &b, 1) == 1, "gate");
          check.expectOk(gyreCommDestroy(comm), "destroy");
          return check.failures();
        }
        gyreComm_t child = nullptr;
        check.expectOk(gyreCommShrink(comm, &excluded, 1, &child, nullptr, GYRE_SHRINK_DEFAULT), "shrink");
        if (child) {
          checkChild(check, child, rank, survivors);
          check.expectOk(gyreCommDestroy(child), "destroy child");
        }
        check.expect(write(done[1], "x", 1) == 1, "release the excluded rank");
        check.expectOk(gyreCommDestroy(comm), "destroy parent");
        return check.failures();
      },
      o);
  close(done[0]);
  close(done[1]);
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, ShrinkExcluding,
                         testing::Combine(testing::Values("shm", "tcp"), testing::Values(3, 5)),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) +
                                  "ranks";
                         });

class ShrinkAfterKill : public testing::TestWithParam<std::tuple<const char*, int>> {};

// A rank is SIGKILLed mid-AllReduce; the survivors get the named error,
// shrink with GYRE_SHRINK_ABORT and nothing excluded, and go on.
TEST_P(ShrinkAfterKill, TheSurvivorsAgreeAndGoOn) {
  const char* transport = std::get<0>(GetParam());
  const int nranks = std::get<1>(GetParam());
  const int victim = nranks / 2;
  std::vector<int> survivors;
  for (int r = 0; r < nranks; ++r)
    if (r != victim) survivors.push_back(r);
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      nranks,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, transport, 30000);
        if (!comm) return 1;
        std::vector<float> buf(1 << 16, 1.0f);
        std::atomic<bool> inCall{false};
        std::thread killer;
        if (rank == victim)
          killer = std::thread([&] {
            while (!inCall.load()) {
            }
            kill(getpid(), SIGKILL);
          });
        gyreResult_t r = gyreSuccess;
        for (int i = 0; i < 100000 && r == gyreSuccess; ++i) {
          if (i == 2) inCall.store(true);
          r = gyreAllReduce(buf.data(), buf.data(), buf.size(), gyreFloat32, gyreSum, comm, nullptr);
        }
        check.expect(r == gyreRemoteError, std::string("the kill: ") + gyreGetErrorString(r));
        gyreComm_t child = nullptr;
        check.expectOk(gyreCommShrink(comm, nullptr, 0, &child, nullptr, GYRE_SHRINK_ABORT), "shrink");
        if (child) {
          checkChild(check, child, rank, survivors);
          check.expectOk(gyreCommDestroy(child), "destroy child");
        }
        check.expectOk(gyreCommDestroy(comm), "destroy parent");
        return check.failures();
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    if (r.rank == victim)
      EXPECT_EQ(r.signal, SIGKILL) << out.describe();
    else
      EXPECT_EQ(r.exitCode, 0) << out.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ShrinkAfterKill,
                         testing::Combine(testing::Values("shm", "tcp"), testing::Values(3, 4, 8)),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) +
                                  "ranks";
                         });

// A second rank dies at some moment of the survivors' shrink: each of the
// others ends with a named error or with a communicator that works, never
// a hang, and those that got one agree on it.
TEST(ShrinkSecondFailure, EndsInAnErrorOrAWorkingCommunicatorNeverAHang) {
  const int nranks = 5, first = 1, second = 3;
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      nranks,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, "tcp", 10000);
        if (!comm) return 1;
        if (rank == first) kill(getpid(), SIGKILL);
        float x = 1.0f;
        const gyreResult_t r = gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, comm, nullptr);
        check.expect(r == gyreRemoteError, std::string("the first kill: ") + gyreGetErrorString(r));
        std::thread killer;
        if (rank == second) killer = std::thread([] { kill(getpid(), SIGKILL); });
        gyreComm_t child = nullptr;
        const gyreResult_t s = gyreCommShrink(comm, nullptr, 0, &child, nullptr, GYRE_SHRINK_ABORT);
        const std::string msg = gyreGetLastError(comm);
        std::printf("rank %d: shrink: %s: %s\n", rank, gyreGetErrorString(s), msg.c_str());
        if (s == gyreSuccess) {
          // Whoever got a communicator can use it with the others who did.
          int size = 0;
          gyreCommCount(child, &size);
          check.expect(size == 3 || size == 4, "survivors " + std::to_string(size));
          if (size == 3) checkChild(check, child, rank, {0, 2, 4});
          gyreCommDestroy(child);
        } else {
          check.expect(s != gyreTimeout || contains(msg, "GYRE_TIMEOUT_MS"), "a named error: " + msg);
          check.expect(!msg.empty(), "the error says why");
        }
        gyreCommDestroy(comm);
        return check.failures();
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    if (r.rank != first && r.rank != second) {
      EXPECT_EQ(r.exitCode, 0) << out.describe();
    }
  }
}

TEST(ShrinkArguments, BadInputIsNamed) {
  RunOutcome out = runRanks(3, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", 10000);
    if (!comm) return 1;
    gyreComm_t child = nullptr;
    auto refused = [&](gyreResult_t r, const std::string& says, const char* what) {
      const std::string msg = gyreGetLastError(nullptr);
      check.expect(r == gyreInvalidArgument && contains(msg, says), std::string(what) + ": " + msg);
    };
    const int self = rank, outside = 7, other = (rank + 1) % n;
    refused(gyreCommShrink(comm, &self, 1, &child, nullptr, 0), "is this rank", "excluding oneself");
    refused(gyreCommShrink(comm, &outside, 1, &child, nullptr, 0), "not a rank", "a rank outside");
    refused(gyreCommShrink(comm, &other, -1, &child, nullptr, 0), "negative", "a negative count");
    refused(gyreCommShrink(comm, nullptr, 1, &child, nullptr, 0), "excludeRanks is NULL", "NULL list");
    refused(gyreCommShrink(comm, nullptr, 0, &child, nullptr, 9), "flags 9", "flags");
    refused(gyreCommShrink(comm, nullptr, 0, nullptr, nullptr, 0), "newcomm is NULL", "NULL newcomm");
    // None of those touched the communicator.
    float x = 1.0f;
    check.expectOk(gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, comm, nullptr), "allreduce after");
    check.expect(x == 3.0f, "allreduce result");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Ranks 0 and 1 exclude nobody, rank 2 excludes rank 0: every rank fails
// (none forms a communicator), the ones that meet naming both lists.
TEST(ShrinkArguments, ListsThatDifferBetweenRanksFailByName) {
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      3,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, "tcp", 5000);
        if (!comm) return 1;
        const int zero = 0;
        gyreComm_t child = nullptr;
        const gyreResult_t r =
            gyreCommShrink(comm, &zero, rank == 2 ? 1 : 0, &child, nullptr, GYRE_SHRINK_DEFAULT);
        const std::string msg = gyreGetLastError(comm);
        std::printf("rank %d: %s: %s\n", rank, gyreGetErrorString(r), msg.c_str());
        check.expect(r != gyreSuccess, "the shrink succeeded");
        if (rank != 0)
          check.expect(contains(msg, "exclude different ranks") || contains(msg, "rank"), "named: " + msg);
        if (child) gyreCommDestroy(child);
        gyreCommDestroy(comm);
        return check.failures();
      },
      o);
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
