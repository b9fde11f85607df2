// gyre-bench --device cuda: the row's buffers in device memory, the calls
// enqueued on a stream, and the host's view of the buffers for filling and
// checking them. Two ways to get there:
//   - CUDA's runtime (a CUDA build on a host with a GPU): cudaMalloc'd
//     buffers on the rank's GPU (LOCAL_RANK, else rank, modulo the GPUs), a
//     stream of the bench's own, cudaMemcpy to fill and check;
//   - gyre's host-emulated GPU (GYRE_DEVICE_BACKEND=emulated, for tests of
//     the bench and of the device path's host-side costs): gyreMemAlloc's
//     device memory on the legacy stream, waited for through gyre itself.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "gyre/gyre.h"

namespace gyre::bench {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual const char* name() const = 0;  // "cuda", "emulated"
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // Between the host and device memory, done when they return.
  virtual void upload(void* device, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* device, size_t bytes) = 0;
  virtual gyreStream_t stream() = 0;
  // Until everything enqueued on stream() has run.
  virtual void synchronize(gyreComm_t comm) = 0;
};

// The device memory for `rank`, or null with error saying why there is none.
std::unique_ptr<DeviceMemory> openDeviceMemory(int rank, std::string& error);

}  // namespace gyre::bench
