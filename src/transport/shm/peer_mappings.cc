#include "transport/shm/peer_mappings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "transport/shm/shared_allocation.h"

namespace gyre::transport::shm {
namespace {

// Enough for the buffers of a few concurrent calls; the least recently used
// goes first, so a mapping never pins a long-freed allocation for good.
constexpr size_t kMaxMappings = 64;

std::string linkOf(const std::string& path) {
  char buf[256];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

PeerMappings::~PeerMappings() {
  while (!entries_.empty()) drop(entries_.size() - 1);
}

void PeerMappings::drop(size_t index) {
  Entry& e = entries_[index];
  munmap(const_cast<unsigned char*>(e.local), e.key.bytes);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
}

const void* PeerMappings::map(uint64_t address, size_t bytes, const SharedMemoryKey& key) {
  if (key.id == 0 || address < key.base || bytes > key.bytes || address - key.base > key.bytes - bytes)
    return nullptr;
  const Entry* e = nullptr;
  for (Entry& x : entries_)
    if (x.key.id == key.id) {
      x.lastUse = ++uses_;
      e = &x;
      break;
    }
  if (!e) e = open(key);
  return e ? e->local + (address - key.base) : nullptr;
}

const PeerMappings::Entry* PeerMappings::open(const SharedMemoryKey& key) {
  if (std::find(refused_.begin(), refused_.end(), key.id) != refused_.end()) return nullptr;
  // The peer reuses a descriptor only after freeing what it held.
  for (size_t i = entries_.size(); i-- > 0;)
    if (entries_[i].key.fd == key.fd) drop(i);
  const std::string path = "/proc/" + std::to_string(pid_) + "/fd/" + std::to_string(key.fd);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0;
  // What we opened must be that allocation, not whatever the descriptor
  // names by now: checked on our own descriptor, so no race.
  if (ok) ok = linkOf("/proc/self/fd/" + std::to_string(fd)) == "/memfd:" + sharedAllocationName(key.id) + " (deleted)";
  struct stat st {};
  if (ok) ok = fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= key.bytes;
  void* p = ok ? mmap(nullptr, key.bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  if (p == MAP_FAILED) {
    if (refused_.size() >= 1024) refused_.clear();
    refused_.push_back(key.id);
    return nullptr;
  }
  if (entries_.size() >= kMaxMappings) {
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); ++i)
      if (entries_[i].lastUse < entries_[oldest].lastUse) oldest = i;
    drop(oldest);
  }
  entries_.push_back(Entry{key, static_cast<const unsigned char*>(p), ++uses_});
  return &entries_.back();
}

}  // namespace gyre::transport::shm
