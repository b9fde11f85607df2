// Asynchronous model averaging (gyreAverager*): a background thread keeps
// averaging while the caller updates its model under the lock and makes
// its own calls on its communicator; after a barrier and the stop, every
// rank holds the same bits, the average of what the ranks ended with (up to
// the rounding of the rounds in between). A rank that leaves without
// stopping makes the others' stop fail by name instead of hanging; bad
// arguments are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

TEST(Averager, RanksEndWithTheSameAverageOfTheirUpdates) {
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(3, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm");
    if (!comm) return 1;
    constexpr size_t kCount = 20000;
    std::vector<float> model(kCount, static_cast<float>(rank));
    gyreAverager_t a = nullptr;
    if (!check.expectOk(gyreAveragerStart(&a, comm, model.data(), kCount, gyreFloat32, 0), "start")) return 1;
    // The caller's work: updates under the lock, and its own collectives
    // on comm beside the averager's.
    for (int step = 0; step < 30; ++step) {
      if (!check.expectOk(gyreAveragerLock(a), "lock")) break;
      for (size_t i = 0; i < kCount; ++i) model[i] += rank == 0 ? 1.0f : 0.0f;
      check.expectOk(gyreAveragerUnlock(a), "unlock");
      int mine = step, sum = 0;
      check.expectOk(gyreAllReduce(&mine, &sum, 1, gyreInt32, gyreSum, comm, nullptr), "the caller's allreduce");
      check.expect(sum == n * step, "the caller's allreduce result");
    }
    check.expectOk(gyreBarrier(comm, nullptr), "barrier");  // every update made, on every rank
    uint64_t rounds = 0;
    check.expectOk(gyreAveragerStop(a, &rounds), "stop");
    check.expect(rounds >= 1, "at least the stopping round ran");
    // The same bits everywhere.
    std::vector<float> all(kCount * n);
    check.expectOk(gyreAllGather(model.data(), all.data(), kCount, gyreFloat32, comm, nullptr), "allgather");
    for (int r = 0; r < n; ++r)
      check.expect(std::memcmp(all.data() + r * kCount, model.data(), kCount * sizeof(float)) == 0,
                   "rank " + std::to_string(r) + "'s model differs");
    // The average of the ranks' starts (0, 1, 2) and rank 0's 30 updates.
    const float want = (0.0f + 1.0f + 2.0f + 30.0f) / 3.0f;
    check.expect(std::fabs(model[0] - want) < 1e-3f * want, "model is " + std::to_string(model[0]) +
                                                                 ", expected about " + std::to_string(want));
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures() ? 1 : 0;
  }, o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(Averager, ARankThatLeavesWithoutStoppingFailsTheOthersStop) {
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(3, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "tcp", 20000);
    if (!comm) return 1;
    std::vector<float> model(1000, 1.0f);
    gyreAverager_t a = nullptr;
    if (!check.expectOk(gyreAveragerStart(&a, comm, model.data(), model.size(), gyreFloat32, 1), "start")) return 1;
    if (rank == 2) std::_Exit(0);  // gone, its averager with it
    // The others learn that it is gone on comm (the barrier fails naming
    // it), so their stop comes after: no round with rank 2 can end it.
    check.expect(gyreBarrier(comm, nullptr) != gyreSuccess, "the barrier without rank 2 fails");
    const gyreResult_t r = gyreAveragerStop(a, nullptr);
    const std::string msg = gyreGetLastError(nullptr);
    check.expect(r == gyreRemoteError && msg.find("averager failed") != std::string::npos,
                 "stop after a rank left: " + std::to_string(r) + " " + msg);
    gyreCommAbort(comm);
    return check.failures() ? 1 : 0;
  }, o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(Averager, BadArgumentsAreRefused) {
  RunOutcome out = runRanks(1, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm");
    if (!comm) return 1;
    std::vector<float> model(10);
    gyreAverager_t a = nullptr;
    check.expect(gyreAveragerStart(&a, comm, model.data(), 10, gyreFloat16, 0) == gyreInvalidArgument, "float16");
    check.expect(gyreAveragerStart(nullptr, comm, model.data(), 10, gyreFloat32, 0) == gyreInvalidArgument, "NULL out");
    check.expect(gyreAveragerStart(&a, comm, nullptr, 10, gyreFloat32, 0) == gyreInvalidArgument, "NULL model");
    check.expect(gyreAveragerLock(nullptr) == gyreInvalidArgument, "lock NULL");
    check.expect(gyreAveragerStop(nullptr, nullptr) == gyreInvalidArgument, "stop NULL");
    // One rank: the rounds average with itself (a long interval, which the
    // stop cuts short), and the stop is clean. The lock pairs on a thread.
    check.expectOk(gyreAveragerStart(&a, comm, model.data(), 10, gyreFloat32, 600000), "start");
    check.expect(gyreAveragerUnlock(a) == gyreInvalidUsage, "unlock without the lock");
    check.expectOk(gyreAveragerLock(a), "lock");
    check.expect(gyreAveragerLock(a) == gyreInvalidUsage, "lock twice");
    check.expect(gyreAveragerStop(a, nullptr) == gyreInvalidUsage, "stop holding the lock");
    check.expectOk(gyreAveragerUnlock(a), "unlock");
    check.expectOk(gyreAveragerStop(a, nullptr), "stop");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures() ? 1 : 0;
  });
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
