#include "bench/gyre_bench/device_memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef GYRE_BENCH_CUDA
#include <cuda_runtime.h>
#endif

namespace gyre::bench {
namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "gyre-bench: --device: %s\n", what.c_str());
  std::exit(1);
}

// gyre's host-emulated GPU: its device memory is host memory, so the host
// fills and reads it directly once the stream is idle.
class EmulatedMemory final : public DeviceMemory {
 public:
  const char* name() const override { return "emulated"; }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (gyreMemAlloc(&p, bytes) != gyreSuccess) die(std::string("gyreMemAlloc: ") + gyreGetLastError(nullptr));
    return p;
  }
  void free(void* p) override { gyreMemFree(p); }
  void upload(void* device, const void* host, size_t bytes) override { std::memcpy(device, host, bytes); }
  void download(void* host, const void* device, size_t bytes) override { std::memcpy(host, device, bytes); }
  gyreStream_t stream() override { return GYRE_STREAM_LEGACY; }
  // One more call on the stream, then a host call: the host call runs once
  // the proxy has seen that call's inputs staged, which the stream does
  // after the copies out of every call before it.
  void synchronize(gyreComm_t comm) override {
    if (!tick_) tick_ = allocate(sizeof(float));
    if (gyreAllReduce(tick_, tick_, 1, gyreFloat32, gyreSum, comm, stream()) != gyreSuccess ||
        gyreBarrier(comm, nullptr) != gyreSuccess)
      die(std::string("waiting for the stream: ") + gyreGetLastError(comm));
  }
  ~EmulatedMemory() override {
    // Not freed: the tick's own copy out may still be queued on the stream.
  }

 private:
  void* tick_ = nullptr;
};

#ifdef GYRE_BENCH_CUDA
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    // The rank's thread waits for its stream by yielding, not spinning: gyre's
    // proxy thread, which opens the stream's gate, may share its core (with
    // --bind core it must), and a spinning wait would leave it only the
    // scheduler's ticks (8 ms per call in the first GPU run). Refused where
    // the context was already made with other flags: then it spins.
    if (cudaSetDeviceFlags(cudaDeviceScheduleYield) != cudaSuccess) cudaGetLastError();
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaMemory() override { cudaStreamDestroy(stream_); }
  const char* name() const override { return "cuda"; }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    return p;
  }
  void free(void* p) override { cudaFree(p); }
  void upload(void* device, const void* host, size_t bytes) override {
    check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  void download(void* host, const void* device, size_t bytes) override {
    check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the device");
  }
  gyreStream_t stream() override { return stream_; }
  void synchronize(gyreComm_t) override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t stream_ = nullptr;
};
#endif

int localRank(int rank) {
  for (const char* v : {"LOCAL_RANK", "GYRE_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return rank;
}

}  // namespace

std::unique_ptr<DeviceMemory> openDeviceMemory(int rank, std::string& error) {
  const char* backend = std::getenv("GYRE_DEVICE_BACKEND");
  if (backend && std::strcmp(backend, "emulated") == 0) return std::make_unique<EmulatedMemory>();
#ifdef GYRE_BENCH_CUDA
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0) {
    error = e != cudaSuccess ? std::string("no usable GPU: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"
                             : "CUDA sees no GPU";
    return nullptr;
  }
  return std::make_unique<CudaMemory>(localRank(rank) % n);
#else
  (void)localRank;
  error = "this gyre-bench was built without CUDA (configure with -DGYRE_CUDA=ON)";
  return nullptr;
#endif
}

}  // namespace gyre::bench
