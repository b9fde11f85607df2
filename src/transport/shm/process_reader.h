// Reads a local peer's memory through the kernel (process_vm_readv), the
// single-copy path for buffers the peer cannot share (plain malloc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "transport/memory_copy.h"

namespace gyre::transport::shm {

class ProcessReader {
 public:
  ProcessReader(int pid, const MemoryCopy& memoryCopy) : pid_(pid), copy_(memoryCopy) {}

  // Copies bytes from the peer's remoteAddress into dst. Returns 0, or the
  // errno of the read that failed (EFAULT for a short read).
  int read(void* dst, uint64_t remoteAddress, size_t bytes);
  // Copies bytes from src into the peer's remoteAddress (process_vm_writev);
  // returns like read().
  int write(uint64_t remoteAddress, const void* src, size_t bytes);

  // Bytes that went through the bounce buffer (read() explains when).
  uint64_t bouncedBytes() const { return bounced_; }

  // Reads of this size or more go through the bounce buffer when the kernel's
  // copy would crawl (MemoryCopy::kernelCopyCrawls), in pieces of kBouncePieceBytes.
  static constexpr size_t kBounceMinBytes = 4096;
  static constexpr size_t kBouncePieceBytes = 256 * 1024;

 private:
  int readDirect(void* dst, uint64_t remoteAddress, size_t bytes);
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  int pid_;
  MemoryCopy copy_;
  std::unique_ptr<unsigned char, Free> bounce_;  // kBouncePieceBytes + a page, once needed
  uint64_t bounced_ = 0;
};

}  // namespace gyre::transport::shm
