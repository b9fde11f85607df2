// The memory layer: a rank registers a range of its memory for a peer and
// sends the peer the key; the peer then reads (get) or writes (put) within
// the range, or maps it, without the owner taking part, where the transport
// can (capabilities.h: kPeerRead, kPeerWrite, kPeerMap). Shared memory does
// it with the kernel's cross-process copies and with mapped gyreMemAlloc
// buffers, and a GPU's memory through CUDA IPC; RDMA transports with memory
// regions and rkeys.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre::transport {

// What kind of memory a key names; a transport refuses kinds it cannot
// reach.
enum class MemoryType : uint8_t {
  None = 0,    // an empty key: nothing registered
  Host = 1,
  Device = 2,  // a GPU's memory (the device backend's): mapped, it is a device pointer
};
inline const char* memoryTypeName(MemoryType t) {
  return t == MemoryType::Host ? "host" : t == MemoryType::Device ? "device" : "none";
}

// Names a registered range to one peer. Plain bytes: it travels in a
// message. Sized: an access outside [address, address + bytes) is refused
// with an error naming both ranges, never carried out. Typed. The handle is
// the issuing transport's own (shared memory: the gyreMemAlloc allocation
// holding the range, so a peer can map it, zero for ordinary memory; for
// device memory the CUDA IPC handle of its allocation and the range's
// offset in it).
struct RemoteKey {
  uint64_t address = 0;  // the range's start, in its owner's address space
  uint64_t bytes = 0;    // its length
  MemoryType type = MemoryType::None;
  uint8_t reserved[7] = {};
  uint64_t handle[9] = {};
};
static_assert(sizeof(RemoteKey) == 96);

}  // namespace gyre::transport
