// CUDA's backend (backend.h), on the runtime API (linked statically: it
// opens the driver on first use). The stream gate is a word of pinned,
// mapped host memory that the stream waits on with a stream memory
// operation (cuStreamWaitValue32, reached through the runtime's driver
// entry point, so libgyre never links libcuda); where the device cannot do
// stream memory operations, a host function on the stream waits instead.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "device/backend.h"

namespace gyre::device {

namespace {

[[noreturn]] void fail(cudaError_t e, const std::string& what) {
  cudaGetLastError();  // not sticky: clear it for the next call
  throwError(gyreSystemError, "CUDA: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(e, what);
}

using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

// A gate: one word the host writes and the stream reads.
struct Gate {
  std::atomic<uint32_t>* host = nullptr;
  CUdeviceptr device = 0;
};

// The calling thread's device, set to d for a scope and restored after.
class DeviceScope {
 public:
  explicit DeviceScope(int d) {
    cudaGetDevice(&saved_);
    if (d >= 0 && d != saved_) check(cudaSetDevice(d), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(saved_); }

 private:
  int saved_ = 0;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int devices) : devices_(devices), copyStreams_(static_cast<size_t>(devices), nullptr) {
    cudaDriverEntryPointQueryResult q{};
    void* fn = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      waitValue_ = reinterpret_cast<WaitValue32>(fn);
  }

  const char* name() const override { return "cuda"; }
  int deviceCount() const override { return devices_; }

  int currentDevice() const override {
    int d = -1;
    return cudaGetDevice(&d) == cudaSuccess ? d : -1;
  }

  MemoryInfo classify(const void* p) const override {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return {};
    }
    switch (a.type) {
      case cudaMemoryTypeHost: return {MemoryKind::PinnedHost, a.device};
      case cudaMemoryTypeDevice: return {MemoryKind::Device, a.device};
      case cudaMemoryTypeManaged: return {MemoryKind::Managed, a.device};
      default: return {};
    }
  }

  int streamDevice(Stream s) const override {
    // The legacy and per-thread default streams are the current device's.
    if (s == cudaStreamLegacy || s == cudaStreamPerThread) return currentDevice();
    int d = -1;
    if (cudaError_t e = cudaStreamGetDevice(static_cast<cudaStream_t>(s), &d); e != cudaSuccess) {
      cudaGetLastError();
      throwError(gyreInvalidArgument, "stream " + std::to_string(reinterpret_cast<uintptr_t>(s)) +
                                          " is not a usable CUDA stream: " + cudaGetErrorString(e));
    }
    return d;
  }

  void* allocate(size_t bytes, int device) override {
    DeviceScope scope(device);
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    return p;
  }

  void free(void* p) override {
    if (p) check(cudaFree(p), "cudaFree");
  }

  // On a non-blocking stream of gyre's own per device: the legacy default
  // stream would wait for the caller's streams, which wait for gyre.
  void copy(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    const MemoryInfo d = classify(dst), s = classify(src);
    const int dev = d.device >= 0 ? d.device : s.device >= 0 ? s.device : currentDevice();
    DeviceScope scope(dev);
    cudaStream_t st = copyStream(dev);
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  }

  void* recordEvent(Stream s) override {
    cudaEvent_t e = nullptr;
    DeviceScope scope(streamDevice(s));
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    if (cudaError_t r = cudaEventRecord(e, static_cast<cudaStream_t>(s)); r != cudaSuccess) {
      cudaEventDestroy(e);
      fail(r, "cudaEventRecord");
    }
    return e;
  }

  bool eventDone(void* event) override {
    const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (r == cudaSuccess) return true;
    if (r == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    fail(r, "the stream failed before the call could start");
  }

  void destroyEvent(void* event) noexcept override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

  void* makeGate() override {
    auto* g = new Gate;
    void* h = nullptr;
    if (cudaError_t e = cudaHostAlloc(&h, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
        e != cudaSuccess) {
      delete g;
      fail(e, "cudaHostAlloc (a stream gate)");
    }
    g->host = new (h) std::atomic<uint32_t>(0);
    void* dp = nullptr;
    if (cudaHostGetDevicePointer(&dp, h, 0) == cudaSuccess) g->device = reinterpret_cast<CUdeviceptr>(dp);
    return g;
  }

  void waitGate(Stream s, void* gate) override {
    auto* g = static_cast<Gate*>(gate);
    DeviceScope scope(streamDevice(s));
    if (waitValue_ && g->device &&
        waitValue_(static_cast<CUstream>(s), g->device, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS)
      return;
    // No stream memory operations here: a host function holds the stream.
    check(cudaLaunchHostFunc(
              static_cast<cudaStream_t>(s),
              [](void* arg) {
                auto* word = static_cast<std::atomic<uint32_t>*>(arg);
                while (word->load(std::memory_order_acquire) == 0) std::this_thread::yield();
              },
              g->host),
          "cudaLaunchHostFunc (a stream gate)");
  }

  void openGate(void* gate) noexcept override {
    static_cast<Gate*>(gate)->host->store(1, std::memory_order_release);
  }

  // Freeing pinned memory waits for the device to be done with it.
  void destroyGate(void* gate) noexcept override {
    auto* g = static_cast<Gate*>(gate);
    cudaFreeHost(g->host);
    delete g;
  }

  void synchronize(Stream s) override {
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
  }

 private:
  cudaStream_t copyStream(int dev) {
    std::lock_guard<std::mutex> l(mu_);
    cudaStream_t& st = copyStreams_[static_cast<size_t>(dev)];
    if (!st) check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    return st;
  }

  const int devices_;
  WaitValue32 waitValue_ = nullptr;
  std::mutex mu_;
  std::vector<cudaStream_t> copyStreams_;
};

}  // namespace

std::unique_ptr<Backend> makeCudaBackend(std::string* why) {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    cudaGetLastError();
    *why = std::string("CUDA: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return nullptr;
  }
  if (n == 0) {
    *why = "CUDA sees no device";
    return nullptr;
  }
  return std::make_unique<CudaBackend>(n);
}

}  // namespace gyre::device
