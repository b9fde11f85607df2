#include "bootstrap/peer_liveness.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "base/log.h"

namespace gyre::bootstrap {

PeerLiveness::~PeerLiveness() {
  for (const Watched& w : watched_)
    if (w.fd >= 0) ::close(w.fd);
}

void PeerLiveness::watch(int rank, int pid) {
  if (watches(rank)) return;
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) {  // it announced itself in the rendezvous and is gone now
      watched_.push_back({rank, pid, -1, Socket(), -1});
      return;
    }
    // Another PID namespace, or an old kernel: fall back to connection
    // errors and timeouts for this peer.
    GYRE_INFO("cannot watch rank %d (pid %d) for exit; relying on timeouts", rank, pid);
    return;
  }
  watched_.push_back({rank, pid, fd, Socket(), -1});
}

void PeerLiveness::watchConnection(int rank, Socket connection) {
  if (watches(rank)) return;
  watched_.push_back({rank, 0, -1, std::move(connection), -1});
}

const PeerLiveness::Watched* PeerLiveness::find(int rank) const {
  for (const Watched& w : watched_)
    if (w.rank == rank) return &w;
  return nullptr;
}

bool PeerLiveness::watches(int rank) const { return find(rank) != nullptr; }

bool PeerLiveness::exited(const Watched& w) const {
  if (w.connection.valid()) {
    // Nothing is ever sent on it: readable means closed or reset.
    if (w.closedSinceNs < 0 && w.connection.peerClosed()) w.closedSinceNs = nowNs();
    return w.closedSinceNs >= 0 && nowNs() - w.closedSinceNs >= kClosedGraceNs;
  }
  if (w.fd < 0) return true;
  pollfd p{w.fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool PeerLiveness::isDead(int rank) const {
  const Watched* w = find(rank);
  return w && exited(*w);
}

bool PeerLiveness::deathHasGrace(int rank) const {
  const Watched* w = find(rank);
  return w && w->connection.valid();
}

std::vector<int> PeerLiveness::dead() const {
  std::vector<int> out;
  for (const Watched& w : watched_)
    if (exited(w)) out.push_back(w.rank);
  return out;
}

bool PeerLiveness::isStopped(int rank) const {
  const Watched* w = find(rank);
  if (!w || w->fd < 0) return false;  // (a peer on another host: unknown)
  // /proc/<pid>/stat: "pid (comm) S ...": the state follows the last ')'
  // (comm may itself hold parentheses).
  char path[64], buf[512];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", w->pid);
  FILE* f = std::fopen(path, "re");
  if (!f) return false;
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
}

}  // namespace gyre::bootstrap
