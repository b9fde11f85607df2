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
#include <type_traits>
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

// Memory handed out in order from blocks of huge pages and freed all at
// once, with the arena: many arrays too small for a huge page each (a
// rank's steps, 72 KB of a 16,384-rank tree's 1.2 GB) side by side in them.
class HugeArena {
 public:
  HugeArena() = default;
  HugeArena(const HugeArena&) = delete;
  HugeArena& operator=(const HugeArena&) = delete;
  ~HugeArena();
  void* take(size_t bytes, size_t align);

 private:
  static constexpr size_t kBlock = 32 * kHugePage;
  std::vector<void*> blocks_;
  char* next_ = nullptr;
  char* end_ = nullptr;
};

// Takes from an arena (freeing nothing: the arena does), or without one
// from the heap as std::allocator does.
template <class T>
struct ArenaAllocator {
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  HugeArena* arena = nullptr;
  ArenaAllocator() = default;
  explicit ArenaAllocator(HugeArena* a) : arena(a) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& o) : arena(o.arena) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    if (!arena) return std::allocator<T>().allocate(n);
    return static_cast<T*>(arena->take(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (!arena) std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const ArenaAllocator<U>& o) const { return arena == o.arena; }
};

}  // namespace gyre::sim
