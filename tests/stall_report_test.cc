// Stall reports (GYRE_STALL_REPORT_MS): rank 2 of 4 stays in the
// "application" before an AllReduce the others are already waiting in. Each
// waiting rank must log a report that names rank 2 as the rank its wait is
// stuck behind and the call it has not reached; rank 2, once it makes the
// call, must log that the others wait. Nobody fails: the reports only tell.
// In the "stopped" runs rank 2 stops itself (SIGSTOP) instead, so it cannot
// answer at all: the reports must name it, and see it stopped, all the same.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

constexpr int kRanks = 4, kLate = 2, kCall = 5;  // rank 2 is late for AllReduce #5

struct Shared {
  std::atomic<int> pids[kRanks];
  std::atomic<int> release{0};  // 1: the reports are there; 2: the watcher gave up
};

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// The line of a waiting rank's log that reports the stall correctly: its
// own call, and rank 2 (by pid) as the rank the wait is stuck behind, which
// has not reached that call.
std::string goodReport(const std::string& log, int latePid, bool stopped) {
  const std::string call = "allreduce #" + std::to_string(kCall);
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (contains(line, "stall report: " + call + " has waited") &&
        contains(line, "the wait is stuck behind rank " + std::to_string(kLate) + " (pid " + std::to_string(latePid)) &&
        contains(line, "which has not reached " + call) &&
        (!stopped || contains(line, "and did not answer: it is stopped (SIGSTOP")))
      return line;
  }
  return "";
}

// The late rank's line: others wait for it, in the call it then starts.
std::string lateRanksLine(const std::string& log) {
  const std::string call = "allreduce #" + std::to_string(kCall);
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (contains(line, "stall: other ranks wait (") && contains(line, "while this rank is in " + call))
      return line;
  return "";
}

std::string logPath(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".log"; }

// A process apart (forked before the ranks, so no thread crosses a fork):
// releases the late rank once every waiting rank's log holds a good report,
// or gives up after a bound so that a wrong report fails the test instead
// of hanging it.
// A stopped late rank is continued (SIGCONT) instead of released.
pid_t startWatcher(Shared* shared, const std::string& dir, bool stopped) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  int outcome = 2;
  for (int tries = 0; tries < 6000 && outcome == 2; ++tries) {  // 30 s at most
    bool all = shared->pids[kLate].load() != 0;
    for (int r = 0; r < kRanks && all; ++r)
      if (r != kLate) all = !goodReport(readFile(logPath(dir, r)), shared->pids[kLate].load(), stopped).empty();
    if (all) outcome = 1;
    else usleep(5000);  // polling files: nothing to be woken by
  }
  shared->release.store(outcome);
  if (stopped && shared->pids[kLate].load()) kill(shared->pids[kLate].load(), SIGCONT);
  _exit(0);
}

class StallReport : public testing::TestWithParam<const char*> {};

TEST_P(StallReport, WaitingRanksNameTheLateRankAndItsCall) {
  const std::string param = GetParam();
  const bool stopped = param.ends_with("-stopped");
  const std::string transport = param.substr(0, param.find('-'));
  char tmpl[] = "/tmp/gyre-stall-report-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared();
  const pid_t watcher = startWatcher(shared, dir, stopped);
  ASSERT_GT(watcher, 0);
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      kRanks,
      [&](int rank, int nranks, const gyreUniqueId& id) {
        shared->pids[rank].store(getpid());
        setenv("GYRE_DEBUG_FILE", logPath(dir, rank).c_str(), 1);
        setenv("GYRE_STALL_REPORT_MS", "100", 1);
        gyreResetDebugInit();
        Checker check(rank);
        gyreComm_t comm = initRank(rank, nranks, id, transport.c_str(), 60000);
        if (!comm) return 1;
        std::vector<float> v(1024);
        for (int call = 1; call <= kCall + 1; ++call) {
          if (call == kCall && rank == kLate) {
            if (stopped)
              raise(SIGSTOP);  // until the watcher continues it
            else
              while (shared->release.load() == 0) usleep(1000);  // the application, busy
          }
          std::fill(v.begin(), v.end(), float(rank + call));
          if (!check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr),
                              "allreduce #" + std::to_string(call)))
            return 1;
          const float want = float(nranks * call + nranks * (nranks - 1) / 2);
          check.expect(v[0] == want && v[v.size() - 1] == want, "allreduce #" + std::to_string(call) + " exact");
        }
        gyreCommDestroy(comm);
        return check.failures();
      },
      o);
  int status = 0;
  waitpid(watcher, &status, 0);
  std::string logs[kRanks];
  for (int r = 0; r < kRanks; ++r) logs[r] = readFile(logPath(dir, r));
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  EXPECT_EQ(shared->release.load(), 1) << "not every waiting rank logged a report naming rank 2";
  for (int r = 0; r < kRanks; ++r) {
    if (r == kLate) {
      EXPECT_FALSE(lateRanksLine(logs[r]).empty()) << "rank 2's log:\n" << logs[r];
      continue;
    }
    const std::string line = goodReport(logs[r], shared->pids[kLate].load(), stopped);
    EXPECT_FALSE(line.empty()) << "rank " << r << "'s log:\n" << logs[r];
    // Nothing failed: the report is no error.
    EXPECT_FALSE(contains(logs[r], "failed on rank")) << logs[r];
    if (std::getenv("GYRE_TEST_SHOW")) std::printf("%s\n", line.c_str());
  }
  if (std::getenv("GYRE_TEST_SHOW")) std::printf("%s\n", lateRanksLine(logs[kLate]).c_str());
  for (int r = 0; r < kRanks; ++r) std::remove(logPath(dir, r).c_str());
  rmdir(dir.c_str());
  munmap(mem, sizeof(Shared));
}

INSTANTIATE_TEST_SUITE_P(Transports, StallReport, testing::Values("shm", "tcp", "shm-stopped", "tcp-stopped"));

TEST(StallReportSetting, MalformedValueIsNamed) {
  gyreUniqueId id;
  ASSERT_EQ(gyreGetUniqueId(&id), gyreSuccess);
  setenv("GYRE_STALL_REPORT_MS", "soon", 1);
  gyreComm_t comm = nullptr;
  EXPECT_EQ(gyreCommInitRank(&comm, 1, id, 0), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "GYRE_STALL_REPORT_MS=soon")) << gyreGetLastError(nullptr);
  unsetenv("GYRE_STALL_REPORT_MS");
  EXPECT_EQ(comm, nullptr);
}

}  // namespace
}  // namespace gyre::test
