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
    if (scratch_) b_.free(scratch_);
    if (bounce_) b_.freeHost(bounce_);
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
// p holds `have` bytes from alloc; makes it at least `need` (what p held is
// not kept). flush runs first: work enqueued may still use the old block.
template <class Alloc, class Free, class Flush>
void* grow(void*& p, size_t& have, size_t need, Alloc alloc, Free release, Flush flush) {
  if (need <= have) return p;
  flush();
  if (p) release(p);
  p = nullptr;
  have = 0;
  p = alloc(need);
  have = need;
  return p;
}
}  // namespace

void* ProxyEngine::hostBounce(size_t bytes) {
  return grow(bounce_, bounceBytes_, bytes, [&](size_t n) { return b_.allocateHost(n); },
              [&](void* p) { b_.freeHost(p); }, [&] { flush(); });
}

void* ProxyEngine::scratch(size_t bytes) {
  return grow(scratch_, scratchBytes_, bytes, [&](size_t n) { return b_.allocate(n, device_); },
              [&](void* p) { b_.free(p); }, [&] { flush(); });
}

}  // namespace gyre::core
