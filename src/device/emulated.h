// A device emulated on the host, for tests: "device memory" is host memory
// the backend hands out and remembers (so classify() tells it from the
// caller's own), each stream is an ordered queue run by a thread of its
// own, events and gates are items in those queues. Every device path above
// the backend (classification, stream order, staging, abort and peer death
// on enqueued calls) runs on it without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "device/backend.h"

namespace gyre::device {

class EmulatedBackend final : public Backend {
 public:
  explicit EmulatedBackend(int devices = 2);
  ~EmulatedBackend() override;

  const char* name() const override { return "emulated"; }
  int deviceCount() const override { return devices_; }
  int currentDevice() const override;
  MemoryInfo classify(const void* p) const override;
  int streamDevice(Stream s) const override;
  void* allocate(size_t bytes, int device) override;
  void free(void* p) override;
  void* allocateHost(size_t bytes) override;
  void freeHost(void* p) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copyOnStream(void* dst, const void* src, size_t bytes, Stream s) override;
  void* recordEvent(Stream s) override;
  bool eventDone(void* event) override;
  void destroyEvent(void* event) noexcept override;
  void* makeGate() override;
  void waitGate(Stream s, void* gate) override;
  void openGate(void* gate) noexcept override;
  void destroyGate(void* gate) noexcept override;
  void synchronize(Stream s) override;
  Stream createStream(int device) override;
  void destroyStream(Stream s) noexcept override;
  // The CPU's kernel on the stream's thread; counted (reductionsRun).
  void reduceOnStream(const kernels::ReduceTask& t, Stream s) override;
  // kernels::runAll on the stream's thread; counted as one reduction.
  void reduceAllOnStream(const kernels::ReduceAllTask& t, Stream s) override;
  // Device memory lives in a memfd of its own: a peer process maps it
  // through /proc/<pid>/fd, as CUDA IPC maps a peer's allocation.
  ExportedMemory exportMemory(const void* p) override;
  void* openMemory(const IpcHandle& h) override;
  void closeMemory(void* base) noexcept override;

  // For tests: the calling thread's device, and work of their own on a
  // stream (a kernel's stand-in; it does not run on a failed stream).
  void setDevice(int device);
  void enqueue(Stream s, std::function<void()> work);
  // Every copy on a stream takes at least this long (a slow link's
  // stand-in: what reads staged memory too early then reads it before the
  // copy has written it).
  void setCopyDelay(std::chrono::microseconds d) { copyDelayUs_.store(d.count()); }
  // How many reductions were enqueued (tests: which path a call took).
  uint64_t reductionsRun() const { return reductions_.load(); }
  // How many copies on a stream went from device memory to device memory
  // (tests: whether a call's pieces went device to device, or through host
  // memory).
  uint64_t deviceToDeviceCopies() const { return deviceCopies_.load(); }

 private:
  struct Queue;
  struct Gate;
  Queue& queueOf(Stream s) const;
  bool inBlock(const void* p, size_t bytes) const;  // [p, p+bytes) lies in one live block
  // A kernel over `bytes` of each of ptrs (nulls ignored) on s: refused for
  // pageable host memory; on the stream, fails it where a range is no
  // longer live, else runs body. Counted (reductionsRun).
  void kernelOnStream(Stream s, std::vector<const void*> ptrs, size_t bytes, std::function<void()> body);
  struct Block;
  static void release(uintptr_t start, const Block& b) noexcept;
  // The live block holding address a, or null (mu_ held).
  const std::pair<const uintptr_t, Block>* blockAt(uintptr_t a) const;

  const int devices_;
  std::atomic<int64_t> copyDelayUs_{0};
  std::atomic<uint64_t> reductions_{0};
  std::atomic<uint64_t> deviceCopies_{0};
  // Gates a stream waits at (or will) that are not open yet. A GPU's
  // cudaFree waits for the whole device, so a thread that opens gates
  // (a proxy) freeing memory while one is held would hang there; the
  // emulator says so instead (free, freeHost).
  std::atomic<int> heldGates_{0};
  void refuseFreeUnderGate(const char* what) const;
  mutable std::mutex mu_;
  struct Block {
    size_t bytes;
    MemoryInfo info;
    int fd = -1;          // device memory: its memfd (-1: host memory from the heap)
    size_t mapped = 0;    // device memory: the mapping's length
    bool opened = false;  // a peer's, mapped by openMemory
    uint64_t serial = 0;  // device memory: its allocation's number here
  };
  uint64_t serials_ = 0;
  std::map<uintptr_t, Block> blocks_;  // by start address
  std::set<Queue*> queues_;
  mutable std::map<int, Queue*> legacy_;  // each device's legacy default stream, made on first use
};

}  // namespace gyre::device
