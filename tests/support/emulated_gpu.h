// A test rank's GPU: the host-emulated device (src/device/emulated.h),
// installed as the process's backend for as long as it lives, with the
// stream-ordered host reads and writes the device tests make.
#pragma once

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "device/emulated.h"

namespace gyre::test {

struct EmulatedGpu {
  device::EmulatedBackend emu{2};
  EmulatedGpu() { device::setBackendForTesting(&emu); }
  ~EmulatedGpu() { device::setBackendForTesting(nullptr); }
  EmulatedGpu(const EmulatedGpu&) = delete;
  EmulatedGpu& operator=(const EmulatedGpu&) = delete;

  float* floats(size_t n, int dev = 0) { return static_cast<float*>(emu.allocate(n * sizeof(float), dev)); }
  // Holds the stream (work of the caller's that takes its time) until
  // release is set.
  void holdUntil(device::Stream s, std::atomic<bool>& release) {
    emu.enqueue(s, [&release] {
      while (!release.load()) std::this_thread::yield();
    });
  }
  // Host-side reads and writes of device memory, in stream order.
  void fill(device::Stream s, float* p, std::vector<float> v) {
    emu.enqueue(s, [p, v] { std::memcpy(p, v.data(), v.size() * sizeof(float)); });
  }
  std::vector<float> read(device::Stream s, const float* p, size_t n) {
    std::vector<float> out(n);
    emu.enqueue(s, [p, n, &out] { std::memcpy(out.data(), p, n * sizeof(float)); });
    emu.synchronize(s);
    return out;
  }
};

}  // namespace gyre::test
