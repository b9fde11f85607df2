// Shared-memory transport between ranks on one host. Each rank owns a
// segment with a FIFO per local peer; senders write into the receiver's
// segment. Waiting spins briefly, then sleeps on a futex "doorbell" in the
// waiter's own segment that peers ring only when it is asleep.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/memory_copy.h"
#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_segment.h"
#include "transport/transport.h"

namespace gyre::transport {

class ShmConnection;

class ShmTransport final : public Transport {
 public:
  struct Options {
    size_t slotBytes = 256 * 1024;
    int slots = 8;
    int64_t spinNs = 50'000;
    MemoryCopy memoryCopy;
  };

  // Collective over every rank of the bootstrap; localRanks (sorted, this
  // rank included) are the ones sharing memory with this rank.
  static std::unique_ptr<ShmTransport> create(bootstrap::Bootstrap& bootstrap,
                                              const std::vector<int>& localRanks,
                                              const Options& options, Deadline deadline);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  int64_t spinNs() const override { return options_.spinNs; }
  bool block(int64_t timeoutNs, FunctionRef<bool()> ready) override;
  bool hasPendingOutput() const override { return false; }

  // The connection to a local peer (nullptr for a rank on another host).
  Connection* connection(int peer);

  // Marks this rank's segment as failed and wakes every local peer.
  void raiseAbort(int originRank, const std::string& message);
  // A local peer's failure, if any has been raised: (origin rank, message).
  std::optional<std::pair<int, std::string>> peerAbort() const;
  // Wakes this rank's own waiter (an abort from another thread).
  void wakeSelf();

  // True when this rank can read every local peer's memory directly (and
  // every local peer can read this rank's): all local ranks agree.
  bool canReadPeers() const { return canReadPeers_; }

  // Rings a rank's doorbell if it may be asleep. Called after every publish.
  static void ringIfSleeping(shm::SegmentHeader* header) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (header->sleepers.load(std::memory_order_relaxed)) ring(header);
  }
  static void ring(shm::SegmentHeader* header);

 private:
  ShmTransport() = default;

  Options options_;
  int rank_ = 0;
  ShmSegment own_;
  std::vector<ShmSegment> peerSegments_;  // by local index (own slot empty)
  std::vector<int> localRanks_;
  std::vector<std::unique_ptr<ShmConnection>> connections_;  // by local index
  std::vector<int> localIndexOf_;                            // by rank, -1 if remote
  bool canReadPeers_ = false;
};

}  // namespace gyre::transport
