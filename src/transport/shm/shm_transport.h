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
  // Single-copy reads (kPeerRead) only when this rank can read every local
  // peer's memory directly and every local peer can read this rank's: all
  // local ranks agree.
  Capabilities capabilities() const override {
    return kPeerMap | kReportsFailures | kSameHostOnly | kDeviceMessages | (canReadPeers_ ? Capabilities{kPeerRead | kPeerWrite} : 0u);
  }
  // The local peers given to create(), whose segments it mapped then.
  bool canConnect(int peer, std::string* whyNot) const override;
  // Every connection was made by create(); this checks the peers have one.
  void connect(std::span<const int> peers, Deadline deadline) override;
  // The connection to a local peer (nullptr for a rank on another host).
  Connection* connection(int peer) override;
  int64_t spinNs() const override { return options_.spinNs; }
  bool block(int64_t timeoutNs, FunctionRef<bool()> ready) override;
  bool hasPendingOutput() const override { return false; }
  // Marks this rank's segment as failed and wakes every local peer.
  void report(int origin, const std::string& sentence) override;
  // Nothing to stop: a local peer learns of the failure from the flag.
  void shutdown() override {}
  // Wakes this rank's own waiter.
  void interrupt() override;
  // A local peer's failure, if one has been raised.
  std::optional<PeerReport> peerReport() const override;

  // Rings a rank's doorbell if it may be asleep. Called after every publish.
  static void ringIfSleeping(shm::SegmentHeader* header) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (header->sleepers.load(std::memory_order_relaxed)) ring(header);
  }
  static void ring(shm::SegmentHeader* header);

 private:
  ShmTransport() = default;
  ShmConnection* find(int peer) const;

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
