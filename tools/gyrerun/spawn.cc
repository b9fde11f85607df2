#include "spawn.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace gyre::run {

namespace {

// Errors after which execvp would try the next PATH directory.
bool tryNextDirectory(int err) {
  return err == ENOENT || err == ENOTDIR || err == EACCES || err == ESTALE || err == ENODEV ||
         err == ETIMEDOUT;
}

void writeAll(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

[[noreturn]] void childFail(const char* prefix, int err) {
  // strerrordesc_np is a table lookup (no locale, no allocation): safe here.
  const char* what = strerrordesc_np(err);
  writeAll(STDERR_FILENO, prefix, strlen(prefix));
  if (what) writeAll(STDERR_FILENO, what, strlen(what));
  writeAll(STDERR_FILENO, "\n", 1);
  _exit(127);
}

}  // namespace

Program::Program(const std::vector<std::string>& command, const std::string& searchPath)
    : args_(command), failurePrefix_("gyrerun: cannot run '" + command.at(0) + "': ") {
  const std::string& prog = args_[0];
  if (prog.find('/') != std::string::npos) {
    candidates_.push_back(prog);
    return;
  }
  std::string path = searchPath.empty() ? "/bin:/usr/bin" : searchPath;
  size_t start = 0;
  for (;;) {
    size_t colon = path.find(':', start);
    std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    candidates_.push_back((dir.empty() ? "." : dir) + "/" + prog);  // an empty entry means "."
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
}

pid_t spawnRank(const Program& program, const RankSetup& setup) {
  // Every pointer the child uses is built here, before fork.
  std::vector<char*> argv, envp, shArgv;
  for (const std::string& a : program.args_) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : setup.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // A file without #! that the kernel refuses (ENOEXEC) runs under /bin/sh,
  // as execvp does; [1] is filled in with the candidate path in the child.
  shArgv.push_back(const_cast<char*>("sh"));
  shArgv.push_back(nullptr);
  for (size_t i = 1; i < program.args_.size(); ++i) shArgv.push_back(argv[i]);
  shArgv.push_back(nullptr);
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid != 0) {
    // Also from the parent: signalling the group must work even before the
    // child gets to run (EACCES once it has exec'd is fine, it did it itself).
    if (pid > 0) setpgid(pid, pid);
    return pid;
  }

  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // gyrerun died before the line above
  if (dup2(setup.stdinFd, STDIN_FILENO) < 0 || dup2(setup.stdoutFd, STDOUT_FILENO) < 0 ||
      dup2(setup.stderrFd, STDERR_FILENO) < 0)
    _exit(127);  // nowhere to report it
  if (setup.cpus && sched_setaffinity(0, setup.cpuBytes, setup.cpus) != 0) {
    const char msg[] = "gyrerun: cannot bind this rank to its CPU: ";
    childFail(msg, errno);
  }
  setrlimit(RLIMIT_NOFILE, &setup.fileLimit);
  // Last, so that a SIGTERM sent while we got here is acted on now.
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, &setup.signalMask, nullptr);

  int err = ENOENT;
  bool sawAccess = false;
  for (const std::string& c : program.candidates_) {
    execve(c.c_str(), argv.data(), envp.data());
    err = errno;
    if (err == ENOEXEC) {
      shArgv[1] = const_cast<char*>(c.c_str());
      execve("/bin/sh", shArgv.data(), envp.data());
      err = errno;
      break;
    }
    if (err == EACCES) sawAccess = true;
    if (!tryNextDirectory(err)) break;
  }
  if (sawAccess && tryNextDirectory(err)) err = EACCES;
  childFail(program.failurePrefix_.c_str(), err);
}

Environment::Environment() {
  for (char** e = environ; e && *e; ++e) entries_.emplace_back(*e);
}

void Environment::set(const std::string& name, const std::string& value) {
  const std::string key = name + "=";
  for (std::string& e : entries_)
    if (e.compare(0, key.size(), key) == 0) {
      e = key + value;
      return;
    }
  entries_.push_back(key + value);
}

std::string Environment::get(const std::string& name) const {
  const std::string key = name + "=";
  for (const std::string& e : entries_)
    if (e.compare(0, key.size(), key) == 0) return e.substr(key.size());
  return "";
}

std::vector<std::string> Environment::entries() const { return entries_; }

}  // namespace gyre::run
