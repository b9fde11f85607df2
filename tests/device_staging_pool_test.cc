// The pinned staging pool (src/device/staging_pool.h) on the emulated
// device: blocks are reused, a retired block comes back only once its
// stream is past the events it was retired with, the limit makes acquire
// wait (and give up when told to), and abandoned blocks are never reused.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "device/emulated.h"
#include "device/staging_pool.h"

namespace gyre::test {
namespace {

using device::StagingPool;

struct HeldStream {
  device::EmulatedBackend& emu;
  device::Stream s;
  std::atomic<bool> release{false};
  explicit HeldStream(device::EmulatedBackend& e) : emu(e), s(e.createStream(0)) {
    emu.enqueue(s, [this] {
      while (!release.load()) std::this_thread::yield();
    });
  }
  ~HeldStream() {
    release.store(true);
    emu.destroyStream(s);
  }
};

const auto neverWait = [] { throw std::runtime_error("acquire waited"); };

TEST(StagingPool, ABlockIsPinnedHostMemoryAndIsReused) {
  device::EmulatedBackend emu;
  StagingPool pool(emu, size_t{1} << 20);
  StagingPool::Block a = pool.acquire(1000, neverWait);
  ASSERT_NE(a.p, nullptr);
  EXPECT_GE(a.bytes, 1000u);
  EXPECT_EQ(emu.classify(a.p).kind, device::MemoryKind::PinnedHost);
  device::Stream s = emu.createStream(0);
  pool.retire({a}, {emu.recordEvent(s)});
  emu.synchronize(s);
  StagingPool::Block b = pool.acquire(2000, neverWait);
  EXPECT_EQ(b.p, a.p) << "a block whose stream is done is reused";
  EXPECT_EQ(pool.heldBytes(), a.bytes);
  pool.retire({b}, {});
  emu.destroyStream(s);
}

TEST(StagingPool, ARetiredBlockWaitsForItsStream) {
  device::EmulatedBackend emu;
  StagingPool pool(emu, size_t{1} << 20);
  HeldStream held(emu);
  StagingPool::Block a = pool.acquire(1000, neverWait);
  pool.retire({a}, {emu.recordEvent(held.s)});
  // Under the limit: a new block, not the one the stream may still use.
  StagingPool::Block b = pool.acquire(1000, neverWait);
  EXPECT_NE(b.p, a.p);
  pool.retire({b}, {});
}

TEST(StagingPool, AtItsLimitAcquireWaitsAndGivesUpWhenTold) {
  device::EmulatedBackend emu;
  const size_t limit = size_t{256} << 10;
  StagingPool pool(emu, limit);
  auto held = std::make_unique<HeldStream>(emu);
  StagingPool::Block a = pool.acquire(limit, neverWait);
  pool.retire({a}, {emu.recordEvent(held->s)});
  int waits = 0;
  EXPECT_THROW(pool.acquire(limit, [&] {
    if (++waits == 100) throw std::runtime_error("given up");
  }),
               std::runtime_error);
  EXPECT_EQ(waits, 100);
  EXPECT_EQ(pool.heldBytes(), a.bytes) << "nothing allocated past the limit";
  // Once the stream moves, the same call gets the block back.
  std::thread mover([&] { held.reset(); });
  StagingPool::Block b = pool.acquire(limit, [] {});
  mover.join();
  EXPECT_EQ(b.p, a.p);
  pool.retire({b}, {});
}

TEST(StagingPool, OneCallLargerThanTheLimitIsStillServed) {
  device::EmulatedBackend emu;
  StagingPool pool(emu, size_t{64} << 10);
  StagingPool::Block a = pool.acquire(size_t{1} << 20, neverWait);
  EXPECT_GE(a.bytes, size_t{1} << 20);
  pool.retire({a}, {});
}

TEST(StagingPool, AbandonedBlocksAreNeverReusedOrFreed) {
  device::EmulatedBackend emu;
  StagingPool pool(emu, size_t{1} << 20);
  StagingPool::Block a = pool.acquire(1000, neverWait);
  pool.abandon({a});
  EXPECT_EQ(pool.heldBytes(), 0u);
  StagingPool::Block b = pool.acquire(1000, neverWait);
  EXPECT_NE(b.p, a.p);
  EXPECT_EQ(emu.classify(a.p).kind, device::MemoryKind::PinnedHost) << "still allocated";
  pool.retire({b}, {});
  pool.shutdown(0);
  EXPECT_EQ(pool.heldBytes(), 0u);
  EXPECT_EQ(emu.classify(b.p).kind, device::MemoryKind::Host) << "freed at shutdown";
}

}  // namespace
}  // namespace gyre::test
