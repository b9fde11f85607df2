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

bool PeerLiveness::isDead(int rank) const {
  for (const Watched& w : watched_) {
    if (w.rank != rank) continue;
    pollfd p{w.fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  return false;
}

}  // namespace gyre::core
