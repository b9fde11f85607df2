// A rank that stops making progress (SIGSTOP) while the others call: every
// survivor times out, and each message names the rank it waited for and the
// rank the wait is stuck behind, the stopped one, even for survivors that
// wait on a healthy rank (before, only the stopped rank's neighbour named it).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct Shared {
  std::atomic<int> pids[8];
  std::atomic<int> checked{0};  // survivors done with their checks
};

// What every survivor's message must say: the stopped rank, by its pid, as
// the one that stopped making progress (and, on one host, seen stopped).
void expectNamesTheStoppedRank(Checker& check, const std::string& msg, int pid, const std::string& where) {
  check.expect(contains(msg, "rank 2 (pid " + std::to_string(pid)), "names the stopped rank: " + msg);
  check.expect(contains(msg, "stopped making progress"), "says it stopped making progress: " + msg);
  if (where != "hosts") check.expect(contains(msg, "it is stopped (SIGSTOP"), "sees it stopped: " + msg);
}

// The stopped rank ends by the survivors' SIGKILL, every survivor cleanly.
void expectSurvivorsExitedAndTheStoppedRankKilled(const RunOutcome& out, int stopped) {
  ASSERT_FALSE(out.timedOut) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    if (r.rank == stopped) {
      EXPECT_EQ(r.signal, SIGKILL) << out.describe();
    } else {
      EXPECT_EQ(r.exitCode, 0) << out.describe();
    }
  }
  if (std::getenv("GYRE_TEST_SHOW")) std::printf("%s", out.describe().c_str());
}

// where: "shm" and "tcp" on one host (a stopped local rank is seen stopped
// in /proc); "hosts": tcp between ranks that claim different hosts (no pid
// to look at: the chain of reports alone names it).
class Stall : public testing::TestWithParam<const char*> {};

TEST_P(Stall, EverySurvivorNamesTheRankTheWaitIsStuckBehind) {
  const std::string where = GetParam();
  const int n = 4, stopped = 2;
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared();
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      n,
      [&](int rank, int nranks, const gyreUniqueId& id) {
        shared->pids[rank].store(getpid());
        if (where == "hosts")
          setenv("GYRE_HOSTID", ("stall-host-" + std::to_string(rank)).c_str(), 1);
        Checker check(rank);
        gyreComm_t comm = initRank(rank, nranks, id, where == "shm" ? "shm" : "tcp", 1000);
        if (!comm) return 1;
        std::vector<float> v(1 << 14, 1.0f);
        // Everyone is set up before rank 2 stops.
        if (!check.expectOk(
                gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr),
                "a first allreduce"))
          return 1;
        if (rank == stopped) {
          raise(SIGSTOP);  // stopped until rank 0 kills it
          return 0;
        }
        gyreResult_t r = gyreSuccess;
        for (int i = 0; i < 1000 && r == gyreSuccess; ++i)
          r = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
        const std::string msg = gyreGetLastError(nullptr);
        std::printf("rank %d: %s\n", rank, msg.c_str());
        check.expect(r == gyreTimeout || r == gyreRemoteError,
                     std::string("a timeout, got ") + gyreGetErrorString(r));
        expectNamesTheStoppedRank(check, msg, shared->pids[stopped].load(), where);
        gyreCommDestroy(comm);
        if (shared->checked.fetch_add(1) + 1 == nranks - 1)
          kill(shared->pids[stopped].load(), SIGKILL);
        return check.failures();
      },
      o);
  expectSurvivorsExitedAndTheStoppedRankKilled(out, stopped);
  munmap(mem, sizeof(Shared));
}

INSTANTIATE_TEST_SUITE_P(Where, Stall, testing::Values("shm", "tcp", "hosts"));

// Rank 0 waits in a Recv from rank 2, which is stopped; rank 1 is in no call
// and makes its next one (a Send that needs nobody) after rank 0 failed. It
// learns of the stall as that call starts and names rank 2 all the same.
TEST_P(Stall, ARankOutsideTheStallNamesItAtItsNextCall) {
  const std::string where = GetParam();
  const int stopped = 2;
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared();
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      3,
      [&](int rank, int nranks, const gyreUniqueId& id) {
        shared->pids[rank].store(getpid());
        if (where == "hosts") setenv("GYRE_HOSTID", ("stall-host-" + std::to_string(rank)).c_str(), 1);
        Checker check(rank);
        gyreComm_t comm = initRank(rank, nranks, id, where == "shm" ? "shm" : "tcp", 1000);
        if (!comm) return 1;
        float x = 1.0f;
        if (!check.expectOk(gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, comm, nullptr), "a first allreduce"))
          return 1;
        if (rank == stopped) {
          raise(SIGSTOP);
          return 0;
        }
        gyreResult_t r;
        if (rank == 0) {
          r = gyreRecv(&x, 1, gyreFloat32, stopped, comm, nullptr);
          shared->checked.fetch_add(1);
        } else {
          const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          while (shared->checked.load() < 1 && std::chrono::steady_clock::now() < end) sched_yield();
          r = gyreSend(&x, 1, gyreFloat32, 0, comm, nullptr);
        }
        const std::string msg = gyreGetLastError(nullptr);
        std::printf("rank %d: %s\n", rank, msg.c_str());
        check.expect(r == (rank == 0 ? gyreTimeout : gyreRemoteError),
                     std::string("rank 0 times out, rank 1 hears it; got ") + gyreGetErrorString(r));
        expectNamesTheStoppedRank(check, msg, shared->pids[stopped].load(), where);
        gyreCommDestroy(comm);
        if (rank == 1) kill(shared->pids[stopped].load(), SIGKILL);
        return check.failures();
      },
      o);
  expectSurvivorsExitedAndTheStoppedRankKilled(out, stopped);
  munmap(mem, sizeof(Shared));
}

}  // namespace
}  // namespace gyre::test
