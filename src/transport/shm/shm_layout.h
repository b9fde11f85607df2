// Memory layout of one rank's shared-memory segment. The segment belongs to
// its receiver: it holds one FIFO per local peer that sends to it, so data is
// written by the sender straight into memory the receiver reads.
//
//   SegmentHeader (doorbell, abort flag)
//   FIFO for local peer 0: FifoControl, then slots
//   FIFO for local peer 1: ...
//
// A slot is a 64-byte header line followed by the payload. Messages of at
// most kInlineBytes travel inside the header line itself, so a small message
// costs the receiver a single cache-line transfer. A device message's
// payload is in the receiver's device twin of the slot instead
// (DeviceSlotsInfo, device_slots.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/transport.h"

namespace gyre::transport::shm {

using transport::MessageTag;

constexpr uint32_t kSegmentMagic = 0x4759534d;  // "GYSM"
constexpr size_t kLine = 64;
constexpr size_t kInlineBytes = 24;

struct alignas(kLine) SegmentHeader {
  uint32_t magic;
  int32_t ownerRank;
  alignas(kLine) std::atomic<uint32_t> doorbell;  // bumped to wake the owner
  alignas(kLine) std::atomic<uint32_t> sleepers;  // >0 while the owner may sleep on doorbell
  alignas(kLine) std::atomic<uint32_t> aborted;   // set once when the owner's communicator fails
  int32_t abortOrigin;                            // the rank the failure started at
  char abortMessage[2048];  // long enough for a stall's account (the header fills a page anyway)
};
static_assert(sizeof(SegmentHeader) <= 4096);

// Where a receiver's device slots are (kDeviceMessages): slot k of the
// FIFO has a twin of slotBytes in the receiver's device memory, at offset
// + k * slotBytes in the allocation the CUDA IPC handle names, which the
// sender's device writes a device message's payload into. Written by the
// receiver once, `published` last; the sender reads it once it sees that.
struct DeviceSlotsInfo {
  std::atomic<uint32_t> published;
  uint32_t reserved;
  unsigned char handle[64];  // device::IpcHandle's bytes
  uint64_t offset;           // the first slot's offset in the allocation
  uint64_t allocationBytes;  // the allocation's length, which the slots must lie in
};

struct alignas(kLine) FifoControl {
  alignas(kLine) std::atomic<uint64_t> consumed;  // messages the receiver has released
  alignas(kLine) DeviceSlotsInfo deviceSlots;     // the receiver's, once it accepts device messages
};

// SlotHeader::bytes's top bit: the payload is in the receiver's device slot
// of the same index (FifoControl::deviceSlots), not in the host slot.
constexpr uint64_t kDevicePayload = uint64_t{1} << 63;

struct alignas(kLine) SlotHeader {
  std::atomic<uint64_t> seq;  // message number + 1 once the payload is complete
  uint64_t bytes;
  MessageTag tag;
  unsigned char inlinePayload[kInlineBytes];
};
static_assert(sizeof(SlotHeader) == kLine);

inline size_t headerBytes() { return (sizeof(SegmentHeader) + 4095) & ~size_t(4095); }
inline size_t slotStride(size_t slotBytes) { return kLine + slotBytes; }
inline size_t fifoBytes(size_t slotBytes, int slots) {
  return sizeof(FifoControl) + size_t(slots) * slotStride(slotBytes);
}
inline size_t segmentBytes(int fifos, size_t slotBytes, int slots) {
  return headerBytes() + size_t(fifos) * fifoBytes(slotBytes, slots);
}

// A view of one FIFO inside a mapped segment.
struct Fifo {
  FifoControl* control = nullptr;
  unsigned char* slots = nullptr;
  size_t slotBytes = 0;
  int nslots = 0;

  static Fifo at(void* segment, int index, size_t slotBytes, int nslots) {
    auto* base = static_cast<unsigned char*>(segment) + headerBytes() +
                 size_t(index) * fifoBytes(slotBytes, nslots);
    return Fifo{reinterpret_cast<FifoControl*>(base), base + sizeof(FifoControl), slotBytes,
                nslots};
  }
  SlotHeader* slot(uint64_t message) const {
    return reinterpret_cast<SlotHeader*>(slots +
                                         (message % uint64_t(nslots)) * slotStride(slotBytes));
  }
  static unsigned char* payload(SlotHeader* s, size_t bytes) {
    return bytes <= kInlineBytes ? s->inlinePayload : reinterpret_cast<unsigned char*>(s) + kLine;
  }
};

}  // namespace gyre::transport::shm
