#include "tests/support/multiprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace gyre::test {

std::string RunOutcome::describe() const {
  std::string s = timedOut ? "the run TIMED OUT (ranks killed).\n" : "";
  for (const RankOutcome& r : ranks) {
    s += "rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + "): ";
    s += r.signal ? "killed by signal " + std::to_string(r.signal)
                  : "exit " + std::to_string(r.exitCode);
    if (!r.output.empty()) {
      std::string out = r.output.size() > 4000 ? r.output.substr(0, 4000) + "...(cut)" : r.output;
      s += "\n  | " + out;
      for (size_t p = s.find('\n', s.size() - out.size());
           p != std::string::npos && p + 1 < s.size(); p = s.find('\n', p + 4))
        s.insert(p + 1, "  | ");
    }
    s += "\n";
  }
  return s;
}

bool RunOutcome::allSucceeded() const {
  if (timedOut) return false;
  for (const RankOutcome& r : ranks)
    if (r.signal || r.exitCode != 0) return false;
  return true;
}

RunOutcome runRanks(int nranks, const std::function<int(int, int, const gyreUniqueId&)>& body,
                    const RunOptions& options) {
  RunOutcome out;
  std::fflush(stdout);
  std::fflush(stderr);
  // The ranks are forked before the parent creates the unique id (and with it
  // the root's thread): forking a process while another of its threads may
  // hold an allocator lock is unsafe under the sanitizers' allocators. The
  // id reaches each rank through a pipe; the parent stays the root.
  std::vector<int> pipes(static_cast<size_t>(nranks), -1), idPipes(static_cast<size_t>(nranks), -1);
  out.ranks.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    int fds[2], idFds[2];
    if (pipe2(fds, O_CLOEXEC) != 0 || pipe2(idFds, O_CLOEXEC) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      setvbuf(stdout, nullptr, _IOLBF, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test process
      close(idFds[1]);
      gyreUniqueId id;
      size_t got = 0;
      while (got < sizeof(id)) {
        ssize_t n = read(idFds[0], reinterpret_cast<char*>(&id) + got, sizeof(id) - got);
        if (n <= 0) _exit(99);  // the parent could not make an id
        got += static_cast<size_t>(n);
      }
      int code = body(r, nranks, id);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    close(fds[1]);
    close(idFds[0]);
    pipes[r] = fds[0];
    idPipes[r] = idFds[1];
    out.ranks[r].rank = r;
    out.ranks[r].pid = pid;
    if (options.onStarted) options.onStarted(r, pid);
  }
  gyreUniqueId id;
  const bool haveId = gyreGetUniqueId(&id) == gyreSuccess;
  if (!haveId) std::fprintf(stderr, "gyreGetUniqueId: %s\n", gyreGetLastError(nullptr));
  for (int fd : idPipes) {
    if (haveId && write(fd, &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) std::abort();
    close(fd);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeoutSec);
  int open = nranks;
  while (open > 0) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int r = 0; r < nranks; ++r)
      if (pipes[r] >= 0) {
        fds.push_back({pipes[r], POLLIN, 0});
        which.push_back(r);
      }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      out.timedOut = true;
      break;
    }
    poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 1000)));
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        out.ranks[which[i]].output.append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        pipes[which[i]] = -1;
        --open;
      }
    }
  }
  if (out.timedOut)
    for (const RankOutcome& r : out.ranks) kill(r.pid, SIGKILL);
  for (int r = 0; r < nranks; ++r) {
    if (pipes[r] >= 0) close(pipes[r]);
    int status = 0;
    // Pipes close at exit; reap with a bound anyway (a rank may close them early).
    for (;;) {
      pid_t w = waitpid(out.ranks[r].pid, &status, out.timedOut ? 0 : WNOHANG);
      if (w == out.ranks[r].pid) break;
      if (std::chrono::steady_clock::now() > deadline) {
        out.timedOut = true;
        kill(out.ranks[r].pid, SIGKILL);
        waitpid(out.ranks[r].pid, &status, 0);
        break;
      }
      usleep(1000);  // reaping a process that closed its pipes; not waiting on a peer
    }
    if (WIFEXITED(status)) out.ranks[r].exitCode = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) out.ranks[r].signal = WTERMSIG(status);
  }
  return out;
}

void Checker::fail(const std::string& what) {
  ++failures_;
  if (failures_ <= 20) std::printf("rank %d: FAIL %s\n", rank_, what.c_str());
  if (failures_ == 20) std::printf("rank %d: (further failures not shown)\n", rank_);
}

bool Checker::expectOk(gyreResult_t r, const std::string& what) {
  if (r == gyreSuccess) return true;
  fail(what + ": " + gyreGetErrorString(r) + ": " + gyreGetLastError(nullptr));
  return false;
}

gyreComm_t initRank(int rank, int nranks, const gyreUniqueId& id, const char* transport,
                    int timeoutMs) {
  gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
  cfg.transport = transport;
  cfg.timeoutMs = timeoutMs;
  // "shm_ucx": two hosts (ranks by parity), shared memory within each and
  // UCX between them (GYRE_NET_TRANSPORT), in this rank's process only.
  // "shm_ucx_none": the same with UCX over its tcp without UCX's error
  // handling (GYRE_UCX_ERROR_MODE=none), as between real hosts without RDMA.
  if (transport && (std::string(transport) == "shm_ucx" || std::string(transport) == "shm_ucx_none")) {
    if (std::string(transport) == "shm_ucx_none") {
      setenv("GYRE_UCX_ERROR_MODE", "none", 1);
      setenv("UCX_TLS", "tcp,self", 1);
    }
    cfg.transport = "auto";
    setenv("GYRE_NET_TRANSPORT", "ucx", 1);
    setenv("GYRE_HOSTID", rank % 2 ? "host-odd" : "host-even", 1);
  }
  // "ucx_tcp": UCX over its tcp only, without UCX's error handling
  // (GYRE_UCX_ERROR_MODE=none: its large messages go by zero-copy
  // rendezvous, as by default without RDMA); "ucx_peer": UCX reporting dead
  // peers (GYRE_UCX_ERROR_MODE=peer, which keeps UCX off its shared memory).
  if (transport && (std::string(transport) == "ucx_tcp" || std::string(transport) == "ucx_peer")) {
    cfg.transport = "ucx";
    if (std::string(transport) == "ucx_tcp") {
      setenv("UCX_TLS", "tcp,self", 1);
      setenv("GYRE_UCX_ERROR_MODE", "none", 1);
    } else {
      setenv("GYRE_UCX_ERROR_MODE", "peer", 1);
    }
  }
  // "net": the test build of gyre's socket plugin (in this rank's process only).
  if (transport && std::string(transport) == "net") setenv("GYRE_NET_PLUGIN", GYRE_TEST_NET_PLUGIN, 1);
  gyreComm_t comm = nullptr;
  if (gyreCommInitRankConfig(&comm, nranks, id, rank, &cfg) != gyreSuccess) {
    std::printf("rank %d: init failed: %s\n", rank, gyreGetLastError(nullptr));
    return nullptr;
  }
  return comm;
}

}  // namespace gyre::test
