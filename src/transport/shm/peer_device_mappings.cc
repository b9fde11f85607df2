#include "transport/shm/peer_device_mappings.h"

#include <algorithm>
#include <cstring>

namespace gyre::transport::shm {

namespace {
// Open handles kept per peer; past it the least recently used is closed (a
// program that keeps allocating new buffers would otherwise hold every
// freed one open in its peers).
constexpr size_t kMaxOpen = 64;
}  // namespace

PeerDeviceMappings::~PeerDeviceMappings() {
  for (const Entry& e : entries_) backend_->closeMemory(e.local);
}

void* PeerDeviceMappings::open(device::Backend& b, const device::IpcHandle& h) {
  ++uses_;
  for (Entry& e : entries_)
    if (std::memcmp(e.handle.bytes, h.bytes, sizeof h.bytes) == 0) {
      e.lastUse = uses_;
      return e.local;
    }
  if (backend_ && backend_ != &b) {  // the process's backend changed (tests): what it opened goes
    for (const Entry& e : entries_) backend_->closeMemory(e.local);
    entries_.clear();
  }
  backend_ = &b;
  if (entries_.size() >= kMaxOpen) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& x, const Entry& y) { return x.lastUse < y.lastUse; });
    b.closeMemory(oldest->local);
    entries_.erase(oldest);
  }
  void* local = b.openMemory(h);
  entries_.push_back(Entry{h, local, uses_});
  return local;
}

}  // namespace gyre::transport::shm
