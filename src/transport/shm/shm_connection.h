// One local peer over shared memory: we write into the FIFO reserved for us
// in the peer's segment and read the FIFO reserved for the peer in ours.
#pragma once

#include <vector>

#include "transport/shm/device_slots.h"
#include "transport/shm/peer_device_mappings.h"
#include "transport/shm/peer_mappings.h"
#include "transport/shm/process_reader.h"
#include "transport/shm/shm_layout.h"
#include "transport/transport.h"

namespace gyre::transport {

class ShmTransport;

class ShmConnection final : public Connection {
 public:
  ShmConnection(ShmTransport& transport, int peer, int peerPid, shm::SegmentHeader* peerHeader,
                shm::Fifo out, shm::Fifo in, const MemoryCopy& memoryCopy, Capabilities caps)
      : Connection(caps),
        transport_(transport),
        peer_(peer),
        peerHeader_(peerHeader),
        out_(out),
        in_(in),
        mappings_(peerPid),
        reader_(peerPid, memoryCopy),
        copy_(memoryCopy) {}

  Transport& transport() override;
  int peer() const override { return peer_; }
  size_t maxMessageBytes() const override { return out_.slotBytes; }

  void* trySendBuffer(size_t bytes) override;
  void sendCommit(size_t bytes, const MessageTag& tag) override;
  void acceptDeviceMessages(int device) override { ownDeviceSlots_.publish(device, in_, peer_); }
  Room trySendDeviceBuffer(size_t bytes) override;
  Arrival tryRecvMessage(size_t bytes, const MessageTag& tag) override;
  bool trySendFrom(const void* src, size_t bytes, const MessageTag& tag) override;
  const void* tryRecvBuffer(size_t bytes, const MessageTag& tag) override;
  void recvRelease(size_t bytes) override;
  bool tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) override;
  // Registration is by address (nothing to pin); a range inside a
  // gyreMemAlloc buffer also names the allocation, so the peer can map it.
  RemoteKey registerMemory(const void* p, size_t bytes, MemoryType type) override;
  ProgressResult progress(ReadAhead) override { return {}; }
  // The next slot is published: the peer's message outlives the peer.
  bool hasUnreadData() const override;

 protected:
  void getImpl(void* dst, const RemoteKey& key, uint64_t address, size_t bytes) override;
  void putImpl(const RemoteKey& key, uint64_t address, const void* src, size_t bytes) override;
  const void* mapImpl(const RemoteKey& key, uint64_t address, size_t bytes) override;

 private:
  ShmTransport& transport_;
  int peer_;
  shm::SegmentHeader* peerHeader_;
  shm::Fifo out_;  // in the peer's segment
  shm::Fifo in_;   // in ours
  uint64_t sent_ = 0;
  uint64_t knownConsumed_ = 0;  // the peer's consumed count, as last read
  uint64_t received_ = 0;
  bool sendDevice_ = false;  // the room last given is the peer's device slot
  bool hasRoom();
  // The next message's slot once published and checked against what the
  // caller expects, else null.
  shm::SlotHeader* arrived(size_t bytes, const MessageTag& tag);
  // Our device slot for a message the header says is there, checked.
  const unsigned char* deviceSlotOf(uint64_t message) const;
  shm::OwnDeviceSlots ownDeviceSlots_;    // for the peer's messages
  shm::PeerDeviceSlots peerDeviceSlots_;  // the peer's, for ours
  // A device message read by the host (tryRecvBuffer): copied out by the
  // device, for message hostCopyOf_ - 1.
  std::vector<unsigned char> hostCopy_;
  uint64_t hostCopyOf_ = 0;
  RemoteKey registerDeviceMemory(const void* p, size_t bytes);
  unsigned char* deviceAddress(const RemoteKey& key, uint64_t address);
  shm::PeerMappings mappings_;
  shm::PeerDeviceMappings deviceMappings_;  // the peer's device allocations, opened through CUDA IPC
  shm::ProcessReader reader_;
  MemoryCopy copy_;
};

}  // namespace gyre::transport
