// How a transport copies bytes within this process: a message into the
// caller's buffer, a bounce buffer into place. The fast copies belong to the
// kernels layer (instruction set chosen at run time, slow distances stepped
// around), which sits above the transports, so whoever creates a transport
// hands them down in its options. The defaults are memcpy, never "slow":
// correct everywhere, only slower.
#pragma once

#include <cstddef>
#include <cstring>

namespace gyre::transport {

struct MemoryCopy {
  static void plainCopy(void* dst, const void* src, size_t bytes, bool) { std::memcpy(dst, src, bytes); }
  static bool neverCrawls(const void*, const void*) { return false; }

  // copy(dst, src, bytes, streamDst): streamDst asks for stores that bypass
  // the cache (the destination is not read again soon).
  void (*copy)(void* dst, const void* src, size_t bytes, bool streamDst) = plainCopy;
  // True where the kernel's own copy (process_vm_readv) would crawl from src
  // to dst, so a read is better bounced through a buffer at src's alignment.
  bool (*kernelCopyCrawls)(const void* dst, const void* src) = neverCrawls;
};

}  // namespace gyre::transport
