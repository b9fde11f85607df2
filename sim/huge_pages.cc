#include "sim/huge_pages.h"

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

}  // namespace gyre::sim
