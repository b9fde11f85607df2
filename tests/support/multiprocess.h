// Runs a function in N real, forked rank processes and collects what each
// printed and how it ended. Every run has a hard deadline: on expiry all
// ranks are killed and the run is reported as timed out, so a hang fails the
// test instead of stalling CI.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "gyre/gyre.h"

// The transports the multi-process suites run over: shm, tcp, net (gyre's
// socket network loaded as an NCCL net plugin, GYRE_TEST_NET_PLUGIN), and
// ucx where this gyre was built with it.
// (initRank also takes "shm_ucx": two hosts by rank parity, shared memory
// within each and UCX between them, "shm_ucx_none" the same without UCX's
// error handling, over its tcp; "ucx_tcp": UCX over its tcp only,
// without UCX's error handling; "ucx_peer": UCX reporting dead peers.)
#ifdef GYRE_HAVE_UCX
#define GYRE_TEST_TRANSPORTS "shm", "tcp", "net", "ucx"
#else
#define GYRE_TEST_TRANSPORTS "shm", "tcp", "net"
#endif

namespace gyre::test {

struct RankOutcome {
  int rank = -1;
  pid_t pid = -1;
  int exitCode = -1;   // when it exited
  int signal = 0;      // when a signal ended it
  std::string output;  // stdout and stderr
};

struct RunOutcome {
  std::vector<RankOutcome> ranks;
  bool timedOut = false;
  // A one-paragraph account for test failure messages.
  std::string describe() const;
  bool allSucceeded() const;
};

struct RunOptions {
  int timeoutSec = 120;
  // Called in the parent after a rank's fork with its pid and a pipe the
  // child can write to (for tests that steer ranks, e.g. kill one).
  std::function<void(int rank, pid_t pid)> onStarted;
};

// body runs in each child with its rank; its return value is the exit code.
// The unique id is created by the parent, which is not a rank.
RunOutcome runRanks(int nranks,
                    const std::function<int(int rank, int nranks, const gyreUniqueId& id)>& body,
                    const RunOptions& options = {});

// Failure accounting inside a rank: prints the message and counts it.
class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}
  void fail(const std::string& what);
  // true when ok; prints and counts otherwise.
  bool expect(bool ok, const std::string& what) {
    if (!ok) fail(what);
    return ok;
  }
  bool expectOk(gyreResult_t r, const std::string& what);
  int failures() const { return failures_; }

 private:
  int rank_;
  int failures_ = 0;
};

// Creates a communicator in a rank; prints and returns nullptr on failure.
gyreComm_t initRank(int rank, int nranks, const gyreUniqueId& id, const char* transport = nullptr,
                    int timeoutMs = 60000);

}  // namespace gyre::test
