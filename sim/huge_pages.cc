#include "sim/huge_pages.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gyre::sim {

void* allocateHuge(size_t bytes) {
  void* p = std::aligned_alloc(kHugePage, bytes);
  if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

void freeHuge(void* p) { std::free(p); }

HugeArena::~HugeArena() {
  for (void* b : blocks_) freeHuge(b);
}

void* HugeArena::take(size_t bytes, size_t align) {
  auto aligned = [align](char* p) {
    return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + align - 1) / align * align);
  };
  char* at = next_ ? aligned(next_) : nullptr;
  if (!at || bytes > static_cast<size_t>(end_ - at)) {
    // A new block; what the last one had left stays unused (at most an
    // array's worth, as arrays go here).
    const size_t size = std::max(kBlock, (bytes + align + kHugePage - 1) / kHugePage * kHugePage);
    blocks_.push_back(allocateHuge(size));
    next_ = static_cast<char*>(blocks_.back());
    end_ = next_ + size;
    at = aligned(next_);
  }
  next_ = at + bytes;
  return at;
}

}  // namespace gyre::sim
