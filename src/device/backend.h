// The device behind a narrow interface: what gyre needs of a GPU to run a
// call enqueued on a stream (classify memory, order work on a stream, move
// bytes), and nothing of how. Two implementations: CUDA's (cuda_backend.cc,
// in a CUDA build on a host with a device) and the host-emulated one
// (emulated.h), which the tests use to drive every device path on a CPU.
//
// Handles (streams, events) are the backend's own opaque pointers; a stream
// is what the C ABI calls gyreStream_t (a cudaStream_t under CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cpu/reduce.h"

namespace gyre::device {

enum class MemoryKind : uint8_t {
  Host,        // pageable host memory: the device cannot reach it
  PinnedHost,  // page-locked host memory, mapped for the device
  Device,      // a device's own memory
  Managed,     // unified memory: migrates between host and device
};
const char* kindName(MemoryKind k);  // "host memory", "pinned host memory", ...

struct MemoryInfo {
  MemoryKind kind = MemoryKind::Host;
  int device = -1;  // the ordinal, for device and managed memory
};

using Stream = void*;

// Device memory that another process of this host may map (CUDA IPC):
// what exportMemory gives, plain bytes to send to the peer. Opaque: the
// backend's own.
struct IpcHandle {
  unsigned char bytes[64] = {};
};
struct ExportedMemory {
  IpcHandle handle;    // names the whole allocation holding the pointer
  size_t offset = 0;   // the pointer's offset in it
  size_t bytes = 0;    // the allocation's length
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;  // "cuda", "emulated"
  virtual int deviceCount() const = 0;
  // The calling thread's current device (-1: none).
  virtual int currentDevice() const = 0;
  virtual MemoryInfo classify(const void* p) const = 0;
  // The device a stream belongs to; an Error naming the handle when it is
  // not a stream this backend knows.
  virtual int streamDevice(Stream s) const = 0;

  // Device memory on `device`, and its release.
  virtual void* allocate(size_t bytes, int device) = 0;
  // Device memory that peers of this host can map whatever else it is used
  // for (gyreMemAlloc's): CUDA's virtual memory with a shareable handle
  // where the GPU and driver allow, else what allocate gives; free()
  // releases it too.
  virtual void* allocateShareable(size_t bytes, int device) { return allocate(bytes, device); }
  virtual void free(void* p) = 0;
  // Page-locked host memory that every device can reach (staging), and its
  // release.
  virtual void* allocateHost(size_t bytes) = 0;
  virtual void freeHost(void* p) = 0;
  // A copy in any direction, complete when it returns (on the backend's own
  // stream: it waits for nothing the caller enqueued).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // A copy enqueued on s: it runs in s's order, and this returns at once.
  // Memory that is gone when s gets there fails the stream (eventDone of a
  // later event says so), never the process.
  virtual void copyOnStream(void* dst, const void* src, size_t bytes, Stream s) = 0;

  // A stream of gyre's own on `device` (the proxy's: direct device calls
  // enqueue their copies and reductions on it), that waits for no other
  // stream; and its release (after what it holds has run).
  virtual Stream createStream(int device) = 0;
  virtual void destroyStream(Stream s) noexcept = 0;
  // The reduction kernel (kernels/cuda/launch.h's reduce; the task's
  // pointers are device-accessible), enqueued on s; returns at once.
  virtual void reduceOnStream(const kernels::ReduceTask& t, Stream s) = 0;
  // The many-input reduction (kernels/cuda/launch.h's reduceAll), likewise.
  virtual void reduceAllOnStream(const kernels::ReduceAllTask& t, Stream s) = 0;

  // Stream order. An event marks the point a stream has reached when it is
  // recorded; done() says whether the stream got past it (an Error when the
  // stream failed). A gate holds a stream until it is opened: waitGate()
  // enqueues the wait, openGate() (from any thread) releases it;
  // destroyGate() may come before the stream has passed it (the backend
  // keeps what the stream still reads).
  virtual void* recordEvent(Stream s) = 0;
  virtual bool eventDone(void* event) = 0;
  virtual void destroyEvent(void* event) noexcept = 0;
  virtual void* makeGate() = 0;
  virtual void waitGate(Stream s, void* gate) = 0;
  virtual void openGate(void* gate) noexcept = 0;
  virtual void destroyGate(void* gate) noexcept = 0;
  // Waits until everything enqueued on s so far has run.
  virtual void synchronize(Stream s) = 0;

  // CUDA IPC. exportMemory: a handle to the device allocation holding p (an
  // Error naming p when it is not device memory of an allocation that can
  // be shared). openMemory, in another process of this host: maps it and
  // returns its start here (an Error when the handle is this process's own,
  // or its owner or allocation is gone); closeMemory unmaps it.
  virtual ExportedMemory exportMemory(const void* p) = 0;
  virtual void* openMemory(const IpcHandle& h) = 0;
  virtual void closeMemory(void* base) noexcept = 0;
};

// The process's backend: the emulated one when GYRE_DEVICE_BACKEND=emulated
// (tests), CUDA's where it is built in and sees a device, else null (a host
// without a GPU: every buffer is host memory, and a stream is an error).
// Decided once; `why` (may be null) says why there is none.
Backend* backend(std::string* why = nullptr);

// Installs b as the process's backend (tests; null restores the default).
void setBackendForTesting(Backend* b);

}  // namespace gyre::device
