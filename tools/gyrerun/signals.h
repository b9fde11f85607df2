// gyrerun receives signals through a signalfd, never in a handler: the
// signals it forwards (and SIGCHLD) are blocked in every thread from the
// start, and a rank unblocks them again just before exec.
#pragma once

#include <signal.h>

#include <string>

namespace gyre::run {

// The signals passed on to every rank, in the order of the usage text.
inline constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// Those whose default action ends a program: receiving one starts stopping
// the job (with the grace period), and a second one kills it at once.
bool endsTheJob(int sig);

class SignalChannel {
 public:
  // Blocks the forwarded signals and SIGCHLD in the calling thread (threads
  // started afterwards inherit that) and ignores SIGPIPE. Call it before any
  // thread exists. originalMask() is the mask to give ranks back.
  SignalChannel();
  ~SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  int fd() const { return fd_; }
  const sigset_t& originalMask() const { return originalMask_; }
  // The next pending signal's number and sender, or 0 when none is pending.
  int next(pid_t* sender);

 private:
  int fd_ = -1;
  sigset_t originalMask_;
};

// "SIGKILL", or "signal 77" for one without a name.
std::string signalName(int sig);
// "exited with status 3", "was killed by signal 9 (SIGKILL)".
std::string describeStatus(int waitStatus);
// The shell's convention: the exit status, or 128 + the signal number.
int exitCodeOf(int waitStatus);

}  // namespace gyre::run
