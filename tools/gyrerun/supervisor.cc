#include "supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace gyre::run {

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t secondsToNs(double s) { return static_cast<int64_t>(std::llround(s * 1e9)); }

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

std::string ranks(int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

std::runtime_error systemError(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

// mkdir -p: the output directory may be several levels new.
void makeDirectories(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string part = dir.substr(0, slash);
    if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST)
      throw systemError("cannot create " + part);
    if (slash == std::string::npos) break;
  }
}

int openOutput(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw systemError("cannot open " + path);
  return fd;
}

}  // namespace

Supervisor::Supervisor(const Options& options, SignalChannel& signals, Environment env,
                       rlimit fileLimit)
    : options_(options), signals_(signals), env_(std::move(env)), fileLimit_(fileLimit) {}

void Supervisor::say(const std::string& line) {
  std::string s = "gyrerun: " + line + "\n";
  stderr_.write(s.data(), s.size());
}

int Supervisor::run() {
  if (options_.timeoutSec > 0) timeoutAt_ = nowNs() + secondsToNs(options_.timeoutSec);
  startAll();
  while (running_ > 0) {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<RankStream*> streams{nullptr};
    for (Rank& r : ranks_)
      for (RankStream* s : {r.out.get(), r.err.get()})
        if (s && s->open()) {
          fds.push_back({s->fd(), POLLIN, 0});
          streams.push_back(s);
        }
    if (::poll(fds.data(), fds.size(), pollTimeoutMs()) < 0 && errno != EINTR)
      throw systemError("poll");
    if (fds[0].revents) {
      const uint64_t made = streamsMade_;
      handleSignals();
      // A rank was replaced: its old streams are gone; poll the new set.
      if (streamsMade_ != made) continue;
    }
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents && streams[i]->open())
        streams[i]->pump();  // may have closed when its rank was reaped
    checkDeadlines();
  }
  // Every rank is gone; what they wrote last is still in the pipes.
  for (Rank& r : ranks_)
    for (RankStream* s : {r.out.get(), r.err.get()})
      if (s) s->drainAndClose();
  return exitCode_;
}

void Supervisor::startAll() {
  ranks_.resize(static_cast<size_t>(options_.nranks));
  program_ = std::make_unique<Program>(options_.command, env_.get("PATH"));
  const Program& program = *program_;
  int devNull = -1;
  try {
    if (options_.bind == Bind::Core) binding_ = std::make_unique<CpuBinding>();
    CpuBinding* binding = binding_.get();
    if (!options_.outputDir.empty()) makeDirectories(options_.outputDir);
    // Ranks read nothing: a rank in its own process group reading the
    // terminal would be stopped (SIGTTIN), and N readers of one stdin race.
    devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devNull < 0) throw systemError("cannot open /dev/null");
    for (int r = 0; r < options_.nranks; ++r) startRank(r, program, binding, devNull);
  } catch (const std::exception& e) {
    say(std::string(e.what()) + (running_ > 0 ? "; stopping the ranks already started" : ""));
    exitCode_ = 1;
    failed_ = true;
    if (running_ > 0) beginStop(SIGTERM);
  }
  if (devNull >= 0) ::close(devNull);
}

void Supervisor::startRank(int r, const Program& program, CpuBinding* binding, int devNull, bool replacement) {
  RankSetup setup;
  Environment env = env_;
  env.set("GYRE_RANK", std::to_string(r));
  if (replacement) env.set("GYRE_ELASTIC_REPLACEMENT", "1");
  env.set("GYRE_LOCAL_RANK", std::to_string(r));  // every rank is on this host
  setup.env = env.entries();
  setup.stdinFd = devNull;
  if (binding) {
    setup.cpus = binding->maskFor(r);
    setup.cpuBytes = binding->maskBytes();
  }
  setup.signalMask = signals_.originalMask();
  setup.fileLimit = fileLimit_;

  Rank& rank = ranks_[static_cast<size_t>(r)];
  int childOut = -1, childErr = -1;
  if (!options_.outputDir.empty()) {
    // A replacement's output goes beside its predecessor's, not over it.
    std::string base = options_.outputDir + "/rank-" + std::to_string(r) +
                       (replacement ? ".restart-" + std::to_string(restarts_) : std::string());
    childOut = openOutput(base + ".out");
    childErr = ::open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (childErr < 0) {
      int err = errno;
      ::close(childOut);
      errno = err;
      throw systemError("cannot open " + base + ".err");
    }
  } else {
    int p[2], q[2];
    if (pipe2(p, O_CLOEXEC) != 0) throw systemError("pipe");
    if (pipe2(q, O_CLOEXEC) != 0) {
      int err = errno;
      ::close(p[0]);
      ::close(p[1]);
      errno = err;
      throw systemError("pipe");
    }
    for (int fd : {p[0], q[0]}) fcntl(fd, F_SETFL, O_NONBLOCK);  // the relay reads what is there
    rank.out = std::make_unique<RankStream>(p[0], r, options_.prefix, &stdout_);
    rank.err = std::make_unique<RankStream>(q[0], r, options_.prefix, &stderr_);
    ++streamsMade_;
    childOut = p[1];
    childErr = q[1];
  }
  setup.stdoutFd = childOut;
  setup.stderrFd = childErr;
  pid_t pid = spawnRank(program, setup);
  int err = errno;
  ::close(childOut);  // the child has its copies; EOF comes when it (and its children) close them
  ::close(childErr);
  if (pid < 0) {
    errno = err;
    throw systemError("cannot start rank " + std::to_string(r) + " (fork)");
  }
  rank.pid = pid;
  rank.running = true;
  rankOfPid_[pid] = r;
  ++running_;
}

void Supervisor::handleSignals() {
  pid_t sender = 0;
  bool child = false;
  while (int sig = signals_.next(&sender)) {
    if (sig == SIGCHLD) {
      child = true;
    } else if (!endsTheJob(sig)) {
      signalRunning(sig);  // SIGUSR1/2: the ranks decide what they mean
    } else if (!stopping_) {
      beginStop(sig);  // passes sig itself on: the ranks see what gyrerun saw
    } else if (!killed_) {
      say("received " + signalName(sig) + " while stopping; killing " + ranks(running_) + " now");
      signalRunning(SIGKILL);
      killed_ = true;
    }
  }
  if (child) reapExited();  // SIGCHLDs coalesce: one may stand for many exits
}

void Supervisor::reapExited() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = rankOfPid_.find(pid);
    if (it != rankOfPid_.end()) onExit(it->second, status);
  }
}

void Supervisor::onExit(int r, int status) {
  Rank& rank = ranks_[static_cast<size_t>(r)];
  rank.running = false;
  --running_;
  // Its last words come before anything gyrerun says about it.
  if (rank.out) rank.out->drainAndClose();
  if (rank.err) rank.err->drainAndClose();
  if (exitCodeOf(status) == 0 || failed_) return;
  std::string what = "rank " + std::to_string(r) + " (pid " + std::to_string(rank.pid) + ") " +
                     describeStatus(status);
  if (options_.elasticMax > 0 && !stopping_ && absorbFailure(r, what)) return;
  failed_ = true;
  exitCode_ = exitCodeOf(status);
  if (!stopping_ && running_ > 0) {
    say(what + "; stopping the other ranks");
    beginStop(SIGTERM);
  } else {
    say(what);
  }
}

bool Supervisor::absorbFailure(int r, const std::string& what) {
  if (restarts_ < options_.maxRestarts) {
    ++restarts_;
    say(what + "; starting a replacement that joins the others (restart " + std::to_string(restarts_) + " of " +
        std::to_string(options_.maxRestarts) + ")");
    int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    try {
      if (devNull < 0) throw systemError("cannot open /dev/null");
      startRank(r, *program_, binding_.get(), devNull, true);
    } catch (const std::exception& e) {
      say(std::string("cannot start the replacement: ") + e.what());
      if (devNull >= 0) ::close(devNull);
      return running_ >= options_.elasticMin;
    }
    ::close(devNull);
    return true;
  }
  if (running_ >= options_.elasticMin) {
    say(what + "; no restarts left (--max-restarts " + std::to_string(options_.maxRestarts) + "): the other " +
        ranks(running_) + " go on");
    return true;
  }
  say(what + "; " + ranks(running_) + " left, fewer than --elastic's minimum " + std::to_string(options_.elasticMin));
  return false;
}

void Supervisor::beginStop(int sig) {
  stopping_ = true;
  stopSignal_ = sig;
  killAt_ = nowNs() + secondsToNs(options_.graceSec);
  signalRunning(sig);
}

void Supervisor::checkDeadlines() {
  const int64_t now = nowNs();
  if (timeoutAt_ && now >= timeoutAt_ && !stopping_ && running_ > 0) {
    timeoutAt_ = 0;
    say("the job did not finish within " + seconds(options_.timeoutSec) +
        " (--timeout); stopping " + ranks(running_));
    failed_ = true;  // ranks ended by the stop are not failures to report
    exitCode_ = 124;
    beginStop(SIGTERM);
  }
  if (stopping_ && !killed_ && now >= killAt_ && running_ > 0) {
    say(ranks(running_) + " still running " + seconds(options_.graceSec) + " after " +
        signalName(stopSignal_) + "; sending SIGKILL");
    signalRunning(SIGKILL);
    killed_ = true;
  }
}

int Supervisor::pollTimeoutMs() const {
  int64_t next = 0;
  if (timeoutAt_ && !stopping_) next = timeoutAt_;
  if (stopping_ && !killed_ && (!next || killAt_ < next)) next = killAt_;
  if (!next) return -1;
  int64_t ms = (next - nowNs() + 999'999) / 1'000'000;  // round up: waking early would spin
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
}

void Supervisor::signalRunning(int sig) {
  // To the rank's process group: what a terminal would do, so that helpers
  // a rank started (a shell's children, data loaders) get it too.
  // A rank that moved to a group of its own (setsid) still gets it itself.
  for (const Rank& r : ranks_)
    if (r.running && ::kill(-r.pid, sig) != 0) ::kill(r.pid, sig);
}

}  // namespace gyre::run
