#include "core/device_engine.h"

#include <chrono>
#include <thread>

#include "base/clock.h"

namespace gyre::core {

void awaitEvent(device::Backend& b, void* event, FunctionRef<void()> whileWaiting) {
  for (int spins = 0; !b.eventDone(event); ++spins) {
    whileWaiting();
    if (spins < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

ProxyEngine::ProxyEngine(device::Backend& b, int device, std::function<void(int64_t)> check)
    : b_(b), device_(device), check_(std::move(check)), stream_(b.createStream(device)) {}

ProxyEngine::~ProxyEngine() {
  b_.destroyStream(stream_);  // after what it holds has run: then the memory can go
  try {
    if (scratch_) oldScratch_.push_back(scratch_);
    if (bounce_) oldBounce_.push_back(bounce_);
    for (void* p : oldScratch_) b_.free(p);
    for (void* p : oldBounce_) b_.freeHost(p);
  } catch (const std::exception&) {
    // A device that failed keeps its memory: nothing more to do here.
  }
}

void ProxyEngine::copy(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  b_.copyOnStream(dst, src, bytes, stream_);
  pending_ = true;
}

void ProxyEngine::reduce(const kernels::ReduceTask& t) {
  if (!t.count) return;
  b_.reduceOnStream(t, stream_);
  pending_ = true;
}

void ProxyEngine::reduceAll(const kernels::ReduceAllTask& t) {
  if (!t.count || !t.nout) return;
  b_.reduceAllOnStream(t, stream_);
  pending_ = true;
}

void ProxyEngine::flush() {
  if (!pending_) return;
  void* e = b_.recordEvent(stream_);
  const int64_t start = nowNs();
  try {
    awaitEvent(b_, e, [&] { check_(start); });
  } catch (...) {
    b_.destroyEvent(e);
    throw;
  }
  b_.destroyEvent(e);
  pending_ = false;
}

void ProxyEngine::drain() noexcept {
  try {
    b_.synchronize(stream_);
  } catch (const std::exception&) {
    // A failed stream has nothing left to run.
  }
  pending_ = false;
}

namespace {
// p holds `have` bytes from alloc; makes it at least `need`, in powers of
// two so that a growing call size allocates a few times only (what p held
// is not kept). The old block goes to `old`, not freed (the engine's
// comment says why); the powers of two bound what waits there by what p
// holds.
template <class Alloc>
void* grow(void*& p, size_t& have, size_t need, std::vector<void*>& old, Alloc alloc) {
  if (need <= have) return p;
  size_t bytes = size_t{1} << 16;
  while (bytes < need) bytes *= 2;
  void* fresh = alloc(bytes);
  if (p) old.push_back(p);
  p = fresh;
  have = bytes;
  return p;
}
}  // namespace

void* ProxyEngine::hostBounce(size_t bytes) {
  return grow(bounce_, bounceBytes_, bytes, oldBounce_, [&](size_t n) { return b_.allocateHost(n); });
}

void* ProxyEngine::scratch(size_t bytes) {
  return grow(scratch_, scratchBytes_, bytes, oldScratch_, [&](size_t n) { return b_.allocate(n, device_); });
}

}  // namespace gyre::core
