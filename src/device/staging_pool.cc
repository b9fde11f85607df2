#include "device/staging_pool.h"

#include <bit>
#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/log.h"

namespace gyre::device {

namespace {

// Capacities are powers of two from 64 KiB, so blocks fit calls of nearby
// sizes and the pool does not fragment into one block per size.
size_t capacityFor(size_t bytes) {
  constexpr size_t kMin = size_t{64} << 10;
  return bytes <= kMin ? kMin : std::bit_ceil(bytes);
}

}  // namespace

bool StagingPool::doneLocked(Retired& r) {
  while (!r.events.empty()) {
    bool done = true;
    try {
      done = b_.eventDone(r.events.back());
    } catch (const std::exception&) {
      // A failed stream runs nothing more: it no longer touches the block.
    }
    if (!done) return false;
    b_.destroyEvent(r.events.back());
    r.events.pop_back();
  }
  return true;
}

void StagingPool::reapLocked() {
  for (size_t i = 0; i < retired_.size();) {
    if (!doneLocked(retired_[i])) {
      ++i;
      continue;
    }
    for (const Block& k : retired_[i].blocks) free_.emplace(k.bytes, k.p);
    if (!retired_[i].blocks.empty()) --callsInFlight_;
    retired_[i] = std::move(retired_.back());
    retired_.pop_back();
  }
}

StagingPool::Block StagingPool::acquire(size_t bytes, FunctionRef<void()> whileWaiting, bool firstOfCall) {
  const size_t want = capacityFor(bytes);
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      reapLocked();
      // The smallest free block that fits, unless it is far too big (a
      // 1 GiB block held by a 64 KiB call would starve larger ones).
      auto it = free_.lower_bound(want);
      Block k;
      if (it != free_.end() && it->first <= want * 4) {
        k = {it->second, it->first};
        free_.erase(it);
      } else if (!firstOfCall || callsInFlight_ < maxInFlight_) {
        // A new block, unless enough calls hold blocks already: then one of
        // theirs comes back soon, and a pool that grew with every call in
        // flight would pay for pinning memory it then keeps. Room is made
        // with free blocks that do not fit, largest first.
        while (total_ + want > limit_ && !free_.empty()) {
          auto last = std::prev(free_.end());
          b_.freeHost(last->second);
          total_ -= last->first;
          free_.erase(last);
        }
        if (total_ + want <= limit_ || total_ == 0) {
          k = {static_cast<unsigned char*>(b_.allocateHost(want)), want};
          total_ += want;
        }
      }
      if (k.p) {
        if (firstOfCall) ++callsInFlight_;
        return k;
      }
    }
    // At a limit: wait for the streams to give blocks back. Asleep, not
    // spinning: the caller is calls ahead of the proxy and the streams, and
    // the cores are theirs.
    whileWaiting();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void StagingPool::retire(std::vector<Block> blocks, std::vector<void*> events) {
  std::lock_guard<std::mutex> l(mu_);
  retired_.push_back({std::move(blocks), std::move(events)});
}

void StagingPool::abandon(const std::vector<Block>& blocks) {
  std::lock_guard<std::mutex> l(mu_);
  for (const Block& k : blocks) total_ -= k.bytes;
  if (!blocks.empty()) --callsInFlight_;
  if (!blocks.empty()) GYRE_WARN("device staging: %zu block(s) left to a stream that failed", blocks.size());
}

size_t StagingPool::heldBytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return total_;
}

void StagingPool::shutdown(int64_t waitMs) noexcept {
  std::lock_guard<std::mutex> l(mu_);
  const int64_t until = nowNs() + waitMs * 1'000'000;
  for (;;) {
    reapLocked();
    if (retired_.empty() || nowNs() >= until) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (auto& [bytes, p] : free_) {
    try {
      b_.freeHost(p);
    } catch (const std::exception& e) {
      GYRE_WARN("device staging: %s", e.what());
    }
    total_ -= bytes;
  }
  free_.clear();
  if (!retired_.empty())
    GYRE_WARN("device staging: %zu call(s) still enqueued on streams that did not run: their blocks are left",
              retired_.size());
  for (Retired& r : retired_)
    for (void* e : r.events) b_.destroyEvent(e);
  retired_.clear();
}

}  // namespace gyre::device
