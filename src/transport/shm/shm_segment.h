// A POSIX shared-memory segment: created 0600 with a unique name, mapped,
// and unlinked as soon as every peer has mapped it, so nothing stays in
// /dev/shm whether the job ends cleanly or is killed.
#pragma once

#include <cstddef>
#include <string>

namespace gyre::transport {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Reserves the memory up front so a full /dev/shm is an error now, not a
  // SIGBUS later.
  static ShmSegment create(size_t bytes);
  static ShmSegment open(const std::string& name, size_t bytes);

  void unlink();  // the creator's name goes away; mappings stay valid
  // Maps [offset, offset + bytes) into this process's page tables, writable,
  // without changing a byte: a FIFO's first messages otherwise pay a page
  // fault per 4 KiB on each side (a 2-rank AllGather of 256 KiB took 70-200
  // us a call for its first 8-10 calls and 12-17 us for the next 40, against
  // 10 us after). Best effort: a kernel without MADV_POPULATE_WRITE (before
  // 5.14) gets the pages mapped by a read of each.
  void prefault(size_t offset, size_t bytes) const;
  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool linked_ = false;  // we created it and have not unlinked it yet
};

}  // namespace gyre::transport
