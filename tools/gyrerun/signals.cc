#include "signals.h"

#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace gyre::run {

bool endsTheJob(int sig) {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

SignalChannel::SignalChannel() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwardedSignals) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  if (pthread_sigmask(SIG_BLOCK, &set, &originalMask_) != 0)
    throw std::runtime_error("cannot block signals");
  // A reader of gyrerun's output that goes away must not kill the job; the
  // relay sees EPIPE instead. Ranks get the default back before exec.
  signal(SIGPIPE, SIG_IGN);
  fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd_ < 0) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
}

SignalChannel::~SignalChannel() {
  if (fd_ >= 0) ::close(fd_);
}

int SignalChannel::next(pid_t* sender) {
  signalfd_siginfo info;
  for (;;) {
    ssize_t n = ::read(fd_, &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) {
      *sender = static_cast<pid_t>(info.ssi_pid);
      return static_cast<int>(info.ssi_signo);
    }
    if (n < 0 && errno == EINTR) continue;
    return 0;  // EAGAIN: nothing pending
  }
}

std::string signalName(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + signalName(sig) +
           (WCOREDUMP(status) ? ", core dumped" : "") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace gyre::run
