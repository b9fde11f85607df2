#include "device/emulated.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"

namespace gyre::device {

namespace {
thread_local int tlsDevice = 0;
thread_local bool tlsOpensGates = false;  // this thread has opened a gate: a proxy
// Held by its maker and by the stream item that marks it: an event may be
// destroyed before its stream gets there (an aborted call), as CUDA allows.
struct EventRec {
  std::atomic<bool> done{false};
  std::string error;  // the stream's failure, written before done
  std::atomic<int> refs{2};
  static void release(EventRec* e) {
    if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete e;
  }
};
}  // namespace

// A stream: work items run in order by a thread of its own.
struct EmulatedBackend::Queue {
  explicit Queue(int d) : device(d), thread([this] { run(); }) {}
  ~Queue() {
    {
      std::lock_guard<std::mutex> l(mu);
      stopping = true;
      cv.notify_all();
    }
    thread.join();
  }
  void push(std::function<void()> f) {
    std::lock_guard<std::mutex> l(mu);
    items.push_back(std::move(f));
    cv.notify_all();
  }
  void run() {
    for (;;) {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return stopping || !items.empty(); });
      if (items.empty()) return;  // stopping, and everything ran
      auto f = std::move(items.front());
      items.pop_front();
      l.unlock();
      f();
    }
  }
  const int device;
  // Set by work that failed (a copy from or to freed memory); like CUDA's
  // sticky errors, what comes after on this stream does not run.
  std::string failed;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> items;
  bool stopping = false;
  std::thread thread;  // last: starts once the rest is made
};

// Held by its maker and by each stream item waiting at it: the last to let
// go deletes it (the maker may destroy it while the stream still wakes up).
struct EmulatedBackend::Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool waited = false;  // counted in heldGates_ until open
  std::atomic<int> refs{1};
  static void release(Gate* g) {
    if (g->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete g;
  }
};

EmulatedBackend::EmulatedBackend(int devices) : devices_(devices) {}

EmulatedBackend::~EmulatedBackend() {
  for (Queue* q : queues_) delete q;
  for (auto& [d, q] : legacy_) delete q;
  for (auto& [start, block] : blocks_) release(start, block);
}

int EmulatedBackend::currentDevice() const { return tlsDevice; }

void EmulatedBackend::setDevice(int device) {
  if (device < 0 || device >= devices_)
    throwError(gyreInvalidArgument, "emulated device " + std::to_string(device) + " does not exist");
  tlsDevice = device;
}

const std::pair<const uintptr_t, EmulatedBackend::Block>* EmulatedBackend::blockAt(uintptr_t a) const {
  auto it = blocks_.upper_bound(a);
  if (it == blocks_.begin()) return nullptr;
  --it;
  return a < it->first + it->second.bytes ? &*it : nullptr;
}

MemoryInfo EmulatedBackend::classify(const void* p) const {
  std::lock_guard<std::mutex> l(mu_);
  const auto* block = blockAt(reinterpret_cast<uintptr_t>(p));
  return block ? block->second.info : MemoryInfo{};
}

EmulatedBackend::Queue& EmulatedBackend::queueOf(Stream s) const {
  std::lock_guard<std::mutex> l(mu_);
  if (s == reinterpret_cast<Stream>(0x1)) {  // the legacy default stream (GYRE_STREAM_LEGACY)
    Queue*& q = legacy_[tlsDevice];
    if (!q) q = new Queue(tlsDevice);
    return *q;
  }
  auto* q = static_cast<Queue*>(s);
  if (!queues_.count(q))
    throwError(gyreInvalidArgument, "stream " + std::to_string(reinterpret_cast<uintptr_t>(s)) +
                                        " is not a stream of the emulated device");
  return *q;
}

int EmulatedBackend::streamDevice(Stream s) const { return queueOf(s).device; }

void EmulatedBackend::release(uintptr_t start, const Block& b) noexcept {
  if (b.fd < 0 && !b.opened) {
    std::free(reinterpret_cast<void*>(start));
    return;
  }
  munmap(reinterpret_cast<void*>(start), b.mapped);
  if (b.fd >= 0) close(b.fd);
}

void* EmulatedBackend::allocate(size_t bytes, int device) {
  const size_t padded = (bytes + 255) / 256 * 256 + 256;
  if (device < 0) {
    void* p = std::aligned_alloc(256, padded);
    if (!p) throwError(gyreSystemError, "emulated device: out of memory for " + std::to_string(bytes) + " bytes");
    std::lock_guard<std::mutex> l(mu_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = Block{bytes ? bytes : 1, MemoryInfo{MemoryKind::Device, device}};
    return p;
  }
  // A memfd per allocation, so that peers can map it (exportMemory).
  const int fd = memfd_create("gyre-emulated-device", MFD_CLOEXEC);
  if (fd < 0) throwError(gyreSystemError, std::string("emulated device: memfd_create: ") + std::strerror(errno));
  void* p = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(padded)) == 0)
    p = mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(fd);
    throwError(gyreSystemError, "emulated device: out of memory for " + std::to_string(bytes) +
                                    " bytes: " + std::strerror(e));
  }
  std::lock_guard<std::mutex> l(mu_);
  blocks_[reinterpret_cast<uintptr_t>(p)] =
      Block{bytes ? bytes : 1, MemoryInfo{MemoryKind::Device, device}, fd, padded, false, ++serials_};
  return p;
}

void* EmulatedBackend::allocateHost(size_t bytes) {
  void* p = allocate(bytes, -1);
  std::lock_guard<std::mutex> l(mu_);
  blocks_[reinterpret_cast<uintptr_t>(p)].info = MemoryInfo{MemoryKind::PinnedHost, -1};
  return p;
}

void EmulatedBackend::refuseFreeUnderGate(const char* what) const {
  if (tlsOpensGates && heldGates_.load(std::memory_order_acquire) > 0)
    throwError(gyreInternalError, std::string("emulated device: ") + what +
                                      " by a thread that opens stream gates while a gate holds a stream: on a GPU "
                                      "this waits for the whole device, which the gate keeps busy, and hangs");
}

void EmulatedBackend::free(void* p) {
  if (!p) return;
  refuseFreeUnderGate("device memory freed");
  Block b;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
    if (it == blocks_.end() || it->second.opened)
      throwError(gyreInvalidArgument, "emulated device: freeing memory it did not allocate");
    b = it->second;
    blocks_.erase(it);
  }
  release(reinterpret_cast<uintptr_t>(p), b);
}

// What travels: the owner's pid and memfd, the mapping's length, and a
// mark that tells an emulated handle from garbage.
namespace {
constexpr uint64_t kIpcMagic = 0x67797265'69706331ULL;  // "gyreipc1"
// serial: the allocation's number in its process, so that a new
// allocation that gets a freed one's fd is never taken for it (peers cache
// what they opened by the handle's bytes).
struct EmulatedIpc {
  uint64_t magic;
  int64_t pid;
  int64_t fd;
  uint64_t mapped;
  uint64_t bytes;
  int64_t device;
  uint64_t serial;
};
static_assert(sizeof(EmulatedIpc) <= sizeof(IpcHandle));
}  // namespace

ExportedMemory EmulatedBackend::exportMemory(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> l(mu_);
  const auto* block = blockAt(a);
  if (!block || block->second.fd < 0)
    throwError(gyreInvalidArgument, "emulated device: " + std::to_string(a) +
                                        " is not in device memory of this process's own, which is all a peer can map");
  const Block& b = block->second;
  EmulatedIpc h{kIpcMagic, getpid(), b.fd, b.mapped, b.bytes, b.info.device, b.serial};
  ExportedMemory out;
  std::memcpy(out.handle.bytes, &h, sizeof h);
  out.offset = a - block->first;
  out.bytes = b.bytes;
  return out;
}

void* EmulatedBackend::openMemory(const IpcHandle& handle) {
  EmulatedIpc h;
  std::memcpy(&h, handle.bytes, sizeof h);
  if (h.magic != kIpcMagic) throwError(gyreInvalidArgument, "emulated device: not an IPC handle of this backend");
  if (h.pid == getpid())
    throwError(gyreInvalidArgument, "emulated device: an IPC handle cannot be opened in the process that made it "
                                    "(as with CUDA IPC)");
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    throwError(gyreSystemError, "emulated device: cannot open process " + std::to_string(h.pid) +
                                    "'s device memory (" + path + "): " + std::strerror(errno));
  void* p = mmap(nullptr, h.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);  // the mapping keeps the memory
  if (p == MAP_FAILED)
    throwError(gyreSystemError, "emulated device: cannot map process " + std::to_string(h.pid) +
                                    "'s device memory: " + std::strerror(e));
  std::lock_guard<std::mutex> l(mu_);
  Block b{h.bytes, MemoryInfo{MemoryKind::Device, static_cast<int>(h.device)}, -1, h.mapped, true};
  blocks_[reinterpret_cast<uintptr_t>(p)] = b;
  return p;
}

void EmulatedBackend::closeMemory(void* base) noexcept {
  Block b;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(base));
    if (it == blocks_.end() || !it->second.opened) return;
    b = it->second;
    blocks_.erase(it);
  }
  release(reinterpret_cast<uintptr_t>(base), b);
}

void EmulatedBackend::freeHost(void* p) {
  refuseFreeUnderGate("pinned memory freed");
  free(p);
}

void EmulatedBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

bool EmulatedBackend::inBlock(const void* p, size_t bytes) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> l(mu_);
  const auto* block = blockAt(a);
  return block && a + bytes <= block->first + block->second.bytes;
}

void EmulatedBackend::copyOnStream(void* dst, const void* src, size_t bytes, Stream s) {
  if (!bytes) return;
  Queue& q = queueOf(s);
  // The backend's own memory must still be there, whole, when the stream
  // gets to the copy; the caller's host memory is the caller's business.
  const MemoryKind dstKind = classify(dst).kind, srcKind = classify(src).kind;
  const bool dstOurs = dstKind != MemoryKind::Host, srcOurs = srcKind != MemoryKind::Host;
  if (dstKind == MemoryKind::Device && srcKind == MemoryKind::Device) ++deviceCopies_;
  q.push([this, &q, dst, src, bytes, dstOurs, srcOurs] {
    if (!q.failed.empty()) return;
    if (const int64_t us = copyDelayUs_.load()) std::this_thread::sleep_for(std::chrono::microseconds(us));
    if ((dstOurs && !inBlock(dst, bytes)) || (srcOurs && !inBlock(src, bytes))) {
      q.failed = "a copy of " + std::to_string(bytes) + " bytes on the stream touched memory that was freed or is "
                 "shorter than the copy (emulated device: an illegal address)";
      return;
    }
    std::memmove(dst, src, bytes);
  });
}

// A kernel reads and writes device memory, or pinned host memory mapped
// for the device; pageable host memory is out of its reach (as on a GPU
// without HMM), and so is memory freed before the stream got there: either
// fails the stream, never the process.
void EmulatedBackend::kernelOnStream(Stream s, std::vector<const void*> ptrs, size_t bytes,
                                     std::function<void()> body) {
  Queue& q = queueOf(s);
  reductions_.fetch_add(1, std::memory_order_relaxed);
  if (!bytes) return;
  std::erase(ptrs, nullptr);
  for (const void* p : ptrs)
    if (classify(p).kind == MemoryKind::Host)
      throwError(gyreInvalidArgument, "emulated device: a reduction kernel was given pageable host memory (" +
                                          std::to_string(reinterpret_cast<uintptr_t>(p)) +
                                          "), which a GPU cannot reach");
  q.push([this, &q, bytes, ptrs = std::move(ptrs), body = std::move(body)] {
    if (!q.failed.empty()) return;
    for (const void* p : ptrs)
      if (!inBlock(p, bytes)) {
        q.failed = "a reduction of " + std::to_string(bytes) + " bytes on the stream touched memory that was "
                   "freed or is shorter than the kernel's range (emulated device: an illegal address)";
        return;
      }
    body();
  });
}

void EmulatedBackend::reduceOnStream(const kernels::ReduceTask& t, Stream s) {
  kernelOnStream(s, {t.a, t.b, t.out0, t.out1}, t.count * kernels::dtypeSize(t.dtype), [t] {
    kernels::ReduceTask task = t;
    task.streamOut0 = false;
    kernels::run(task);
  });
}

void EmulatedBackend::reduceAllOnStream(const kernels::ReduceAllTask& t, Stream s) {
  std::vector<const void*> ptrs(t.in, t.in + t.nin);
  ptrs.insert(ptrs.end(), t.out, t.out + t.nout);
  kernelOnStream(s, std::move(ptrs), t.nout ? t.count * kernels::dtypeSize(t.dtype) : 0, [t] { kernels::runAll(t); });
}

Stream EmulatedBackend::createStream(int device) {
  auto* q = new Queue(device);
  std::lock_guard<std::mutex> l(mu_);
  queues_.insert(q);
  return q;
}

void EmulatedBackend::destroyStream(Stream s) noexcept {
  Queue* q = &queueOf(s);
  {
    std::lock_guard<std::mutex> l(mu_);
    queues_.erase(q);
  }
  delete q;  // runs what is queued first
}

void EmulatedBackend::enqueue(Stream s, std::function<void()> work) {
  Queue& q = queueOf(s);
  q.push([&q, work = std::move(work)] {
    if (q.failed.empty()) work();
  });
}

void* EmulatedBackend::recordEvent(Stream s) {
  Queue& q = queueOf(s);
  auto* e = new EventRec;
  q.push([e, &q] {
    e->error = q.failed;
    e->done.store(true, std::memory_order_release);
    EventRec::release(e);
  });
  return e;
}

bool EmulatedBackend::eventDone(void* event) {
  auto* e = static_cast<EventRec*>(event);
  if (!e->done.load(std::memory_order_acquire)) return false;
  if (!e->error.empty()) throwError(gyreUnhandledCudaError, "the stream failed: " + e->error);
  return true;
}

void EmulatedBackend::destroyEvent(void* event) noexcept { EventRec::release(static_cast<EventRec*>(event)); }

void* EmulatedBackend::makeGate() { return new Gate; }

void EmulatedBackend::waitGate(Stream s, void* gate) {
  auto* g = static_cast<Gate*>(gate);
  Queue& q = queueOf(s);
  {
    std::lock_guard<std::mutex> l(g->mu);
    if (!g->open && !g->waited) {
      g->waited = true;
      heldGates_.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  g->refs.fetch_add(1, std::memory_order_relaxed);
  q.push([g] {
    {
      std::unique_lock<std::mutex> l(g->mu);
      g->cv.wait(l, [&] { return g->open; });
    }
    Gate::release(g);
  });
}

void EmulatedBackend::openGate(void* gate) noexcept {
  tlsOpensGates = true;
  auto* g = static_cast<Gate*>(gate);
  std::lock_guard<std::mutex> l(g->mu);
  if (g->waited && !g->open) heldGates_.fetch_sub(1, std::memory_order_acq_rel);
  g->open = true;
  g->cv.notify_all();
}

void EmulatedBackend::destroyGate(void* gate) noexcept { Gate::release(static_cast<Gate*>(gate)); }

void EmulatedBackend::synchronize(Stream s) {
  auto* e = static_cast<EventRec*>(recordEvent(s));
  while (!e->done.load(std::memory_order_acquire)) std::this_thread::yield();
  const std::string error = e->error;
  EventRec::release(e);
  if (!error.empty()) throwError(gyreUnhandledCudaError, "the stream failed: " + error);
}

}  // namespace gyre::device
