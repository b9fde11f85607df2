// The benchmarks' own launcher (--ranks N): fork N ranks from one unique id,
// each optionally pinned to core r mod cores, each running its part on a
// communicator of its own; the worst exit status wins (a rank killed by a
// signal counts as 1). Header-only and public-API-only, so each benchmark
// links whichever gyre library it needs.
#pragma once

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "gyre/gyre.h"

namespace gyre::bench {

// run(rank, comm) is the rank's exit status; it owns comm. The id is made
// before forking (plain bytes, inherited by every child).
template <class Run>
int forkRanks(int nranks, bool bind, Run&& run) {
  gyreUniqueId id;
  if (gyreGetUniqueId(&id) != gyreSuccess) {
    std::fprintf(stderr, "gyreGetUniqueId failed: %s\n", gyreGetLastError(nullptr));
    return 1;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (bind) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r % sysconf(_SC_NPROCESSORS_ONLN), &set);
        sched_setaffinity(0, sizeof(set), &set);
      }
      gyreComm_t comm;
      if (gyreCommInitRank(&comm, nranks, id, r) != gyreSuccess) {
        std::fprintf(stderr, "rank %d: gyreCommInitRank failed: %s\n", r, gyreGetLastError(nullptr));
        _exit(1);
      }
      std::fflush(stdout);
      const int status = run(r, comm);
      std::fflush(stdout);
      _exit(status);
    }
    pids.push_back(pid);
  }
  int status = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    status = std::max(status, WIFEXITED(st) ? WEXITSTATUS(st) : 1);
  }
  return status;
}

}  // namespace gyre::bench
