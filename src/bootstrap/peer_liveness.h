// Notices when a rank exits or is stopped. On this host: a pidfd per peer,
// opened as soon as its pid is known (the rendezvous table), readable once
// it exits; /proc for whether it is stopped (SIGSTOP, a debugger). On
// another host, where a transport has no other way to see it (UCX without
// its error handling): a connection to the peer's listener that carries
// nothing, which ends when the peer's process does.
#pragma once

#include <cstdint>
#include <vector>

#include "bootstrap/socket.h"

namespace gyre::bootstrap {

class PeerLiveness {
 public:
  PeerLiveness() = default;
  ~PeerLiveness();
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  void watch(int rank, int pid);
  // A rank on another host, through `connection` (made to its listener):
  // dead once the connection has been seen closed for kClosedGraceNs (what
  // the peer sent on other connections before it ended may still be on its
  // way; a peer whose communicator was destroyed closes it too).
  void watchConnection(int rank, Socket connection);
  static constexpr int64_t kClosedGraceNs = 250'000'000;
  // True once a watched rank has exited (does not block); false for ranks
  // not watched. A pid that was already gone when watched counts as exited.
  bool isDead(int rank) const;
  // Whether isDead waits kClosedGraceNs after rank is seen gone (a rank
  // watched through a connection): a caller with a grace of its own need
  // not wait out a second one.
  bool deathHasGrace(int rank) const;
  // Every watched rank that has exited, in rank order.
  std::vector<int> dead() const;
  // True while a watched rank is stopped (state T or t in /proc): it will
  // make no progress until continued.
  bool isStopped(int rank) const;
  bool watches(int rank) const;

 private:
  struct Watched {
    int rank;
    int pid;  // 0: watched through `connection`
    int fd;   // the pidfd; -1: the pid was gone already
    Socket connection;
    mutable int64_t closedSinceNs = -1;  // when `connection` was first seen closed
  };
  const Watched* find(int rank) const;  // null: not watched
  bool exited(const Watched& w) const;  // isDead's look at one watch
  std::vector<Watched> watched_;
};

}  // namespace gyre::bootstrap
