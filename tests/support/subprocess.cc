#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

extern char** environ;

namespace gyre::test {

namespace {

// Variables of any launcher this test itself may run under, and gyre's own.
bool launcherVariable(const std::string& name) {
  static const char* const prefixes[] = {"GYRE_", "OMPI_", "PMIX_", "SLURM_"};
  static const char* const names[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",         "LOCAL_WORLD_SIZE",
                                      "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"};
  for (const char* p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

std::vector<std::string> childEnvironment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (!launcherVariable(name) && !extra.count(name)) env.push_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

int pidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

std::string Outcome::describe() const {
  std::string s = timedOut ? "TIMED OUT; " : "";
  s += signal ? "killed by signal " + std::to_string(signal) : "exit " + std::to_string(exitCode);
  return s + "\n--- stdout:\n" + out + "\n--- stderr:\n" + err;
}

std::vector<Outcome> runAll(const std::vector<Proc>& procs, int timeoutSec, const OnOutput& onOutput) {
  std::vector<Outcome> res(procs.size());
  struct Fds {
    int out = -1, err = -1, pidfd = -1;
  };
  std::vector<Fds> fds(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    std::vector<std::string> env = childEnvironment(procs[i].env);
    std::vector<char*> argv, envp;
    for (const std::string& a : procs[i].argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int o[2], e[2];
    if (pipe2(o, O_CLOEXEC) != 0) std::abort();
    if (procs[i].stderrIsTerminal) {
      if (openpty(&e[0], &e[1], nullptr, nullptr, nullptr) != 0) std::abort();
      fcntl(e[0], F_SETFD, FD_CLOEXEC);
      fcntl(e[1], F_SETFD, FD_CLOEXEC);
    } else if (pipe2(e, O_CLOEXEC) != 0) {
      std::abort();
    }
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);  // the program and whatever it forks: one group to kill
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(o[1], 1);
      dup2(e[1], 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(126);
    }
    setpgid(pid, pid);
    close(o[1]);
    close(e[1]);
    res[i].pid = pid;
    fds[i] = {o[0], e[0], pidfdOpen(pid)};
    if (fds[i].pidfd < 0) std::abort();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  for (;;) {
    std::vector<pollfd> p;
    std::vector<std::pair<size_t, int>> which;  // process, 0 out / 1 err / 2 exit
    for (size_t i = 0; i < procs.size(); ++i) {
      int three[] = {fds[i].out, fds[i].err, fds[i].pidfd};
      for (int k = 0; k < 3; ++k)
        if (three[k] >= 0) {
          p.push_back({three[k], POLLIN, 0});
          which.emplace_back(i, k);
        }
    }
    if (p.empty()) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      for (Outcome& r : res) r.timedOut = true;
      break;
    }
    poll(p.data(), p.size(), static_cast<int>(std::min<long long>(left.count(), 1000)));
    bool printed = false;
    for (size_t j = 0; j < p.size(); ++j) {
      if (!p[j].revents) continue;
      auto [i, k] = which[j];
      int* fd = k == 0 ? &fds[i].out : k == 1 ? &fds[i].err : &fds[i].pidfd;
      if (k == 2) {  // exited: reap now, the pipes may stay open a little longer
        int status = 0;
        waitpid(res[i].pid, &status, 0);
        if (WIFEXITED(status)) res[i].exitCode = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) res[i].signal = WTERMSIG(status);
        close(*fd);
        *fd = -1;
        continue;
      }
      char buf[65536];
      ssize_t n = read(*fd, buf, sizeof(buf));
      if (n > 0) {
        (k == 0 ? res[i].out : res[i].err).append(buf, static_cast<size_t>(n));
        printed = true;
      } else {  // end of file (a pipe) or EIO (a terminal whose last writer left)
        close(*fd);
        *fd = -1;
      }
    }
    if (printed && onOutput) onOutput(res);
  }
  for (size_t i = 0; i < procs.size(); ++i) {
    for (int fd : {fds[i].out, fds[i].err, fds[i].pidfd})
      if (fd >= 0) close(fd);
    if (fds[i].pidfd >= 0) {  // timed out before it exited
      kill(-res[i].pid, SIGKILL);
      waitpid(res[i].pid, nullptr, 0);
    }
  }
  return res;
}

Outcome run(const Proc& proc, int timeoutSec, const OnOutput& onOutput) {
  return runAll({proc}, timeoutSec, onOutput)[0];
}

}  // namespace gyre::test
