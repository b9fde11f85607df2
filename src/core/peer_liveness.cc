#include "core/peer_liveness.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"

namespace gyre::core {

PeerLiveness::~PeerLiveness() {
  for (const Watched& w : watched_) ::close(w.fd);
}

void PeerLiveness::watch(int rank, int pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    // Another PID namespace, or an old kernel: fall back to connection
    // errors and timeouts for this peer.
    GYRE_INFO("cannot watch rank %d (pid %d) for exit; relying on timeouts", rank, pid);
    return;
  }
  watched_.push_back({rank, fd});
}

std::optional<int> PeerLiveness::firstDead() const {
  if (watched_.empty()) return std::nullopt;
  std::vector<pollfd> fds;
  fds.reserve(watched_.size());
  for (const Watched& w : watched_) fds.push_back({w.fd, POLLIN, 0});
  if (::poll(fds.data(), fds.size(), 0) <= 0) return std::nullopt;
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents) return watched_[i].rank;
  return std::nullopt;
}

}  // namespace gyre::core
