// The proxy's device side of a direct device call (docs/gpu.md, "Direct
// device calls"): the executor's copies and reductions, enqueued in order
// on a non-blocking stream of the communicator's own on the call's GPU, the
// plan's scratch in that GPU's memory, and a pinned bounce buffer for
// reads that only the host can make.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/function_ref.h"
#include "collectives/plan.h"
#include "device/backend.h"

namespace gyre::core {

// Polls until the stream is past `event`: yields first, then naps.
// whileWaiting() ends the wait by throwing (an abort, the timeout); a failed
// stream ends it with the backend's Error.
void awaitEvent(device::Backend& b, void* event, FunctionRef<void()> whileWaiting);

class ProxyEngine final : public collectives::DeviceEngine {
 public:
  // check(start): throws to end a wait that began at start (ns) (an abort,
  // the timeout).
  ProxyEngine(device::Backend& b, int device, std::function<void(int64_t)> check);
  ~ProxyEngine();
  ProxyEngine(const ProxyEngine&) = delete;
  ProxyEngine& operator=(const ProxyEngine&) = delete;

  void copy(void* dst, const void* src, size_t bytes) override;
  void reduce(const kernels::ReduceTask& t) override;
  void reduceAll(const kernels::ReduceAllTask& t) override;
  void flush() override;
  void* hostBounce(size_t bytes) override;
  void* scratch(size_t bytes) override;
  // Waits for what the stream holds, whatever happened to it (a failed
  // call's cleanup: the caller's stream must not go on while work of ours
  // still writes its buffers).
  void drain() noexcept;
  int device() const override { return device_; }

 private:
  device::Backend& b_;
  const int device_;
  std::function<void(int64_t)> check_;
  device::Stream stream_ = nullptr;
  bool pending_ = false;  // work enqueued since the last flush
  void* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  void* bounce_ = nullptr;
  size_t bounceBytes_ = 0;
  // Blocks outgrown, freed with the engine: freeing device or pinned memory
  // waits for the whole device, and while a call runs the caller's stream
  // is held by gyre's gate, so a free there would wait forever.
  std::vector<void*> oldScratch_, oldBounce_;
};

}  // namespace gyre::core
