#include "transport/shm/device_slots.h"

#include <cstring>
#include <string>

#include "base/error.h"
#include "transport/transport.h"

namespace gyre::transport::shm {

OwnDeviceSlots::~OwnDeviceSlots() {
  if (!base_) return;
  try {
    backend_->free(base_);
  } catch (const std::exception&) {
    // A device that failed keeps its memory: nothing more to do here.
  }
}

void OwnDeviceSlots::publish(int device, const Fifo& in, int peer) {
  if (base_) {
    if (device != device_)
      throw ConnectionError(gyreInvalidUsage, peer,
                            "shm: messages from rank " + std::to_string(peer) + " accepted on GPU " +
                                std::to_string(device) + ", where they already go to GPU " + std::to_string(device_));
    return;
  }
  device::Backend* b = device::backend();
  if (!b) throw ConnectionError(gyreInvalidArgument, peer, "shm: device messages accepted, but there is no GPU here");
  const size_t bytes = in.slotBytes * size_t(in.nslots);
  device::ExportedMemory e;
  void* p = nullptr;
  try {
    p = b->allocate(bytes, device);
    e = b->exportMemory(p);
  } catch (const Error& err) {
    if (p) b->free(p);
    throw ConnectionError(err.code(), peer, "shm: cannot make the device slots (" + std::to_string(bytes) +
                                                " bytes on GPU " + std::to_string(device) + ") for rank " +
                                                std::to_string(peer) + "'s messages: " + err.what());
  }
  DeviceSlotsInfo& info = in.control->deviceSlots;
  static_assert(sizeof info.handle == sizeof e.handle.bytes);
  std::memcpy(info.handle, e.handle.bytes, sizeof info.handle);
  info.offset = e.offset;
  info.allocationBytes = e.bytes;
  info.published.store(1, std::memory_order_release);
  backend_ = b;
  base_ = static_cast<unsigned char*>(p);
  device_ = device;
}

unsigned char* PeerDeviceSlots::slot(uint64_t message, const Fifo& out, int peer) {
  if (!base_) {
    const DeviceSlotsInfo& info = out.control->deviceSlots;
    if (info.published.load(std::memory_order_acquire) == 0) return nullptr;
    const std::string who = "rank " + std::to_string(peer);
    device::Backend* b = device::backend();
    if (!b)
      throw ConnectionError(gyreInvalidArgument, peer,
                            "shm: a message from device memory to " + who + ", but there is no GPU here");
    const uint64_t span = uint64_t(out.slotBytes) * uint64_t(out.nslots);
    if (info.offset > info.allocationBytes || span > info.allocationBytes - info.offset)
      throw ConnectionError(gyreRemoteError, peer,
                            who + "'s device slots (" + std::to_string(span) + " bytes at offset " +
                                std::to_string(info.offset) + ") lie outside the allocation of " +
                                std::to_string(info.allocationBytes) + " bytes it names: its shared memory is corrupt");
    device::IpcHandle h;
    std::memcpy(h.bytes, info.handle, sizeof h.bytes);
    try {
      base_ = static_cast<unsigned char*>(mappings_.open(*b, h)) + info.offset;
    } catch (const Error& err) {
      throw ConnectionError(err.code(), peer, "cannot open " + who + "'s device slots: " + err.what());
    }
  }
  return base_ + (message % uint64_t(out.nslots)) * out.slotBytes;
}

}  // namespace gyre::transport::shm
