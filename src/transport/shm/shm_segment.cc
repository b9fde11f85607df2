#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "bootstrap/unique_id.h"
#include "topology/affinity.h"

namespace gyre::transport {

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    data_ = o.data_;
    size_ = o.size_;
    name_ = std::move(o.name_);
    linked_ = o.linked_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.linked_ = false;
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  if (linked_) unlink();
  if (data_) munmap(data_, size_);
  data_ = nullptr;
}

ShmSegment ShmSegment::create(size_t bytes) {
  ShmSegment s;
  bootstrap::Secret r = bootstrap::randomSecret();
  char name[64];
  std::snprintf(name, sizeof(name), "/gyre-%d-%02x%02x%02x%02x%02x%02x", getpid(), r[0], r[1], r[2],
                r[3], r[4], r[5]);
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throwSystemError(std::string("cannot create shared memory ") + name, errno);
  s.name_ = name;
  s.linked_ = true;
  // From here on the destructor unlinks on any error.
  int rc;
  {
    // Pages come from the NUMA node nearest this rank's device (a no-op
    // with one node or GYRE_TOPO_AFFINITY=0).
    topology::ScopedNumaMemoryPolicy near;
    rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  }
  if (rc != 0) {
    ::close(fd);
    throwError(gyreSystemError,
               "cannot reserve " + std::to_string(bytes >> 20) +
                   " MiB of shared memory in /dev/shm (" + std::strerror(rc) +
                   "); free space there or lower GYRE_SHM_SLOT_BYTES/GYRE_SHM_SLOTS");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throwSystemError("mmap of shared memory", err);
  s.data_ = p;
  s.size_ = bytes;
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  ShmSegment s;
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throwSystemError("cannot open a peer's shared memory " + name, errno);
  // A segment smaller than this rank's layout maps without complaint and
  // then kills the process with SIGBUS at the first access past its end.
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < 0 || size_t(st.st_size) < bytes) {
    const long long have = st.st_size;
    ::close(fd);
    throwError(gyreRemoteError, "a peer's shared memory " + name + " holds " + std::to_string(have) +
                                    " bytes, fewer than the " + std::to_string(bytes) +
                                    " its layout needs (do the ranks agree on GYRE_SHM_SLOT_BYTES/GYRE_SHM_SLOTS?)");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throwSystemError("mmap of a peer's shared memory " + name, err);
  s.data_ = p;
  s.size_ = bytes;
  s.name_ = name;
  return s;
}

void ShmSegment::prefault(size_t offset, size_t bytes) const {
  if (!data_ || offset >= size_) return;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page, end = std::min(size_, offset + bytes);
  auto* base = static_cast<unsigned char*>(data_);
#ifdef MADV_POPULATE_WRITE
  if (madvise(base + begin, end - begin, MADV_POPULATE_WRITE) == 0) return;
#endif
  // A read maps the page; the first write then costs a cheaper fault (no
  // page to find). Volatile: the loads must happen.
  for (size_t at = begin; at < end; at += page) (void)*static_cast<volatile unsigned char*>(base + at);
}

void ShmSegment::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

}  // namespace gyre::transport
