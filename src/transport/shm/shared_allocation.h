// Communication buffers that local peers can map (gyreMemAlloc).
//
// A peer reads ordinary memory through the kernel (process_vm_readv), which
// copies one 4 KiB page at a time with ordinary stores: measured here at
// 3.9 GB/s against 7.5 for a user-space streaming copy. Memory from
// allocateShared lives in a memfd instead, which a local peer opens through
// /proc/<pid>/fd (the same permission process_vm_readv needs), maps once and
// then copies from at memory speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/transport.h"

namespace gyre::transport::shm {

// Names memory a local peer may map instead of reading it through the
// kernel: the owner's allocation (an id unique to it, its address range in
// the owner, and the descriptor to open it by). id 0: none. It travels in a
// RemoteKey's handle.
struct SharedMemoryKey {
  uint64_t id = 0;
  uint64_t base = 0;
  uint64_t bytes = 0;
  int64_t fd = -1;
};
static_assert(sizeof(SharedMemoryKey) <= sizeof(RemoteKey::handle));

// Page-aligned memory backed by a memfd, or nullptr when memfds are not
// available (the caller falls back to ordinary memory).
void* allocateShared(size_t bytes);
// False if p did not come from allocateShared (nothing is freed then).
bool freeShared(void* p);
// The key naming the shared allocation that holds p, or an empty key.
SharedMemoryKey sharedKeyFor(const void* p);
// The memfd's name for an id: what a peer checks before mapping it.
std::string sharedAllocationName(uint64_t id);

}  // namespace gyre::transport::shm
