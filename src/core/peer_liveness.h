// Notices when a rank on this host exits: a pidfd per local peer, opened
// while the peer is certainly alive (during init), readable once it exits.
#pragma once

#include <optional>
#include <vector>

namespace gyre::core {

class PeerLiveness {
 public:
  PeerLiveness() = default;
  ~PeerLiveness();
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  void watch(int rank, int pid);
  // True once a watched rank has exited (does not block); false for ranks
  // not watched.
  bool isDead(int rank) const;

 private:
  struct Watched {
    int rank;
    int fd;
  };
  std::vector<Watched> watched_;
};

}  // namespace gyre::core
