// A randomized soak (issue 24, item 6; docs/reliability.md, "Soak"): from
// one seed every rank draws the same sequence of operations (AllReduce,
// Broadcast, Reduce, AllGather, ReduceScatter, AllToAll and a Send/Recv
// ring, every type and reduction, random counts and roots), each blocking,
// nonblocking (waited for later, a few at a time) or inside a group of a
// few, on the world or on a split's child, and checks every result exactly.
// GYRE_SOAK_OPS sets how many (CI's short form: 10000 over 4 ranks, per
// transport);
// GYRE_SOAK_SEED the seed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "tests/support/multiprocess.h"
#include "tests/support/random_ops.h"

namespace gyre::test {
namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

TEST(Soak, RandomOperationsOnFourRanksAreExact) {
  const int ops = envInt("GYRE_SOAK_OPS", 10000);
  const uint64_t seed = static_cast<uint64_t>(envInt("GYRE_SOAK_SEED", 1));
  for (const char* transport : {"shm", "tcp"}) {
    RunOptions o;
    o.timeoutSec = 600;
    RunOutcome out = runRanks(
        4,
        [&](int rank, int n, const gyreUniqueId& id) {
          Checker check(rank);
          gyreComm_t world = initRank(rank, n, id, transport, 60000);
          if (!world) return 1;
          gyreComm_t half = nullptr;  // ranks of the same parity
          check.expectOk(gyreCommSplit(world, rank % 2, rank, &half, nullptr), "split");
          const RandomOpsEnd end = runRandomOps(check, world, half, rank, n, ops, seed);
          if (end.failed != gyreSuccess)
            check.fail("a call failed after " + std::to_string(end.started) +
                       " operations started: " + gyreGetErrorString(end.failed) + ": " + end.error);
          const long wrongOps = end.wrongOps;
          if (rank == 0)
            std::printf("%d random operations over %s: %s\n", ops, transport,
                        wrongOps ? "wrong results" : "exact");
          check.expectOk(gyreCommDestroy(half), "destroy half");
          check.expectOk(gyreCommDestroy(world), "destroy");
          return check.failures();
        },
        o);
    EXPECT_FALSE(out.timedOut) << out.describe();
    EXPECT_TRUE(out.allSucceeded()) << transport << ": " << out.describe();
  }
}

}  // namespace
}  // namespace gyre::test
