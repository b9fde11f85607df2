// Notices when a rank on this host exits or is stopped: a pidfd per local
// peer, opened as soon as its pid is known (the rendezvous table), readable
// once it exits; /proc for whether it is stopped (SIGSTOP, a debugger).
#pragma once

#include <vector>

namespace gyre::bootstrap {

class PeerLiveness {
 public:
  PeerLiveness() = default;
  ~PeerLiveness();
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  void watch(int rank, int pid);
  // True once a watched rank has exited (does not block); false for ranks
  // not watched. A pid that was already gone when watched counts as exited.
  bool isDead(int rank) const;
  // Every watched rank that has exited, in rank order.
  std::vector<int> dead() const;
  // True while a watched rank is stopped (state T or t in /proc): it will
  // make no progress until continued.
  bool isStopped(int rank) const;
  bool watches(int rank) const;

 private:
  struct Watched {
    int rank;
    int pid;
    int fd;  // -1: the pid was gone already
  };
  std::vector<Watched> watched_;
};

}  // namespace gyre::bootstrap
