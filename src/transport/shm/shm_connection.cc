#include "transport/shm/shm_connection.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "device/backend.h"
#include "transport/shm/shared_allocation.h"
#include "transport/shm/shm_checks.h"
#include "transport/shm/shm_transport.h"

namespace gyre::transport {

Transport& ShmConnection::transport() { return transport_; }

bool ShmConnection::hasRoom() {
  if (sent_ - knownConsumed_ >= uint64_t(out_.nslots)) {
    // Re-read the peer's progress only when our cached view says full, so the
    // common case touches no line the peer writes.
    knownConsumed_ = out_.control->consumed.load(std::memory_order_acquire);
    if (sent_ - knownConsumed_ >= uint64_t(out_.nslots)) return false;
  }
  return true;
}

void* ShmConnection::trySendBuffer(size_t bytes) {
  if (!hasRoom()) return nullptr;
  sendDevice_ = false;
  return shm::Fifo::payload(out_.slot(sent_), bytes);
}

Connection::Room ShmConnection::trySendDeviceBuffer(size_t bytes) {
  if (!hasRoom()) return {};
  unsigned char* twin = bytes ? peerDeviceSlots_.slot(sent_, out_, peer_) : nullptr;
  if (!twin) return {trySendBuffer(bytes), MemoryType::Host};  // (a notice, or the peer takes host messages)
  if (bytes > out_.slotBytes)
    throw ConnectionError(gyreInternalError, peer_,
                          "shm: a device message of " + std::to_string(bytes) + " bytes, larger than a slot's " +
                              std::to_string(out_.slotBytes));
  sendDevice_ = true;
  return {twin, MemoryType::Device};
}

void ShmConnection::sendCommit(size_t bytes, const MessageTag& tag) {
  shm::SlotHeader* s = out_.slot(sent_);
  s->bytes = bytes | (sendDevice_ ? shm::kDevicePayload : 0);
  s->tag = tag;
  s->seq.store(sent_ + 1, std::memory_order_release);
  ++sent_;
  sendDevice_ = false;
  ShmTransport::ringIfSleeping(peerHeader_);
}

bool ShmConnection::trySendFrom(const void* src, size_t bytes, const MessageTag& tag) {
  void* dst = trySendBuffer(bytes);
  if (!dst) return false;
  copy_.copy(dst, src, bytes, false);
  sendCommit(bytes, tag);
  return true;
}

shm::SlotHeader* ShmConnection::arrived(size_t bytes, const MessageTag& tag) {
  shm::SlotHeader* s = in_.slot(received_);
  const uint64_t seq = s->seq.load(std::memory_order_acquire);
  if (seq != received_ + 1) {
    if (shm::slotState(seq, received_, in_.nslots) == shm::SlotState::Corrupt)
      throw ConnectionError(gyreRemoteError, peer_,
                            "shm: rank " + std::to_string(peer_) + "'s slot for message " +
                                std::to_string(received_) + " holds sequence word " + std::to_string(seq) +
                                ", which no sender writes there: its shared memory is corrupt");
    return nullptr;
  }
  shm::checkSlotMessage(s->bytes & ~shm::kDevicePayload, s->tag, bytes, tag, peer_);
  return s;
}

const unsigned char* ShmConnection::deviceSlotOf(uint64_t message) const {
  const unsigned char* twin = ownDeviceSlots_.slot(message, in_);
  if (!twin)
    throw ConnectionError(gyreRemoteError, peer_,
                          "shm: rank " + std::to_string(peer_) + "'s message " + std::to_string(message) +
                              " says it lies in our device memory, which we never offered: its shared memory is "
                              "corrupt");
  return twin;
}

const void* ShmConnection::tryRecvBuffer(size_t bytes, const MessageTag& tag) {
  shm::SlotHeader* s = arrived(bytes, tag);
  if (!s) return nullptr;
  if (!(s->bytes & shm::kDevicePayload)) return shm::Fifo::payload(s, bytes);
  // The peer's device wrote it into our device slot (an earlier call of
  // ours accepted device messages; this one is the host's): the device
  // copies it out once, whatever the retries.
  if (hostCopyOf_ != received_ + 1) {
    const unsigned char* twin = deviceSlotOf(received_);
    hostCopy_.resize(std::max(hostCopy_.size(), bytes));
    try {
      device::backend()->copy(hostCopy_.data(), twin, bytes);
    } catch (const Error& err) {
      throw ConnectionError(err.code(), peer_, "cannot read rank " + std::to_string(peer_) +
                                                   "'s message out of device memory: " + err.what());
    }
    hostCopyOf_ = received_ + 1;
  }
  return hostCopy_.data();
}

Connection::Arrival ShmConnection::tryRecvMessage(size_t bytes, const MessageTag& tag) {
  shm::SlotHeader* s = arrived(bytes, tag);
  if (!s) return {};
  if (!(s->bytes & shm::kDevicePayload)) return {shm::Fifo::payload(s, bytes), MemoryType::Host};
  return {deviceSlotOf(received_), MemoryType::Device};
}

bool ShmConnection::hasUnreadData() const {
  return in_.slot(received_)->seq.load(std::memory_order_acquire) == received_ + 1;
}

void ShmConnection::recvRelease(size_t) {
  ++received_;
  in_.control->consumed.store(received_, std::memory_order_release);
  ShmTransport::ringIfSleeping(peerHeader_);
}

bool ShmConnection::tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) {
  const void* src = tryRecvBuffer(bytes, tag);
  if (!src) return false;
  copy_.copy(dst, src, bytes, false);
  recvRelease(bytes);
  return true;
}

// A device key's handle: the allocation's CUDA IPC handle, then the range's
// offset in the allocation.
constexpr size_t kDeviceOffsetWord = sizeof(device::IpcHandle) / sizeof(uint64_t);
static_assert(kDeviceOffsetWord < sizeof(RemoteKey::handle) / sizeof(uint64_t));

RemoteKey ShmConnection::registerMemory(const void* p, size_t bytes, MemoryType type) {
  if (type == MemoryType::Device) return registerDeviceMemory(p, bytes);
  if (type != MemoryType::Host)
    throw ConnectionError(gyreInvalidArgument, peer_,
                          std::string("shm cannot register ") + memoryTypeName(type) + " memory");
  RemoteKey k = Connection::registerMemory(p, bytes, type);
  const shm::SharedMemoryKey shared = shm::sharedKeyFor(p);
  std::memcpy(k.handle, &shared, sizeof shared);
  return k;
}

RemoteKey ShmConnection::registerDeviceMemory(const void* p, size_t bytes) {
  device::Backend* b = device::backend();
  if (!b) throw ConnectionError(gyreInvalidArgument, peer_, "shm: device memory registered, but there is no GPU here");
  device::ExportedMemory e;
  try {
    e = b->exportMemory(p);
  } catch (const Error& err) {
    throw ConnectionError(err.code(), peer_, std::string("shm cannot share a device buffer with rank ") +
                                                 std::to_string(peer_) + ": " + err.what());
  }
  if (e.offset > e.bytes || bytes > e.bytes - e.offset)
    throw ConnectionError(gyreInvalidArgument, peer_,
                          "shm: a device range of " + std::to_string(bytes) + " bytes at offset " +
                              std::to_string(e.offset) + " runs past its allocation's " + std::to_string(e.bytes) +
                              " bytes");
  RemoteKey k;
  k.address = reinterpret_cast<uint64_t>(p);
  k.bytes = bytes;
  k.type = MemoryType::Device;
  std::memcpy(k.handle, e.handle.bytes, sizeof e.handle.bytes);
  k.handle[kDeviceOffsetWord] = e.offset;
  return k;
}

// The peer's device range behind key, at address, in this process.
unsigned char* ShmConnection::deviceAddress(const RemoteKey& key, uint64_t address) {
  device::Backend* b = device::backend();
  if (!b) throw ConnectionError(gyreInvalidArgument, peer_, "rank " + std::to_string(peer_) +
                                                                " offered device memory, but there is no GPU here");
  device::IpcHandle h;
  std::memcpy(h.bytes, key.handle, sizeof h.bytes);
  try {
    auto* base = static_cast<unsigned char*>(deviceMappings_.open(*b, h));
    return base + key.handle[kDeviceOffsetWord] + (address - key.address);
  } catch (const Error& err) {
    throw ConnectionError(err.code(), peer_, "cannot open rank " + std::to_string(peer_) +
                                                 "'s device memory: " + err.what());
  }
}

namespace {
[[noreturn]] void throwAccessError(int err, int peer, const char* what, size_t bytes) {
  if (err == ESRCH) throw ConnectionError(gyreRemoteError, peer, "rank " + std::to_string(peer) + " exited");
  throw ConnectionError(gyreInvalidUsage, peer,
                        std::string("cannot ") + what + " " + std::to_string(bytes) + " bytes of rank " +
                            std::to_string(peer) + "'s buffer (" + std::strerror(err) +
                            "): is its buffer as large as this call needs?");
}
}  // namespace

// Device keys: a copy by the device (the backend's, complete on return)
// between the peer's opened allocation and ours.
void ShmConnection::getImpl(void* dst, const RemoteKey& key, uint64_t address, size_t bytes) {
  if (key.type == MemoryType::Device) return device::backend()->copy(dst, deviceAddress(key, address), bytes);
  if (const int err = reader_.read(dst, address, bytes)) throwAccessError(err, peer_, "read", bytes);
}

void ShmConnection::putImpl(const RemoteKey& key, uint64_t address, const void* src, size_t bytes) {
  if (key.type == MemoryType::Device) return device::backend()->copy(deviceAddress(key, address), src, bytes);
  if (const int err = reader_.write(address, src, bytes)) throwAccessError(err, peer_, "write", bytes);
}

const void* ShmConnection::mapImpl(const RemoteKey& key, uint64_t address, size_t bytes) {
  if (key.type == MemoryType::Device) return deviceAddress(key, address);  // a device pointer
  shm::SharedMemoryKey shared;
  std::memcpy(&shared, key.handle, sizeof shared);
  return mappings_.map(address, bytes, shared);
}

}  // namespace gyre::transport
