// The same call made again (Communicator::repeat, call_repeat.cc): a
// call with the same arguments as the one before runs on that call's plan,
// past its checks. These tests make every operation again and again on the
// same buffers with new values each time, mix repeats with other calls,
// groups, nonblocking calls and point-to-point messages, and count the
// statistics: each result is checked element by element, as if every call
// had been made the whole way. (A repeat that meets a different call on
// another rank: mismatch_test's repeated_then_count.)
//
// Every run has a hard deadline (runRanks' timeout); no test sleeps.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

constexpr int kRanks = 3;
constexpr int kTimes = 4;     // each call made this many times in a row
constexpr size_t kCount = 37;  // elements per block: not a round number

// An exact value for element i of rank r's input at repetition t.
int32_t valueOf(int r, size_t i, int t) { return static_cast<int32_t>(1000 * t + 100 * r + static_cast<int>(i)); }
// Element i summed over n ranks' inputs at repetition t.
int64_t sumOf(int n, size_t i, int t) {
  int64_t sum = 0;
  for (int r = 0; r < n; ++r) sum += valueOf(r, i, t);
  return sum;
}

class CallRepeat : public testing::TestWithParam<const char*> {};

// Each operation kTimes in a row on the same buffers, the input new each
// time; the output is cleared before each call, so a result left over
// from the one before cannot pass.
TEST_P(CallRepeat, EveryOperationMadeAgainSeesItsBuffersNewValues) {
  const char* transport = GetParam();
  RunOutcome out = runRanks(kRanks, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport);
    if (!comm) return 1;
    const size_t all = kCount * static_cast<size_t>(n);
    std::vector<int32_t> in(all), outBuf(all);
    auto fill = [&](int t, size_t elems) {
      for (size_t i = 0; i < elems; ++i) in[i] = valueOf(rank, i, t);
      std::fill(outBuf.begin(), outBuf.end(), -1);
    };
    auto eachTime = [&](auto&& body) {
      for (int t = 0; t < kTimes; ++t) body(t, " (time " + std::to_string(t) + ")");
    };
    eachTime([&](int t, const std::string& at) {
      // AllReduce, sum.
      fill(t, kCount);
      check.expectOk(gyreAllReduce(in.data(), outBuf.data(), kCount, gyreInt32, gyreSum, comm, nullptr), "allreduce");
      for (size_t i = 0; i < kCount; ++i)
        if (!check.expect(outBuf[i] == sumOf(n, i, t), "allreduce[" + std::to_string(i) + "]" + at)) break;
    });
    eachTime([&](int t, const std::string& at) {
      // AllReduce in place, max.
      fill(t, kCount);
      check.expectOk(gyreAllReduce(in.data(), in.data(), kCount, gyreInt32, gyreMax, comm, nullptr), "in place");
      for (size_t i = 0; i < kCount; ++i)
        if (!check.expect(in[i] == valueOf(n - 1, i, t), "in-place max[" + std::to_string(i) + "]" + at)) break;
    });
    eachTime([&](int t, const std::string& at) {
      // Broadcast from rank 1 (each rank's input its own: only the root's arrives).
      fill(t, kCount);
      check.expectOk(gyreBroadcast(in.data(), outBuf.data(), kCount, gyreInt32, 1, comm, nullptr), "broadcast");
      for (size_t i = 0; i < kCount; ++i)
        if (!check.expect(outBuf[i] == valueOf(1, i, t), "broadcast[" + std::to_string(i) + "]" + at)) break;
    });
    eachTime([&](int t, const std::string& at) {
      // Reduce to rank 2, sum.
      fill(t, kCount);
      check.expectOk(gyreReduce(in.data(), outBuf.data(), kCount, gyreInt32, gyreSum, 2, comm, nullptr), "reduce");
      for (size_t i = 0; i < kCount && rank == 2; ++i)
        if (!check.expect(outBuf[i] == sumOf(n, i, t), "reduce[" + std::to_string(i) + "]" + at)) break;
    });
    eachTime([&](int t, const std::string& at) {
      fill(t, kCount);
      check.expectOk(gyreAllGather(in.data(), outBuf.data(), kCount, gyreInt32, comm, nullptr), "allgather");
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < kCount; ++i)
          if (!check.expect(outBuf[r * kCount + i] == valueOf(r, i, t), "allgather block " + std::to_string(r) + at))
            break;
    });
    eachTime([&](int t, const std::string& at) {
      fill(t, all);
      check.expectOk(gyreReduceScatter(in.data(), outBuf.data(), kCount, gyreInt32, gyreSum, comm, nullptr),
                     "reducescatter");
      for (size_t i = 0; i < kCount; ++i)
        if (!check.expect(outBuf[i] == sumOf(n, rank * kCount + i, t), "reducescatter[" + std::to_string(i) + "]" + at))
          break;
    });
    eachTime([&](int t, const std::string& at) {
      fill(t, all);
      check.expectOk(gyreAllToAll(in.data(), outBuf.data(), kCount, gyreInt32, comm, nullptr), "alltoall");
      // Block r of ours is block `rank` of rank r's input.
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < kCount; ++i)
          if (!check.expect(outBuf[r * kCount + i] == valueOf(r, rank * kCount + i, t),
                            "alltoall block " + std::to_string(r) + at))
            break;
    });
    eachTime([&](int t, const std::string& at) {
      fill(t, kCount);
      check.expectOk(gyreGather(in.data(), outBuf.data(), kCount, gyreInt32, 0, comm, nullptr), "gather");
      for (int r = 0; r < n && rank == 0; ++r)
        for (size_t i = 0; i < kCount; ++i)
          if (!check.expect(outBuf[r * kCount + i] == valueOf(r, i, t), "gather block " + std::to_string(r) + at))
            break;
    });
    eachTime([&](int t, const std::string& at) {
      fill(t, all);
      check.expectOk(gyreScatter(in.data(), outBuf.data(), kCount, gyreInt32, 1, comm, nullptr), "scatter");
      for (size_t i = 0; i < kCount; ++i)
        if (!check.expect(outBuf[i] == valueOf(1, rank * kCount + i, t), "scatter[" + std::to_string(i) + "]" + at))
          break;
    });
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// One AllReduce made again between other calls of every kind: another
// collective, a send and receive, the same call inside a group and as a
// nonblocking call, a refused call. Each result exact; the statistics
// count every call that ran, and what each sent, as the same calls made
// the whole way would.
TEST_P(CallRepeat, RepeatsBetweenOtherCallsGroupsAndNonblockingCallsAreExactAndCounted) {
  const char* transport = GetParam();
  RunOutcome out = runRanks(kRanks, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport);
    if (!comm) return 1;
    std::vector<int32_t> in(kCount), res(kCount), other(kCount * n);
    int t = 0;
    int calls = 0;
    auto allReduce = [&](const std::string& how, int mode) {
      for (size_t i = 0; i < kCount; ++i) in[i] = valueOf(rank, i, t);
      std::fill(res.begin(), res.end(), -1);
      if (mode == 0) {
        check.expectOk(gyreAllReduce(in.data(), res.data(), kCount, gyreInt32, gyreSum, comm, nullptr), how);
      } else if (mode == 1) {  // in a group
        check.expectOk(gyreGroupStart(), how + ": group start");
        check.expectOk(gyreAllReduce(in.data(), res.data(), kCount, gyreInt32, gyreSum, comm, nullptr), how);
        check.expectOk(gyreGroupEnd(), how + ": group end");
      } else {  // nonblocking, waited for
        gyreRequest_t req = nullptr;
        check.expectOk(gyreIallReduce(in.data(), res.data(), kCount, gyreInt32, gyreSum, comm, &req), how);
        check.expectOk(gyreWait(req), how + ": wait");
      }
      ++calls;
      for (size_t i = 0; i < kCount; ++i)
        if (!check.expect(res[i] == sumOf(n, i, t), how + ": [" + std::to_string(i) + "] " + std::to_string(res[i]) +
                                                        ", expected " + std::to_string(sumOf(n, i, t))))
          break;
      ++t;
    };
    allReduce("first", 0);
    // What one AllReduce sends each peer: every later one sends the same.
    gyreCommStats_t s{};
    std::vector<uint64_t> once(n), sent(n);
    check.expectOk(gyreCommGetStats(comm, &s, once.data()), "stats after one");
    allReduce("again", 0);
    allReduce("and again", 0);
    check.expectOk(gyreAllGather(in.data(), other.data(), kCount, gyreInt32, comm, nullptr), "allgather between");
    ++calls;
    allReduce("after an allgather", 0);
    allReduce("repeated after it", 0);
    // A message around the ring between two repeats.
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    int32_t token = rank, got = -1;
    check.expectOk(gyreGroupStart(), "p2p group");
    check.expectOk(gyreSend(&token, 1, gyreInt32, next, comm, nullptr), "send");
    check.expectOk(gyreRecv(&got, 1, gyreInt32, prev, comm, nullptr), "recv");
    check.expectOk(gyreGroupEnd(), "p2p group end");
    calls += 2;
    check.expect(got == prev, "the ring's token " + std::to_string(got));
    allReduce("after a send and receive", 0);
    allReduce("in a group", 1);
    allReduce("after the group", 0);
    allReduce("nonblocking", 2);
    allReduce("after the nonblocking call", 0);
    // A refused call changes nothing: the next is a repeat still.
    check.expect(gyreAllReduce(in.data(), res.data(), kCount, static_cast<gyreDataType_t>(99), gyreSum, comm,
                               nullptr) == gyreInvalidArgument,
                 "a bad type is refused");
    allReduce("after a refused call", 0);
    allReduce("last", 0);
    check.expectOk(gyreCommGetStats(comm, &s, sent.data()), "stats");
    check.expect(s.calls == static_cast<uint64_t>(calls) && s.failedCalls == 0,
                 "calls " + std::to_string(s.calls) + ", made " + std::to_string(calls));
    const int allReduces = calls - 3;  // (the allgather, the send and the receive)
    const uint64_t bytes = kCount * sizeof(int32_t);
    check.expect(s.bytes == allReduces * bytes + n * bytes + 2 * sizeof(int32_t),
                 "bytes " + std::to_string(s.bytes));
    // Sent to each peer: the AllReduces' (as the first one's), the
    // AllGather's and the token's, at least; nothing to itself.
    check.expect(sent[rank] == 0, "sent to itself " + std::to_string(sent[rank]));
    for (int p = 0; p < n; ++p)
      check.expect(sent[p] >= allReduces * once[p] + (p == next ? sizeof(int32_t) : 0),
                   "sent to rank " + std::to_string(p) + ": " + std::to_string(sent[p]) + ", one AllReduce " +
                       std::to_string(once[p]));
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, CallRepeat, testing::Values(GYRE_TEST_TRANSPORTS));

}  // namespace
}  // namespace gyre::test
