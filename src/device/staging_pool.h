// Pinned host blocks that device buffers are staged through, reused from
// call to call: allocating pinned memory costs milliseconds and freeing it
// waits for the whole device, so neither belongs on a call's path. A block
// a stream may still read or write (its copies are enqueued) is retired
// with events on those streams and comes back only once they are done.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "base/function_ref.h"
#include "device/backend.h"

namespace gyre::device {

class StagingPool {
 public:
  struct Block {
    unsigned char* p = nullptr;
    size_t bytes = 0;  // its capacity (at least what was asked)
  };

  // limitBytes: what the pool may hold before acquire() waits for streams
  // to give blocks back (a single larger request is still served);
  // maxInFlight: past how many calls holding blocks (enqueued, or done but
  // with copies out still on their streams) a call that finds no free
  // block waits for one to come back instead of allocating. The proxy runs
  // calls one after the other, so a few in flight keep the streams' copies
  // overlapped with it; allocating for every call in flight would only
  // grow the pool.
  StagingPool(Backend& b, size_t limitBytes, size_t maxInFlight = 8)
      : b_(b), limit_(limitBytes), maxInFlight_(maxInFlight) {}
  // Waits (up to waitMs) for retired blocks' streams, then frees what it
  // holds; a block whose stream never got there is left allocated, never
  // freed under a stream that may still use it.
  void shutdown(int64_t waitMs) noexcept;
  ~StagingPool() { shutdown(0); }
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A block of at least `bytes`, the first of a new call's (firstOfCall) or
  // another of the same call's. While the pool is at a limit it waits for
  // retired blocks, calling `whileWaiting` between looks (it throws to give
  // up: an abort, the timeout).
  Block acquire(size_t bytes, FunctionRef<void()> whileWaiting, bool firstOfCall = true);
  // A call's blocks come back once every event is done; the pool owns the
  // events from here (it destroys them).
  void retire(std::vector<Block> blocks, std::vector<void*> events);
  // A call's blocks that no event can vouch for (their stream failed, or
  // never reached the call): forgotten, never reused or freed.
  void abandon(const std::vector<Block>& blocks);

  size_t heldBytes() const;  // for tests

 private:
  struct Retired {
    std::vector<Block> blocks;
    std::vector<void*> events;
  };
  void reapLocked();  // retired blocks whose events are done become free
  bool doneLocked(Retired& r);

  Backend& b_;
  const size_t limit_;
  const size_t maxInFlight_;
  mutable std::mutex mu_;
  size_t total_ = 0;  // bytes of every block the pool allocated and holds
  size_t callsInFlight_ = 0;  // calls holding blocks (acquired, not yet back)
  std::multimap<size_t, unsigned char*> free_;  // by capacity
  std::vector<Retired> retired_;
};

}  // namespace gyre::device
