#include "transport/shm/shared_allocation.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>
#include <random>

namespace gyre::transport::shm {
namespace {

struct Allocation {
  size_t bytes;   // what was mapped (whole pages)
  int fd;
  uint64_t id;
};

// By start address; the ranges never overlap.
std::mutex gMu;
std::map<uintptr_t, Allocation>& allocations() {
  static auto* m = new std::map<uintptr_t, Allocation>;  // outlives static destructors
  return *m;
}

uint64_t nextId() {
  // Unique per process and unlikely to repeat across processes, so a peer's
  // cache never confuses a freed allocation with its successor at the same fd.
  static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  static std::atomic<uint64_t> counter{1};
  return salt ^ (counter.fetch_add(1) * 0xBF58476D1CE4E5B9ull) ^ (uint64_t(getpid()) << 40);
}

}  // namespace

std::string sharedAllocationName(uint64_t id) {
  char name[40];
  std::snprintf(name, sizeof(name), "gyre-mem-%016llx", static_cast<unsigned long long>(id));
  return name;
}

void* allocateShared(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = ((bytes ? bytes : 1) + page - 1) / page * page;
  const uint64_t id = nextId();
  const int fd = memfd_create(sharedAllocationName(id).c_str(), MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(gMu);
  allocations()[reinterpret_cast<uintptr_t>(p)] = Allocation{mapped, fd, id};
  return p;
}

bool freeShared(void* p) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(gMu);
    auto it = allocations().find(reinterpret_cast<uintptr_t>(p));
    if (it == allocations().end()) return false;
    a = it->second;
    allocations().erase(it);
  }
  munmap(p, a.bytes);
  close(a.fd);
  return true;
}

SharedMemoryKey sharedKeyFor(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(gMu);
  auto& m = allocations();
  auto it = m.upper_bound(at);
  if (it == m.begin()) return {};
  it = std::prev(it);
  if (at >= it->first + it->second.bytes) return {};
  return SharedMemoryKey{it->second.id, it->first, it->second.bytes, it->second.fd};
}

}  // namespace gyre::transport::shm
