// A local peer's shared allocations (shared_allocation.h), mapped read-only
// into this process on first use and kept for the calls that follow: a
// training loop hands the same buffers to every step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/shm/shared_allocation.h"

namespace gyre::transport::shm {

class PeerMappings {
 public:
  explicit PeerMappings(int peerPid) : pid_(peerPid) {}
  ~PeerMappings();
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  // The peer's [address, +bytes) in this process, or nullptr when the key is
  // empty, does not cover the range, or the allocation cannot be opened (the
  // caller then reads through the kernel).
  const void* map(uint64_t address, size_t bytes, const SharedMemoryKey& key);

 private:
  struct Entry {
    SharedMemoryKey key;
    const unsigned char* local;
    uint64_t lastUse;
  };
  const Entry* open(const SharedMemoryKey& key);
  void drop(size_t index);

  int pid_;
  std::vector<Entry> entries_;
  std::vector<uint64_t> refused_;  // ids that could not be opened: not retried
  uint64_t uses_ = 0;
};

}  // namespace gyre::transport::shm
