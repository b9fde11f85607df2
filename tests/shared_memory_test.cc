// gyreMemAllocHost's shared allocations and a peer's mappings of them: what a
// reader maps must be the writer's current allocation, never a stale or
// foreign one, and anything it cannot map falls back (nullptr), never crashes.
// And the kernel's reads of a peer's plain memory, at every kind of distance.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "gyre/gyre.h"
#include "kernels/cpu/reduce.h"
#include "transport/shm/peer_mappings.h"
#include "transport/shm/process_reader.h"
#include "transport/shm/shared_allocation.h"

namespace gyre::transport::shm {
namespace {

constexpr size_t kBytes = 3 * 4096 + 100;  // not whole pages

// A child that allocates, fills, reports the key, and on each byte from the
// parent frees and allocates again (the descriptor number comes back).
struct Writer {
  pid_t pid = -1;
  int toChild = -1, fromChild = -1;
  Writer() {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) return;
    pid = fork();
    if (pid == 0) {
      close(down[1]);
      close(up[0]);
      alarm(30);  // a hard bound if the parent goes away
      for (unsigned char round = 1;; ++round) {
        void* p = allocateShared(kBytes);
        if (!p) _exit(2);
        std::memset(p, round, kBytes);
        const SharedMemoryKey key = sharedKeyFor(static_cast<char*>(p) + 5);
        if (write(up[1], &key, sizeof(key)) != sizeof(key)) _exit(3);
        char c;
        if (read(down[0], &c, 1) != 1) _exit(0);
        if (!freeShared(p)) _exit(4);
      }
    }
    close(down[0]);
    close(up[1]);
    toChild = down[1];
    fromChild = up[0];
  }
  SharedMemoryKey key() {
    SharedMemoryKey k;
    EXPECT_EQ(read(fromChild, &k, sizeof(k)), static_cast<ssize_t>(sizeof(k)));
    return k;
  }
  void reallocate() { ASSERT_EQ(write(toChild, "x", 1), 1); }
  ~Writer() {
    close(toChild);
    close(fromChild);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
};

TEST(SharedMemory, KeysNameTheAllocationHoldingAnAddress) {
  void* p = allocateShared(kBytes);
  ASSERT_NE(p, nullptr);
  const SharedMemoryKey k = sharedKeyFor(static_cast<char*>(p) + kBytes - 1);
  EXPECT_NE(k.id, 0u);
  EXPECT_EQ(k.base, reinterpret_cast<uint64_t>(p));
  EXPECT_GE(k.bytes, kBytes);
  EXPECT_EQ(sharedKeyFor(static_cast<char*>(p) + k.bytes).id, 0u);  // one past the mapping
  int stack = 0;
  EXPECT_EQ(sharedKeyFor(&stack).id, 0u);
  EXPECT_TRUE(freeShared(p));
  EXPECT_FALSE(freeShared(p));
  EXPECT_EQ(sharedKeyFor(p).id, 0u);
}

TEST(SharedMemory, PeerMapsTheCurrentAllocationAndNeverAStaleOne) {
  Writer w;
  ASSERT_GT(w.pid, 0);
  PeerMappings peer(w.pid);
  const SharedMemoryKey first = w.key();
  ASSERT_NE(first.id, 0u);
  const auto* a = static_cast<const unsigned char*>(peer.map(first.base + 10, 100, first));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(a[99], 1);
  // Ranges outside the allocation, and empty keys, are not mapped.
  EXPECT_EQ(peer.map(first.base - 1, 10, first), nullptr);
  EXPECT_EQ(peer.map(first.base + first.bytes - 5, 10, first), nullptr);
  EXPECT_EQ(peer.map(first.base, 10, SharedMemoryKey{}), nullptr);

  w.reallocate();
  const SharedMemoryKey second = w.key();
  ASSERT_NE(second.id, first.id);
  EXPECT_EQ(second.fd, first.fd);  // the case the id exists for
  const auto* b = static_cast<const unsigned char*>(peer.map(second.base, kBytes, second));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b[0], 2);
  EXPECT_EQ(b[kBytes - 1], 2);
  // The freed allocation's key now names another memfd: refused.
  PeerMappings fresh(w.pid);
  EXPECT_EQ(fresh.map(first.base, 10, first), nullptr);
  // A key whose descriptor is not a gyre allocation (stdin) is refused.
  SharedMemoryKey foreign = second;
  foreign.fd = 0;
  foreign.id ^= 1;
  EXPECT_EQ(fresh.map(foreign.base, 10, foreign), nullptr);
}

TEST(SharedMemory, GyreMemAllocGivesSharedMemoryAndFreesEither) {
  void* p = nullptr;
  ASSERT_EQ(gyreMemAllocHost(&p, 1 << 20), gyreSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_NE(sharedKeyFor(p).id, 0u);
  EXPECT_EQ(gyreMemFree(p), gyreSuccess);
  ASSERT_EQ(gyreMemAllocHost(&p, 0), gyreSuccess);  // a zero size still frees
  EXPECT_EQ(gyreMemFree(p), gyreSuccess);
  EXPECT_EQ(gyreMemFree(nullptr), gyreSuccess);
}


// A forked child holds a copy of our memory at the same addresses until we
// let it go: a peer whose plain (malloc'd) memory we read through the kernel.
struct Holder {
  pid_t pid = -1;
  int release = -1;
  Holder() {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      close(fds[1]);
      alarm(30);  // a hard bound if the parent goes away
      char c;
      _exit(read(fds[0], &c, 1) < 0 ? 1 : 0);
    }
    close(fds[0]);
    release = fds[1];
  }
  void letGo() {
    if (release < 0) return;
    close(release);
    release = -1;
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "holder status " << status;
  }
  ~Holder() { letGo(); }
};

TEST(ProcessReader, ReadsExactlyAtEveryDistanceBouncingOnlyWhereTheKernelCrawls) {
  constexpr size_t kMax = (1u << 20) + 4096;
  std::vector<unsigned char> theirs(kMax + 4096);
  for (size_t i = 0; i < theirs.size(); ++i) theirs[i] = static_cast<unsigned char>(i * 29 + 3);
  Holder peer;
  ASSERT_GT(peer.pid, 0);
  ProcessReader reader(peer.pid, transport::MemoryCopy{kernels::copy, kernels::repMovsbCrawls});
  uint64_t bounced = 0;
  for (size_t bytes : {size_t{100}, size_t{4095}, size_t{4096}, size_t{300001}, size_t{1} << 20}) {
    for (size_t distance : {0, 1, 8, 31, 32, 63, 64, 100, 2048, 4095}) {
      SCOPED_TRACE(testing::Message() << bytes << " bytes at distance " << distance);
      const unsigned char* from = theirs.data() + 40;
      std::vector<unsigned char> ours(bytes + 2 * 4096 + 64, 0xa5);
      const uintptr_t want = (reinterpret_cast<uintptr_t>(from) + distance) & 4095;
      unsigned char* to = ours.data() + 4096 + ((want - reinterpret_cast<uintptr_t>(ours.data() + 4096)) & 4095);
      const bool crawls = kernels::repMovsbCrawls(to, from);
      ASSERT_EQ(crawls, distance >= 1 && distance <= 63);
      ASSERT_EQ(reader.read(to, reinterpret_cast<uint64_t>(from), bytes), 0);
      ASSERT_EQ(std::memcmp(to, from, bytes), 0);
      for (unsigned char* p = ours.data(); p < to; ++p) ASSERT_EQ(*p, 0xa5) << "before the copy";
      for (unsigned char* p = to + bytes; p < ours.data() + ours.size(); ++p) ASSERT_EQ(*p, 0xa5) << "after the copy";
      if (crawls && bytes >= ProcessReader::kBounceMinBytes) bounced += bytes;
      EXPECT_EQ(reader.bouncedBytes(), bounced);
    }
  }
  // Nothing there to read, bounced or not: an error, never a crash.
  unsigned char sink[8192];
  EXPECT_NE(reader.read(sink, 8, sizeof sink), 0);
  EXPECT_NE(reader.read(sink + 16, 4096 + 24, 5000), 0);
  peer.letGo();
  EXPECT_EQ(reader.read(sink, reinterpret_cast<uint64_t>(theirs.data()), 64), ESRCH);
}

}  // namespace
}  // namespace gyre::transport::shm
