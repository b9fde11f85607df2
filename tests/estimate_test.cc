// gyreEstimate in real rank processes: the tuner's own choice, its plans
// simulated on hosts like the communicator's (gyre-sim's model), for the
// communicator's size, a split's child's estimate before the split
// (a group that does not exist yet), values that grow with the call, and
// bad arguments refused with a sentence naming them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "collectives/tuner.h"
#include "core/api_support.h"
#include "sim/estimate.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

const gyreCall_t kCalls[] = {gyreCallAllReduce, gyreCallBroadcast,     gyreCallReduce,
                             gyreCallAllGather, gyreCallReduceScatter, gyreCallAllToAll};
const collectives::OpKind kOps[] = {
    collectives::OpKind::AllReduce,     collectives::OpKind::Broadcast,
    collectives::OpKind::Reduce,        collectives::OpKind::AllGather,
    collectives::OpKind::ReduceScatter, collectives::OpKind::AllToAll};

double estimate(gyreCall_t call, size_t count, int nranks, gyreComm_t comm, Checker& check) {
  double us = -1;
  check.expectOk(gyreEstimate(call, count, gyreFloat32, nranks, comm, &us), "gyreEstimate");
  return us;
}

TEST(Estimate, IsTheTunersChoiceGrowsWithTheCallAndForeseesASplit) {
  RunOutcome out = runRanks(4, [](int r, int n, const gyreUniqueId& id) {
    Checker check(r);
    gyreComm_t comm = initRank(r, n, id, "shm");
    if (!comm) return 1;
    for (int i = 0; i < 6; ++i) {
      const std::string name = collectives::opKindName(kOps[i]);
      double previous = 0;
      for (size_t count = 1; count <= (size_t{16} << 20); count *= 8) {
        const double us = estimate(kCalls[i], count, 0, comm, check);
        check.expect(us > 0, name + ": positive at count " + std::to_string(count));
        check.expect(us >= previous, name + ": no smaller at count " + std::to_string(count));
        previous = us;
        check.expect(estimate(kCalls[i], count, n, comm, check) == us,
                     name + ": nranks 0 means comm's own");
        // The tuner's choice for this very call, its plans simulated on
        // hosts like comm's: what gyre-sim would say of it.
        collectives::CallRequest req;
        req.desc.kind = kOps[i];
        req.desc.count = count;
        req.elemSize = 4;
        const collectives::Algorithm* chosen = collectives::chooseAlgorithm(req, *comm->impl);
        const double simulated = 1e6 * sim::estimateSeconds(comm->impl->tuning(), kOps[i], count, 4, n,
                                                            comm->impl->canReadPeerMemory(), chosen->name);
        check.expect(us == simulated, name + ": the tuner's choice simulated at count " + std::to_string(count) +
                                          ": " + std::to_string(us) + " us, gyre-sim says " +
                                          std::to_string(simulated));
        check.expect(estimate(kCalls[i], count, 1, comm, check) == 0,
                     name + ": one rank sends nothing");
      }
      check.expect(estimate(kCalls[i], 1 << 20, 64, comm, check) >
                       estimate(kCalls[i], 1 << 20, 0, comm, check),
                   name + ": 64 ranks on 16 hosts like this one take longer than 4 on one");
    }
    // A pair's estimate before the split is the pair's own after it.
    double before[6];
    for (int i = 0; i < 6; ++i) before[i] = estimate(kCalls[i], 1 << 16, 2, comm, check);
    gyreComm_t pair = nullptr;
    if (check.expectOk(gyreCommSplit(comm, r / 2, r, &pair, nullptr), "split")) {
      for (int i = 0; i < 6; ++i)
        check.expect(
            estimate(kCalls[i], 1 << 16, 0, pair, check) == before[i],
            std::string(collectives::opKindName(kOps[i])) + ": the pair's estimate foreseen");
      gyreCommDestroy(pair);
    }
    gyreCommDestroy(comm);
    return check.failures();
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
}

// gyreGroupSimulateEnd: the group's calls priced by the same model and
// not run; a nonblocking call in it completes as not run.
TEST(Estimate, ASimulatedGroupIsPricedAndNotRun) {
  RunOutcome out = runRanks(3, [](int r, int n, const gyreUniqueId& id) {
    Checker check(r);
    gyreComm_t comm = initRank(r, n, id, "shm");
    if (!comm) return 1;
    const size_t count = 1 << 16;
    std::vector<float> a(count, 1.0f), b(count, 1.0f);
    double one = 0, sim = -1;
    check.expectOk(gyreEstimate(gyreCallAllReduce, count, gyreFloat32, 0, comm, &one), "estimate");
    check.expectOk(gyreGroupStart(), "group start");
    check.expectOk(gyreAllReduce(a.data(), a.data(), count, gyreFloat32, gyreSum, comm, nullptr), "allreduce a");
    gyreRequest_t req = nullptr;
    check.expectOk(gyreIallReduce(b.data(), b.data(), count, gyreFloat32, gyreSum, comm, &req), "iallreduce b");
    check.expectOk(gyreGroupSimulateEnd(&sim), "simulate");
    check.expect(sim == 2 * one, "two AllReduces: " + std::to_string(sim) + " us, one is " + std::to_string(one));
    check.expect(a[0] == 1.0f && b[count - 1] == 1.0f, "a simulated call ran");
    check.expect(gyreWait(req) == gyreInvalidUsage, "the nonblocking call completes as not run");
    // Nested: the inner end answers 0, the outer the whole group.
    check.expectOk(gyreGroupStart(), "outer");
    check.expectOk(gyreGroupStart(), "inner");
    check.expectOk(gyreAllReduce(a.data(), a.data(), count, gyreFloat32, gyreSum, comm, nullptr), "allreduce");
    check.expectOk(gyreGroupSimulateEnd(&sim), "inner end");
    check.expect(sim == 0, "the inner end: " + std::to_string(sim));
    check.expectOk(gyreGroupSimulateEnd(&sim), "outer end");
    check.expect(sim == one, "the outer end: " + std::to_string(sim));
    check.expect(gyreGroupSimulateEnd(&sim) == gyreInvalidUsage, "no group to end");
    check.expectOk(gyreGroupStart(), "start");
    check.expect(gyreGroupSimulateEnd(nullptr) == gyreInvalidArgument, "NULL answer");
    // The communicator is as it was: a real call runs.
    check.expectOk(gyreAllReduce(a.data(), a.data(), count, gyreFloat32, gyreSum, comm, nullptr), "allreduce");
    check.expect(a[0] == static_cast<float>(n), "after the simulations");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(Estimate, BadArgumentsAreRefusedNamingThem) {
  RunOutcome out = runRanks(2, [](int r, int n, const gyreUniqueId& id) {
    Checker check(r);
    gyreComm_t comm = initRank(r, n, id);
    if (!comm) return 1;
    double us = 0;
    auto refused = [&](gyreResult_t got, const char* words, const std::string& what) {
      const std::string said = gyreGetLastError(nullptr);
      check.expect(got == gyreInvalidArgument, what + ": refused (" + std::to_string(got) + ")");
      check.expect(said.find(words) != std::string::npos, what + ": says '" + words + "': " + said);
    };
    refused(gyreEstimate(gyreCallAllReduce, 8, gyreFloat32, 0, comm, nullptr),
            "microseconds is NULL", "NULL out");
    refused(gyreEstimate(static_cast<gyreCall_t>(gyreNumCalls), 8, gyreFloat32, 0, comm, &us),
            "not a gyreCall_t", "call");
    refused(gyreEstimate(static_cast<gyreCall_t>(-1), 8, gyreFloat32, 0, comm, &us),
            "not a gyreCall_t", "call -1");
    refused(gyreEstimate(gyreCallAllReduce, 8, static_cast<gyreDataType_t>(99), 0, comm, &us),
            "datatype 99", "datatype");
    refused(gyreEstimate(gyreCallAllReduce, 8, gyreFloat32, -1, comm, &us), "nranks -1",
            "nranks -1");
    refused(gyreEstimate(gyreCallAllReduce, 8, gyreFloat32, GYRE_MAX_RANKS + 1, comm, &us),
            "GYRE_MAX_RANKS", "nranks too large");
    refused(gyreEstimate(gyreCallAllReduce, SIZE_MAX, gyreFloat64, 0, comm, &us), "overflows",
            "count");
    refused(gyreEstimate(gyreCallAllReduce, 8, gyreFloat32, 0, nullptr, &us), "comm is NULL",
            "comm");
    check.expect(
        gyreEstimate(gyreCallAllToAll, 0, gyreFloat32, 0, comm, &us) == gyreSuccess && us >= 0,
        "an empty call is an answer");
    gyreCommDestroy(comm);
    return check.failures();
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
