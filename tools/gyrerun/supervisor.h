// The job's life: start every rank, relay their output, pass signals on, and
// when one rank fails (or time runs out) stop the others, SIGTERM first and
// SIGKILL after the grace period. One thread; it waits only in poll(), on
// the ranks' pipes and the signalfd (SIGCHLD included), never in sleep().
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "binding.h"
#include "options.h"
#include "relay.h"
#include "signals.h"
#include "spawn.h"

namespace gyre::run {

class Supervisor {
 public:
  // env: what every rank gets, the job-wide GYRE_* variables included;
  // fileLimit: the open-file limit to give ranks back.
  Supervisor(const Options& options, SignalChannel& signals, Environment env, rlimit fileLimit);
  // Runs the job to its end; returns gyrerun's exit status.
  int run();

 private:
  struct Rank {
    pid_t pid = -1;
    bool running = false;
    std::unique_ptr<RankStream> out, err;
  };

  void startAll();
  void startRank(int rank, const Program& program, CpuBinding* binding, int devNull, bool replacement = false);
  // --elastic: rank r's process failed; true when a replacement was
  // started or the others go on without it.
  bool absorbFailure(int r, const std::string& what);
  void handleSignals();
  void reapExited();
  void onExit(int rank, int status);
  void beginStop(int sig);
  void checkDeadlines();
  void signalRunning(int sig);
  int pollTimeoutMs() const;
  void say(const std::string& line);

  const Options& options_;
  SignalChannel& signals_;
  Environment env_;
  rlimit fileLimit_;
  Sink stdout_{1}, stderr_{2};
  std::vector<Rank> ranks_;
  std::unordered_map<pid_t, int> rankOfPid_;
  int running_ = 0;
  // Streams made so far: a replacement rank's new streams free the old
  // ones, which a round of run() may still hold.
  uint64_t streamsMade_ = 0;
  // Kept for replacements (--elastic).
  std::unique_ptr<Program> program_;
  std::unique_ptr<CpuBinding> binding_;
  int restarts_ = 0;

  int exitCode_ = 0;
  bool failed_ = false;    // exitCode_ is a failure's; later ones are not reported
  bool stopping_ = false;  // the ranks were told to stop; killAt_ is set
  bool killed_ = false;    // SIGKILL sent
  int stopSignal_ = 0;     // what they were told to stop with
  int64_t timeoutAt_ = 0;  // steady-clock ns, 0: none
  int64_t killAt_ = 0;
};

}  // namespace gyre::run
