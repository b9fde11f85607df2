// Starting one rank. Everything the child needs is prepared in the parent:
// gyrerun has a thread (the rendezvous root), and after fork() a child of a
// threaded process may only make async-signal-safe calls until exec (no
// malloc, no stdio), so the child below only makes system calls.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace gyre::run {

struct RankSetup {
  std::vector<std::string> env;  // NAME=VALUE, the rank's whole environment
  int stdinFd = -1;
  int stdoutFd = -1;
  int stderrFd = -1;
  const cpu_set_t* cpus = nullptr;  // nullptr: keep the inherited affinity
  size_t cpuBytes = 0;
  sigset_t signalMask;  // the mask gyrerun itself started with
  rlimit fileLimit;     // likewise (gyrerun raises its own)
};

// The program and its arguments, with the places execve should try: the
// path itself when it has a '/', else each directory of the ranks' PATH (as
// execvp searches, which is not safe to call after fork).
class Program {
 public:
  Program(const std::vector<std::string>& command, const std::string& searchPath);
  const std::string& name() const { return args_[0]; }

 private:
  friend pid_t spawnRank(const Program&, const RankSetup&);
  std::vector<std::string> args_;
  std::vector<std::string> candidates_;
  std::string failurePrefix_;  // "gyrerun: cannot run 'prog': "
};

// Forks a child that becomes its own process-group leader (so a terminal's
// Ctrl-C reaches only gyrerun, which forwards it: once), dies with gyrerun
// (PR_SET_PDEATHSIG), and execs the program. When exec fails the child says
// so on its stderr and exits 127. Returns the pid, or -1 with errno (fork).
pid_t spawnRank(const Program& program, const RankSetup& setup);

// The environment every rank inherits: gyrerun's own, then the -x settings,
// with later settings of a name replacing earlier ones.
class Environment {
 public:
  Environment();  // from environ
  void set(const std::string& name, const std::string& value);
  std::string get(const std::string& name) const;  // "" when unset
  std::vector<std::string> entries() const;

 private:
  std::vector<std::string> entries_;  // NAME=VALUE, names unique
};

}  // namespace gyre::run
