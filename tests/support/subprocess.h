// Runs programs as a user would from a shell, for tests that check tools
// from the outside (gyrerun, gyre-bench): each process in its own process
// group, dying with the test, its stdout and stderr collected until it has
// exited and closed them, all under one hard deadline (on expiry every group
// is killed with SIGKILL and the outcome says it timed out).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace gyre::test {

struct Proc {
  std::vector<std::string> argv;
  // Added to a copy of this process's environment from which every launcher
  // and gyre variable (GYRE_*, OMPI_*, RANK, MASTER_ADDR, ...) was removed:
  // each case sets exactly what it means.
  std::map<std::string, std::string> env;
  bool stderrIsTerminal = false;  // standard error is a pseudo-terminal
};

struct Outcome {
  pid_t pid = -1;
  int exitCode = -1;
  int signal = 0;
  bool timedOut = false;
  std::string out, err;
  std::string describe() const;
};

// Called after each read, so a test can act on what was printed so far.
using OnOutput = std::function<void(const std::vector<Outcome>&)>;

std::vector<Outcome> runAll(const std::vector<Proc>& procs, int timeoutSec = 60, const OnOutput& onOutput = {});
Outcome run(const Proc& proc, int timeoutSec = 60, const OnOutput& onOutput = {});

}  // namespace gyre::test
