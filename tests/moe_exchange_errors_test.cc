// The MoE calls' errors: every bad argument refused before anything is
// sent, with a sentence naming it (the communicator stays usable); a
// dispatch whose output turns out too small fails on its rank only and can
// be made again; ranks that disagree on the experts, k, the expert map,
// the capacity, the hidden size or the type, or make another call, fail in
// the call, every one of them, by name; never a timeout.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/disagreement.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(MoeArguments, EachIsNamedAndTheCommunicatorStaysUsable) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm");
    if (!comm) return 1;
    gyreComm_t sub = nullptr;
    check.expectOk(gyreCommSplit(comm, 0, rank, &sub, nullptr), "split");
    std::vector<float> a(4096, 1.0f), b(4096, 0.0f);
    const int32_t choices[] = {0, 1, 2, 3, -1, 0, 1, 2};  // 4 tokens, top-2, 4 experts
    const int32_t far[] = {0, 1, 9, 3}, below[] = {0, -2, 1, 1};
    const int map5[] = {0, 5, 1, 1};
    gyreMoeRouting_t routing = nullptr, fresh = nullptr, other = nullptr, scratch = nullptr;
    check.expectOk(gyreMoeRoutingCreate(&routing, choices, 4, 2, 4, nullptr, 0, comm), "routing");
    check.expectOk(gyreMoeRoutingCreate(&fresh, choices, 4, 2, 4, nullptr, 0, comm), "routing");
    check.expectOk(gyreMoeRoutingCreate(&other, choices, 4, 2, 4, nullptr, 0, sub), "routing on sub");
    check.expectOk(gyreMoeExchangeCounts(routing, comm), "exchange counts");
    size_t total = 0;
    check.expectOk(gyreMoeRecvCounts(routing, nullptr, nullptr, &total), "recv counts");
    gyreRequest_t req = nullptr;
    int dummy = 0;
    struct Bad {
      gyreResult_t code;
      const char* says;
      std::function<gyreResult_t()> call;
    };
    const Bad bad[] = {
        {gyreInvalidArgument, "routing is NULL",
         [&] { return gyreMoeRoutingCreate(nullptr, choices, 4, 2, 4, nullptr, 0, comm); }},
        {gyreInvalidArgument, "comm is NULL",
         [&] { return gyreMoeRoutingCreate(&scratch, choices, 4, 2, 4, nullptr, 0, nullptr); }},
        {gyreInvalidArgument, "k 0 is not in [1, 255]",
         [&] { return gyreMoeRoutingCreate(&scratch, choices, 4, 0, 4, nullptr, 0, comm); }},
        {gyreInvalidArgument, "experts 0 is not in [1, 65535]",
         [&] { return gyreMoeRoutingCreate(&scratch, choices, 4, 2, 0, nullptr, 0, comm); }},
        {gyreInvalidArgument, "choices is NULL but tokens is 4",
         [&] { return gyreMoeRoutingCreate(&scratch, nullptr, 4, 2, 4, nullptr, 0, comm); }},
        {gyreInvalidArgument, "choices[1][0] is 9, not an expert in [0, 4) nor -1",
         [&] { return gyreMoeRoutingCreate(&scratch, far, 2, 2, 4, nullptr, 0, comm); }},
        {gyreInvalidArgument, "choices[0][1] is -2",
         [&] { return gyreMoeRoutingCreate(&scratch, below, 2, 2, 4, nullptr, 0, comm); }},
        {gyreInvalidArgument, "expertRank[1] is 5, not a rank in [0, 2)",
         [&] { return gyreMoeRoutingCreate(&scratch, choices, 4, 2, 4, map5, 0, comm); }},
        {gyreInvalidArgument, "experts 3 is not a multiple of the 2 ranks",
         [&] { return gyreMoeRoutingCreate(&scratch, choices, 1, 1, 3, nullptr, 0, comm); }},
        {gyreInvalidArgument, "routing is NULL",
         [&] { return gyreMoeDispatch(a.data(), b.data(), 16, 4, gyreFloat32, 0, nullptr, comm, nullptr); }},
        {gyreInvalidArgument, "routing was made on another communicator",
         [&] { return gyreMoeDispatch(a.data(), b.data(), 16, 4, gyreFloat32, 0, other, comm, nullptr); }},
        {gyreInvalidArgument, "hidden 0 is not in [1, 16777215]",
         [&] { return gyreMoeDispatch(a.data(), b.data(), 16, 0, gyreFloat32, 0, routing, comm, nullptr); }},
        {gyreInvalidArgument, "flags 2 has bits other than GYRE_MOE_PER_SLOT",
         [&] { return gyreMoeDispatch(a.data(), b.data(), 16, 4, gyreFloat32, 2, routing, comm, nullptr); }},
        {gyreInvalidArgument, "datatype 42 is not a gyreDataType_t",
         [&] {
           return gyreMoeDispatch(a.data(), b.data(), 16, 4, static_cast<gyreDataType_t>(42), 0, routing, comm,
                                  nullptr);
         }},
        {gyreInvalidArgument, "sendbuff is NULL with",
         [&] { return gyreMoeDispatch(nullptr, b.data(), 16, 4, gyreFloat32, 0, routing, comm, nullptr); }},
        {gyreInvalidArgument, "recvbuff is NULL with",
         [&] { return gyreMoeDispatch(a.data(), nullptr, 16, 4, gyreFloat32, 0, routing, comm, nullptr); }},
        {gyreInvalidArgument, "sendbuff and recvbuff overlap",
         [&] { return gyreMoeDispatch(a.data(), a.data() + 4, 16, 4, gyreFloat32, 0, routing, comm, nullptr); }},
        {gyreInvalidArgument, "recvRows 0 is less than the",
         [&] { return gyreMoeDispatch(a.data(), b.data(), 0, 4, gyreFloat32, 0, routing, comm, nullptr); }},
        {gyreInvalidUsage, "stream must be NULL",
         [&] {
           return gyreMoeDispatch(a.data(), b.data(), 16, 4, gyreFloat32, 0, routing, comm,
                                  reinterpret_cast<gyreStream_t>(&dummy));
         }},
        {gyreInvalidArgument, "request is NULL",
         [&] { return gyreImoeDispatch(a.data(), b.data(), 16, 4, gyreFloat32, 0, routing, comm, nullptr); }},
        {gyreInvalidUsage, "the routing's counts are not known yet",
         [&] { return gyreMoeCombine(a.data(), 0, b.data(), nullptr, 4, gyreFloat32, fresh, comm, nullptr); }},
        {gyreInvalidUsage, "the routing's counts are not known yet",
         [&] { return gyreMoeRecvCounts(fresh, nullptr, nullptr, nullptr); }},
        {gyreInvalidArgument, "sendRows 99 does not match the routing",
         [&] { return gyreMoeCombine(a.data(), 99, b.data(), nullptr, 4, gyreFloat32, routing, comm, nullptr); }},
        {gyreInvalidArgument, "weights are given but datatype is not a floating type",
         [&] {
           const float w[8] = {};
           return gyreMoeCombine(a.data(), total, b.data(), w, 4, gyreInt32, routing, comm, nullptr);
         }},
        {gyreInvalidArgument, "recvbuff is NULL with",
         [&] { return gyreImoeCombine(a.data(), total, nullptr, nullptr, 4, gyreFloat32, routing, comm, &req); }},
        {gyreInvalidArgument, "routing is NULL", [&] { return gyreMoeRoutingDestroy(nullptr); }},
        {gyreInvalidArgument, "routing is NULL", [&] { return gyreMoeExchangeCounts(nullptr, comm); }},
    };
    for (const Bad& x : bad) {
      const gyreResult_t r = x.call();
      const std::string msg = gyreGetLastError(comm);
      check.expect(r == x.code, std::string(x.says) + ": result " + gyreGetErrorString(r));
      check.expect(contains(msg, x.says), std::string("the error should say '") + x.says + "': " + msg);
    }
    // Nothing was sent: both ranks can still make the calls.
    check.expectOk(gyreMoeDispatch(a.data(), b.data(), total, 4, gyreFloat32, 0, routing, comm, nullptr),
                   "a good dispatch after them");
    check.expectOk(gyreMoeCombine(b.data(), total, a.data(), nullptr, 4, gyreFloat32, routing, comm, nullptr),
                   "a good combine after them");
    for (gyreMoeRouting_t r : {routing, fresh, other}) gyreMoeRoutingDestroy(r);
    gyreCommDestroy(sub);
    gyreCommDestroy(comm);
    return check.failures() ? 1 : 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Counts ahead, and rank 0's output too small for what came: rank 0 alone
// fails, naming both numbers, and the dispatch goes through again.
TEST(MoeArguments, AnOutputTooSmallForWhatCameFailsOnItsRankOnly) {
  for (const char* transport : {"shm", "tcp"}) {
    RunOutcome out = runRanks(3, [&](int rank, int n, const gyreUniqueId& id) {
      Checker check(rank);
      gyreComm_t comm = initRank(rank, n, id, transport, 20000);
      if (!comm) return 1;
      const int32_t choices[] = {0, 0, 0, 1, 2};  // every rank: 4 rows for rank 0's expert 0
      gyreMoeRouting_t routing = nullptr;
      check.expectOk(gyreMoeRoutingCreate(&routing, choices, 5, 1, 3, nullptr, 0, comm), "routing");
      std::vector<double> x(5 * 2, 1.0), y(64, 0.0);
      const gyreResult_t r = gyreMoeDispatch(x.data(), y.data(), rank == 0 ? 2 : 64, 2, gyreFloat64, 0, routing,
                                             comm, nullptr);
      const std::string msg = gyreGetLastError(comm);
      if (rank == 0) {
        check.expect(r == gyreInvalidArgument, std::string("rank 0: ") + gyreGetErrorString(r));
        check.expect(contains(msg, "recvbuff holds recvRows = 2 rows but 9 arrived"), msg);
      } else {
        check.expectOk(r, "ranks whose output was large enough");
      }
      size_t total = 0;
      check.expectOk(gyreMoeRecvCounts(routing, nullptr, nullptr, &total), "counts known now");
      check.expect(total == (rank == 0 ? 9u : 3u), "total " + std::to_string(total));
      check.expectOk(gyreMoeDispatch(x.data(), y.data(), total, 2, gyreFloat64, 0, routing, comm, nullptr),
                     "dispatch again");
      gyreMoeRoutingDestroy(routing);
      gyreCommDestroy(comm);
      return check.failures() ? 1 : 0;
    });
    EXPECT_TRUE(out.allSucceeded()) << transport << ": " << out.describe();
  }
}

// ---- ranks that disagree ----


// A routing from the rank's view (rank 2 differs where the case says) and
// a dispatch with the counts ahead, or exchanged first.
gyreResult_t moeCall(gyreComm_t c, int experts, int k, const int* map, size_t capacity, size_t hidden,
                     gyreDataType_t t, bool countsFirst) {
  std::vector<int32_t> choices(6 * static_cast<size_t>(k));
  for (size_t i = 0; i < choices.size(); ++i) choices[i] = static_cast<int32_t>(i % static_cast<size_t>(experts));
  gyreMoeRouting_t routing = nullptr;
  gyreResult_t r = gyreMoeRoutingCreate(&routing, choices.data(), 6, k, experts, map, capacity, c);
  if (r != gyreSuccess) return r;
  std::vector<double> x(6 * hidden, 1.0), y(6 * 3 * 2 * hidden * 3, 0.0);
  if (countsFirst) r = gyreMoeExchangeCounts(routing, c);
  if (r == gyreSuccess) {
    size_t rows = 6 * 3 * 2;
    if (countsFirst) gyreMoeRecvCounts(routing, nullptr, nullptr, &rows);
    r = gyreMoeDispatch(x.data(), y.data(), rows, hidden, t, 0, routing, c, nullptr);
  }
  gyreMoeRoutingDestroy(routing);
  return r;
}

const int kMapA[] = {0, 1, 2, 0, 1, 2}, kMapB[] = {0, 1, 2, 2, 1, 0};

const Disagreement kDisagreements[] = {
    {"experts", [](gyreComm_t c, int r) { return moeCall(c, r == 2 ? 6 : 3, 1, nullptr, 0, 4, gyreFloat32, false); },
     {"moe-dispatch", "6 experts", "3 experts"}},
    {"k", [](gyreComm_t c, int r) { return moeCall(c, 3, r == 2 ? 2 : 1, nullptr, 0, 4, gyreFloat32, false); },
     {"moe-dispatch", "top-2", "top-1"}},
    {"hidden", [](gyreComm_t c, int r) { return moeCall(c, 3, 1, nullptr, 0, r == 2 ? 8 : 4, gyreFloat32, false); },
     {"moe-dispatch", "hidden 8", "hidden 4"}},
    {"type", [](gyreComm_t c, int r) { return moeCall(c, 3, 1, nullptr, 0, 4, r == 2 ? gyreInt32 : gyreFloat32, false); },
     {"moe-dispatch", "int32", "float32"}},
    {"map", [](gyreComm_t c, int r) { return moeCall(c, 6, 1, r == 2 ? kMapB : kMapA, 0, 4, gyreFloat32, false); },
     {"moe-dispatch", "map and capacity"}},
    {"capacity", [](gyreComm_t c, int r) { return moeCall(c, 3, 1, nullptr, r == 2 ? 1 : 0, 4, gyreFloat32, false); },
     {"moe-dispatch", "map and capacity"}},
    {"map_counts_first",
     [](gyreComm_t c, int r) { return moeCall(c, 6, 1, r == 2 ? kMapB : kMapA, 0, 4, gyreFloat32, true); },
     {"moe-counts", "map and capacity"}},
    {"counts_first_on_one_rank",
     [](gyreComm_t c, int r) { return moeCall(c, 3, 1, nullptr, 0, 4, gyreFloat32, r == 2); },
     {"moe-"}},
};

class MoeDisagreement : public testing::TestWithParam<DisagreeCase> {};

TEST_P(MoeDisagreement, EveryRankFailsInTheCallByName) { expectEveryRankFailsByName(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Shapes, MoeDisagreement, testing::ValuesIn(disagreeCases(kDisagreements)),
                         disagreeCaseName);

}  // namespace
}  // namespace gyre::test
