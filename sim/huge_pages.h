// An allocator for the simulator's large arrays (the ranks' steps and
// state, the links, the events): a block of 2 MiB or more is asked for in
// huge pages (Linux's transparent huge pages, by madvise, where the system
// allows them; plain pages elsewhere), a TLB entry for each 2 MiB instead
// of each 4 KiB. A 16,384-rank double binary tree touches its ranks' steps
// (1.2 GB) and state in no order a TLB can follow: in huge pages it ran in
// 70 s instead of 78.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace gyre::sim {

constexpr size_t kHugePage = size_t{2} << 20;
// At least `bytes` (a multiple of kHugePage), aligned to it; std::bad_alloc
// if there is none. Its pages are asked for as huge before anything touches
// them (a refusal leaves plain pages).
void* allocateHuge(size_t bytes);
void freeHuge(void* p);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator's
  T* allocate(size_t n) {
    if (n * sizeof(T) < kHugePage) return std::allocator<T>().allocate(n);
    return static_cast<T*>(allocateHuge(rounded(n)));
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePage) std::allocator<T>().deallocate(p, n);
    else freeHuge(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }

 private:
  static size_t rounded(size_t n) { return (n * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage; }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace gyre::sim
