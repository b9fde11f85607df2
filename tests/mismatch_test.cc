// Calls that differ between ranks, and the guarantee gyre gives for them
// (README, docs/collectives.md): every rank fails either in the mismatched
// call or, at the latest, in the first call it starts after the report of
// the mismatch has reached it; every failure names both calls; nobody waits
// out a timeout. A rank whose part of the mismatched call only sent (a
// Broadcast root, AllToAllv senders, a Send) may return success from it.
// The test makes each rank's next call (a Send that fits in the buffers,
// which waits for nobody) only after every rank has returned from the
// mismatched one, which is when every report has been sent.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Shared by the rank processes (mapped before they fork).
struct Shared {
  std::atomic<int> returned{0};  // ranks back from the mismatched call
  std::atomic<int> failedThere{0};
};

struct Case {
  const char* name;
  int nranks;
  // The mismatched call of `rank` (comm, rank); returns its result.
  std::function<gyreResult_t(gyreComm_t, int)> call;
  std::vector<std::string> bothSides;  // every failure message holds each of these
};

gyreResult_t allReduce(gyreComm_t comm, size_t count = 4) {
  std::vector<float> v(count, 1.0f);
  return gyreAllReduce(v.data(), v.data(), count, gyreFloat32, gyreSum, comm, nullptr);
}

const Case kCases[] = {
    {"broadcast_root",
     3,
     [](gyreComm_t c, int r) {
       std::vector<float> v(1000, float(r));
       return gyreBroadcast(v.data(), v.data(), v.size(), gyreFloat32, r == 2 ? 1 : 0, c, nullptr);
     },
     {"root 0", "root 1"}},
    {"alltoallv_counts",
     3,
     [](gyreComm_t c, int r) {
       // Rank 0 sends rank 1 two elements; rank 1 expects one.
       std::vector<size_t> sc(3, 1), rc(3, 1), sd = {0, 1, 3}, rd = {0, 1, 2};
       if (r == 0) sc[1] = 2;
       if (r != 0) sd = {0, 1, 2};
       std::vector<float> in(4, 1.0f), out(3);
       return gyreAllToAllv(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(),
                            gyreFloat32, c, nullptr);
     },
     {"alltoallv #1", "bytes sent", "expected"}},
    {"send_recv_size",
     2,
     [](gyreComm_t c, int r) {
       std::vector<float> v(200, 1.0f);
       return r == 0 ? gyreSend(v.data(), 100, gyreFloat32, 1, c, nullptr)
                     : gyreRecv(v.data(), 200, gyreFloat32, 0, c, nullptr);
     },
     {"called send #1 (100 x float32 from rank 0 to rank 1)",
      "called recv #1 (200 x float32 from rank 0)"}},
    {"extra_call",
     3,
     [](gyreComm_t c, int r) {
       // Rank 0 makes a Barrier the others do not: its #1 meets their AllReduce #1.
       if (r == 0) {
         gyreResult_t b = gyreBarrier(c, nullptr);
         if (b != gyreSuccess) return b;
       }
       return allReduce(c);
     },
     {"barrier #1", "allreduce #1"}},
    {"extra_send",
     2,
     [](gyreComm_t c, int r) {
       // Rank 0 sends a message nobody receives, then both reduce.
       std::vector<float> v(16, 1.0f);
       if (r == 0) {
         gyreResult_t s = gyreSend(v.data(), v.size(), gyreFloat32, 1, c, nullptr);
         if (s != gyreSuccess) return s;
       }
       return allReduce(c);
     },
     {"called send #1 (16 x float32 from rank 0 to rank 1)", "called allreduce #1"}},
    {"repeated_then_count",
     3,
     [](gyreComm_t c, int r) {
       // The same AllReduce three times (the second and third repeat the
       // first: call_repeat.cc); then rank 0 makes it a fourth time, a
       // repeat again, where the others halve the count.
       std::vector<float> v(64, 1.0f);
       for (int k = 0; k < 3; ++k) {
         gyreResult_t s = gyreAllReduce(v.data(), v.data(), 64, gyreFloat32, gyreSum, c, nullptr);
         if (s != gyreSuccess) return s;
       }
       return gyreAllReduce(v.data(), v.data(), r == 0 ? 64 : 32, gyreFloat32, gyreSum, c, nullptr);
     },
     {"allreduce #4 (64 x float32", "allreduce #4 (32 x float32"}},
    {"split_against_allreduce",
     3,
     [](gyreComm_t c, int r) {
       if (r == 2) return allReduce(c, 1000);
       gyreComm_t child = nullptr;
       gyreResult_t s = gyreCommSplit(c, 0, r, &child, nullptr);
       if (child) gyreCommDestroy(child);
       return s;
     },
     {"commsplit #1", "allreduce #1"}},
};

class CallMismatchGuarantee : public testing::TestWithParam<std::tuple<Case, const char*>> {};

TEST_P(CallMismatchGuarantee, TheCallOrTheNextFailsOnEveryRankNamingBothCalls) {
  const Case& c = std::get<0>(GetParam());
  const char* transport = std::get<1>(GetParam());
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared();
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      c.nranks,
      [&](int rank, int nranks, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, nranks, id, transport, 20000);
        if (!comm) return 1;
        auto namesBoth = [&](const std::string& msg, const std::string& where) {
          for (const std::string& side : c.bothSides)
            check.expect(contains(msg, side), where + ": the message names '" + side + "': " + msg);
        };
        gyreResult_t r = c.call(comm, rank);
        std::string msg = gyreGetLastError(nullptr);
        check.expect(r != gyreTimeout, "no timeout in the mismatched call: " + msg);
        if (r != gyreSuccess) {
          namesBoth(msg, "the mismatched call");
          shared->failedThere.fetch_add(1);
        }
        shared->returned.fetch_add(1);
        // Every rank is back: each report went out before its call returned.
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (shared->returned.load() < nranks && std::chrono::steady_clock::now() < end)
          sched_yield();
        if (r == gyreSuccess) {
          // A call that needs nothing from its peers (a Send that fits in
          // the buffers): only the check as it starts can fail it.
          float one = 1.0f;
          gyreResult_t next = gyreSend(&one, 1, gyreFloat32, (rank + 1) % nranks, comm, nullptr);
          msg = gyreGetLastError(nullptr);
          check.expect(next != gyreSuccess && next != gyreTimeout, "the next call fails: " + msg);
          namesBoth(msg, "the next call");
        }
        std::printf("rank %d: %s\n", rank, msg.c_str());
        gyreCommDestroy(comm);
        return check.failures();
      },
      o);
  EXPECT_TRUE(out.allSucceeded()) << c.name << ":\n" << out.describe();
  EXPECT_GE(shared->failedThere.load(), 1) << "some rank fails in the mismatched call itself";
  if (std::getenv("GYRE_TEST_SHOW")) std::printf("%s", out.describe().c_str());
  munmap(mem, sizeof(Shared));
}

INSTANTIATE_TEST_SUITE_P(Cases, CallMismatchGuarantee,
                         testing::Combine(testing::ValuesIn(kCases), testing::Values(GYRE_TEST_TRANSPORTS)),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param).name) + "_" +
                                  std::get<1>(p.param);
                         });

}  // namespace
}  // namespace gyre::test
