// CUDA's backend (backend.h), on the runtime API (linked statically: it
// opens the driver on first use). The stream gate is a word of pinned,
// mapped host memory that the stream waits on with a stream memory
// operation (cuStreamWaitValue32, reached through the runtime's driver
// entry point, so libgyre never links libcuda); where the device cannot do
// stream memory operations, a host function on the stream waits instead.
#include <cuda.h>
#include <cuda_runtime.h>

#include <strings.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "device/backend.h"
#include "device/cuda_vmm.h"
#include "kernels/cuda/launch.h"

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
using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// A gate: one word the host writes and the stream reads. Words come from
// slabs of pinned memory that are never freed while gyre runs: freeing
// pinned memory (cudaFreeHost) waits for the whole device, which may be
// waiting for a later gate of gyre's own, and a word is reused only once
// its stream is past it.
struct Gate {
  std::atomic<uint32_t>* host = nullptr;
  CUdeviceptr device = 0;
  cudaStream_t stream = nullptr;  // the stream that waits on it, once it does
  int streamDevice = -1;
  cudaEvent_t passed = nullptr;  // recorded at destroyGate: the stream is past the wait
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
  explicit CudaBackend(int devices)
      : devices_(devices), copyStreams_(static_cast<size_t>(devices), nullptr), kernelsLoaded_(static_cast<size_t>(devices)) {
    cudaDriverEntryPointQueryResult q{};
    void* fn = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      waitValue_ = reinterpret_cast<WaitValue32>(fn);
    // GYRE_DEVICE_GATE=host (checked by the communicator's settings): gate
    // with a host function even where stream memory operations work. A
    // stream waiting on memory keeps work pending on the GPU, which the
    // GPU's time slicing between processes (ranks sharing one GPU) may
    // wait out; a host function's stream holds nothing there.
    if (const char* g = std::getenv("GYRE_DEVICE_GATE"); g && strcasecmp(g, "host") == 0) waitValue_ = nullptr;
    fn = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      addressRange_ = reinterpret_cast<AddressRange>(fn);
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

  void* allocateHost(size_t bytes) override {
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc");
    return p;
  }

  void freeHost(void* p) override {
    if (p) check(cudaFreeHost(p), "cudaFreeHost");
  }

  void copyOnStream(void* dst, const void* src, size_t bytes, Stream s) override {
    if (!bytes) return;
    DeviceScope scope(streamDevice(s));
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s)),
          "cudaMemcpyAsync (staging on the caller's stream)");
  }

  void* allocate(size_t bytes, int device) override {
    DeviceScope scope(device);
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    return p;
  }

  // Virtual memory with a POSIX descriptor (CudaVmm): a peer maps it
  // through pidfd_getfd, and it stays shareable however it is used (the
  // frameworks' own pools mostly cannot be shared through cudaIpc*).
  void* allocateShareable(size_t bytes, int device) override {
    if (!vmm_.usable(device)) return allocate(bytes, device);
    DeviceScope scope(device);
    return vmm_.allocate(bytes, device);
  }

  void free(void* p) override {
    if (!p || vmm_.free(p)) return;
    check(cudaFree(p), "cudaFree");
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
    std::lock_guard<std::mutex> l(gatesMu_);
    reapGates();
    if (freeGates_.empty()) {
      constexpr size_t kWords = 256;
      void* h = nullptr;
      check(cudaHostAlloc(&h, kWords * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
            "cudaHostAlloc (stream gates)");
      void* dp = nullptr;
      if (cudaHostGetDevicePointer(&dp, h, 0) != cudaSuccess) {
        cudaGetLastError();
        dp = nullptr;
      }
      for (size_t i = 0; i < kWords; ++i) {
        auto* g = new Gate;
        g->host = new (static_cast<uint32_t*>(h) + i) std::atomic<uint32_t>(0);
        if (dp) g->device = reinterpret_cast<CUdeviceptr>(dp) + i * sizeof(uint32_t);
        freeGates_.push_back(g);
      }
    }
    Gate* g = freeGates_.back();
    freeGates_.pop_back();
    g->host->store(0, std::memory_order_relaxed);
    g->stream = nullptr;
    return g;
  }

  void waitGate(Stream s, void* gate) override {
    auto* g = static_cast<Gate*>(gate);
    g->streamDevice = streamDevice(s);
    DeviceScope scope(g->streamDevice);
    loadKernelsOnce(g->streamDevice);
    g->stream = static_cast<cudaStream_t>(s);
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

  // The word is reused once the stream is past it: an event recorded now on
  // its stream says when. Where no event can be recorded, the word is
  // never reused (a few bytes, rather than a stream reading a reset word).
  void destroyGate(void* gate) noexcept override {
    auto* g = static_cast<Gate*>(gate);
    std::lock_guard<std::mutex> l(gatesMu_);
    if (!g->stream) {
      freeGates_.push_back(g);
      return;
    }
    try {
      DeviceScope scope(g->streamDevice);
      if (cudaEventCreateWithFlags(&g->passed, cudaEventDisableTiming) == cudaSuccess) {
        if (cudaEventRecord(g->passed, g->stream) == cudaSuccess) {
          retiredGates_.push_back(g);
          return;
        }
        cudaEventDestroy(g->passed);
      }
    } catch (...) {
    }
    cudaGetLastError();
  }

  Stream createStream(int device) override {
    DeviceScope scope(device);
    cudaStream_t st = nullptr;
    check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate (gyre's proxy stream)");
    return st;
  }

  void destroyStream(Stream s) noexcept override {
    if (!s) return;
    cudaStreamSynchronize(static_cast<cudaStream_t>(s));
    if (cudaStreamDestroy(static_cast<cudaStream_t>(s)) != cudaSuccess) cudaGetLastError();
  }

  void reduceOnStream(const kernels::ReduceTask& t, Stream s) override {
    if (!t.count) return;
    DeviceScope scope(streamDevice(s));
    if (const int e = kernels::cuda::reduce(t, s))
      fail(static_cast<cudaError_t>(e), "the reduction kernel's launch");
  }

  void reduceAllOnStream(const kernels::ReduceAllTask& t, Stream s) override {
    if (!t.count || !t.nout) return;
    DeviceScope scope(streamDevice(s));
    if (const int e = kernels::cuda::reduceAll(t, s))
      fail(static_cast<cudaError_t>(e), "the many-input reduction kernel's launch");
  }

  void synchronize(Stream s) override {
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
  }

  // Legacy CUDA IPC (cudaIpc*): it shares cudaMalloc's allocations, which is
  // what gyreMemAlloc and the frameworks' caching allocators hand out. The
  // handle names the whole allocation, so its start is looked up first.
  ExportedMemory exportMemory(const void* p) override {
    if (ExportedMemory vm; vmm_.exportMemory(p, vm)) return vm;
    const std::string at = std::to_string(reinterpret_cast<uintptr_t>(p));
    const MemoryInfo m = classify(p);
    if (m.kind != MemoryKind::Device)
      throwError(gyreInvalidArgument, "buffer " + at + " is " + kindName(m.kind) +
                                          ": only device memory is shared with peers through CUDA IPC");
    if (!addressRange_)
      throwError(gyreSystemError, "CUDA: this driver does not give cuMemGetAddressRange, which CUDA IPC needs");
    DeviceScope scope(m.device);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (CUresult r = addressRange_(&base, &size, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS)
      throwError(gyreSystemError, "CUDA: cuMemGetAddressRange of buffer " + at + " failed (CUresult " +
                                      std::to_string(static_cast<int>(r)) + ")");
    cudaIpcMemHandle_t h;
    check(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)),
          "cudaIpcGetMemHandle (memory from cudaMalloc can be shared; memory from cudaMallocAsync's pools or "
          "cuMemCreate without a shareable handle type cannot)");
    ExportedMemory out;
    static_assert(sizeof h <= sizeof out.handle.bytes);
    std::memcpy(out.handle.bytes, &h, sizeof h);
    out.offset = reinterpret_cast<uintptr_t>(p) - static_cast<uintptr_t>(base);
    out.bytes = size;
    return out;
  }

  void* openMemory(const IpcHandle& handle) override {
    if (CudaVmm::isVmmHandle(handle)) return vmm_.open(handle);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof h);
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
          "cudaIpcOpenMemHandle (a handle cannot be opened in the process that made it)");
    return p;
  }

  void closeMemory(void* base) noexcept override {
    if (!base || vmm_.close(base)) return;
    if (cudaIpcCloseMemHandle(base) != cudaSuccess) cudaGetLastError();
  }

 private:
  cudaStream_t copyStream(int dev) {
    std::lock_guard<std::mutex> l(mu_);
    cudaStream_t& st = copyStreams_[static_cast<size_t>(dev)];
    if (!st) check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    return st;
  }

  // Before the first gate on a device, while no stream of the caller's is
  // held by gyre: a kernel loaded later, on its first launch under a gate,
  // may wait for the device to be idle, which the gate stops it ever being.
  void loadKernelsOnce(int dev) {
    std::lock_guard<std::mutex> l(mu_);
    if (kernelsLoaded_[static_cast<size_t>(dev)]) return;
    if (const int e = kernels::cuda::loadKernels())
      fail(static_cast<cudaError_t>(e), "loading gyre's kernels (cudaFuncGetAttributes)");
    kernelsLoaded_[static_cast<size_t>(dev)] = true;
  }

  // Gates whose stream got past its event are free again (gatesMu_ held).
  void reapGates() {
    for (size_t i = 0; i < retiredGates_.size();) {
      Gate* g = retiredGates_[i];
      const cudaError_t r = cudaEventQuery(g->passed);
      if (r == cudaErrorNotReady) {
        ++i;
        continue;
      }
      cudaGetLastError();  // a failed stream reads no word either
      cudaEventDestroy(g->passed);
      g->passed = nullptr;
      retiredGates_[i] = retiredGates_.back();
      retiredGates_.pop_back();
      freeGates_.push_back(g);
    }
  }

  const int devices_;
  WaitValue32 waitValue_ = nullptr;
  AddressRange addressRange_ = nullptr;
  std::mutex gatesMu_;
  std::vector<Gate*> freeGates_, retiredGates_;
  std::mutex mu_;
  std::vector<cudaStream_t> copyStreams_;
  std::vector<bool> kernelsLoaded_;  // by device, under mu_
  CudaVmm vmm_;
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
