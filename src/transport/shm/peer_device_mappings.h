// A local peer's device allocations, opened through CUDA IPC (the device
// backend's openMemory) on first use and kept for the calls that follow, as
// PeerMappings keeps its host allocations: a training loop hands the same
// buffers to every step, and opening a handle costs far more than a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "device/backend.h"

namespace gyre::transport::shm {

class PeerDeviceMappings {
 public:
  PeerDeviceMappings() = default;
  ~PeerDeviceMappings();
  PeerDeviceMappings(const PeerDeviceMappings&) = delete;
  PeerDeviceMappings& operator=(const PeerDeviceMappings&) = delete;

  // The start, in this process, of the peer's allocation that h names (a
  // device pointer); an Error from the backend when it cannot be opened.
  void* open(device::Backend& b, const device::IpcHandle& h);

 private:
  struct Entry {
    device::IpcHandle handle;
    void* local;
    uint64_t lastUse;
  };
  device::Backend* backend_ = nullptr;  // the one that opened the entries
  std::vector<Entry> entries_;
  uint64_t uses_ = 0;
};

}  // namespace gyre::transport::shm
