// Device memory from CUDA's virtual memory management (cuMem*), shareable
// with the other processes of this host as a POSIX file descriptor: what
// gyreMemAlloc hands out on a GPU, as ncclMemAlloc does (docs/gpu.md). A
// peer takes the descriptor with pidfd_getfd (the permission
// process_vm_readv needs too, which single-copy reads rely on already),
// imports it and maps it into its own address space. Built with CUDA only;
// the driver's functions come through the runtime's entry-point query, so
// libgyre never links libcuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "device/backend.h"

namespace gyre::device {

class CudaVmm {
 public:
  CudaVmm();
  ~CudaVmm();
  CudaVmm(const CudaVmm&) = delete;
  CudaVmm& operator=(const CudaVmm&) = delete;

  // The driver gives every function needed, and `device` supports virtual
  // memory management with POSIX file descriptor handles.
  bool usable(int device) const;
  // An allocation of at least `bytes` (rounded up to the granularity),
  // mapped read-write for `device`; an Error saying which step failed.
  void* allocate(size_t bytes, int device);
  // Frees p if it is an allocation of ours (its start); false otherwise.
  bool free(void* p);
  // The allocation of ours holding p, as a handle a peer can open; false
  // when p is not in one.
  bool exportMemory(const void* p, ExportedMemory& out) const;
  // A handle made by exportMemory (in any process).
  static bool isVmmHandle(const IpcHandle& h);
  // Maps a peer's allocation here (read-write for the calling thread's
  // device) and returns its start; an Error when the handle is this
  // process's own, its owner is gone, or a step fails.
  void* open(const IpcHandle& h);
  // Unmaps a mapping open() made; false when base is not one.
  bool close(void* base) noexcept;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  struct Allocation {
    size_t bytes;
    int device;
    int fd;
    unsigned long long handle;
    uint64_t serial;
  };
  uint64_t serials_ = 0;  // allocations made (mu_ held)
  mutable std::mutex mu_;
  std::map<uintptr_t, Allocation> own_;  // by start
  std::map<uintptr_t, size_t> opened_;   // peers' allocations mapped here: start, length
};

}  // namespace gyre::device
