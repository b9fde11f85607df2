// The device side of a shared-memory FIFO (kDeviceMessages): each slot of
// the FIFO from a peer has a twin in the receiver's device memory, which
// the sender's device writes a device message's payload into (through CUDA
// IPC) while the host slot carries only its header. The twins are the
// receiver's, as the FIFO is: what a peer sent before it left is still
// there to read. Releasing the host slot frees its twin too: one flow
// control for both, and the messages keep their one order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/backend.h"
#include "transport/shm/peer_device_mappings.h"
#include "transport/shm/shm_layout.h"

namespace gyre::transport::shm {

// The receiver's: its device slots for the messages from one peer, made
// and published in that FIFO's control block when it first accepts device
// messages.
class OwnDeviceSlots {
 public:
  OwnDeviceSlots() = default;
  ~OwnDeviceSlots();
  OwnDeviceSlots(const OwnDeviceSlots&) = delete;
  OwnDeviceSlots& operator=(const OwnDeviceSlots&) = delete;

  // Makes them on GPU `device` and tells the sender (idempotent); a
  // ConnectionError naming the peer when there is no GPU, the allocation
  // fails or a call asks for another GPU than the first.
  void publish(int device, const Fifo& in, int peer);
  // Slot `message`'s twin; null before publish.
  unsigned char* slot(uint64_t message, const Fifo& in) const {
    return base_ ? base_ + (message % uint64_t(in.nslots)) * in.slotBytes : nullptr;
  }

 private:
  device::Backend* backend_ = nullptr;
  unsigned char* base_ = nullptr;
  int device_ = -1;
};

// The sender's: the peer's device slots, opened once the peer has
// published them, and kept.
class PeerDeviceSlots {
 public:
  // Slot `message`'s twin (a device pointer), or null while the peer has
  // not published any; a ConnectionError naming the peer when they cannot
  // be opened or lie outside the allocation the peer named.
  unsigned char* slot(uint64_t message, const Fifo& out, int peer);

 private:
  // A mapping of its own, not the connection's cache of the peer's
  // buffers: that one closes its least recently used entry past 64, and
  // the slots, looked up once, must stay open while the connection lives.
  PeerDeviceMappings mappings_;
  unsigned char* base_ = nullptr;  // the first slot, once opened
};

}  // namespace gyre::transport::shm
