// Device memory shared between processes of one host (backend.h:
// exportMemory, openMemory, closeMemory), as CUDA IPC shares it: two real
// processes, a handle sent through a pipe, reads and writes seen on both
// sides, and every way of getting it wrong named. On the emulated device in
// every build; on CUDA's (label gpu) where there is a GPU.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "device/emulated.h"
#include "tests/support/error_of.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Two pipes between the ranks: the handle one way, "done" the other.
struct Pipes {
  int toPeer[2], fromPeer[2];
  Pipes() {
    if (pipe(toPeer) != 0 || pipe(fromPeer) != 0) throw std::runtime_error("pipe");
  }
  ~Pipes() {
    for (int fd : {toPeer[0], toPeer[1], fromPeer[0], fromPeer[1]}) close(fd);
  }
};

template <class T>
bool sendAll(int fd, const T& v) {
  return write(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v);
}
template <class T>
bool recvAll(int fd, T& v) {
  return read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v);
}

constexpr size_t kBytes = 1 << 20;
constexpr size_t kOffset = 4096 + 256;  // the shared pointer is inside the allocation, not at its start

// Rank 0 allocates, fills and exports a pointer inside its allocation;
// rank 1 opens it, checks what rank 0 wrote, writes a part back and closes
// it; rank 0 sees that part. Both on `b` (made in the rank, after fork).
// shareable: the allocation is allocateShareable's (gyreMemAlloc's).
int shareBody(int rank, device::Backend& b, Pipes& p, bool shareable = false) {
  Checker check(rank);
  if (rank == 0) {
    auto* base = static_cast<unsigned char*>(shareable ? b.allocateShareable(kBytes, 0) : b.allocate(kBytes, 0));
    std::vector<unsigned char> pattern(kBytes);
    for (size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 1);
    b.copy(base, pattern.data(), kBytes);
    const device::ExportedMemory e = b.exportMemory(base + kOffset);
    check.expect(e.offset == kOffset, "the offset within the allocation is " + std::to_string(e.offset));
    check.expect(e.bytes >= kBytes, "the allocation's length covers it: " + std::to_string(e.bytes));
    check.expect(sendAll(p.toPeer[1], e), "send the handle");
    char done = 0;
    check.expect(recvAll(p.fromPeer[0], done) && done == 'x', "the peer is done");
    std::vector<unsigned char> back(kBytes);
    b.copy(back.data(), base, kBytes);
    for (size_t i = 0; i < kBytes; ++i) {
      const bool written = i >= kOffset && i < kOffset + 1000;
      const unsigned char want = written ? static_cast<unsigned char>(0xA5) : pattern[i];
      if (back[i] != want) {
        check.fail("byte " + std::to_string(i) + " is " + std::to_string(back[i]) + ", expected " +
                   std::to_string(want));
        break;
      }
    }
    b.free(base);
    return check.failures();
  }
  device::ExportedMemory e;
  check.expect(recvAll(p.toPeer[0], e), "receive the handle");
  auto* mapped = static_cast<unsigned char*>(b.openMemory(e.handle));
  const device::MemoryInfo m = b.classify(mapped + e.offset);
  check.expect(m.kind == device::MemoryKind::Device, "the peer's memory is device memory here too");
  std::vector<unsigned char> seen(kBytes);
  b.copy(seen.data(), mapped, kBytes);
  for (size_t i = 0; i < kBytes; ++i)
    if (seen[i] != static_cast<unsigned char>(i * 7 + 1)) {
      check.fail("the peer's byte " + std::to_string(i) + " reads " + std::to_string(seen[i]));
      break;
    }
  std::vector<unsigned char> mine(1000, 0xA5);
  b.copy(mapped + e.offset, mine.data(), mine.size());
  b.closeMemory(mapped);
  check.expect(sendAll(p.fromPeer[1], 'x'), "say done");
  return check.failures();
}

TEST(EmulatedIpc, APeerProcessReadsAndWritesDeviceMemoryThroughAHandle) {
  Pipes p;
  RunOutcome out = runRanks(2, [&](int rank, int, const gyreUniqueId&) {
    device::EmulatedBackend b;
    return shareBody(rank, b, p);
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(EmulatedIpc, WhatCannotBeSharedOrOpenedIsAnErrorNamingIt) {
  device::EmulatedBackend b;
  // Host memory, pinned or not, is not device memory.
  std::vector<char> host(64);
  EXPECT_PRED2(contains, errorOf([&] { b.exportMemory(host.data()); }), "not in device memory");
  void* pinned = b.allocateHost(64);
  EXPECT_PRED2(contains, errorOf([&] { b.exportMemory(pinned); }), "not in device memory");
  b.freeHost(pinned);
  // A process cannot open its own handle (CUDA's rule too).
  void* d = b.allocate(4096, 1);
  const device::ExportedMemory e = b.exportMemory(d);
  EXPECT_PRED2(contains, errorOf([&] { b.openMemory(e.handle); }), "process that made it");
  // Bytes that are no handle.
  device::IpcHandle garbage;
  std::memset(garbage.bytes, 0x5A, sizeof garbage.bytes);
  EXPECT_PRED2(contains, errorOf([&] { b.openMemory(garbage); }), "not an IPC handle");
  // A peer's memory is not the opener's to free; closing what was never
  // opened does nothing.
  b.closeMemory(d);
  EXPECT_EQ(b.classify(d).kind, device::MemoryKind::Device);
  b.free(d);
}

// The owner has exited: its memory is gone, and opening the handle says so
// instead of mapping anything.
TEST(EmulatedIpc, AHandleWhoseOwnerExitedCannotBeOpened) {
  Pipes p;
  RunOutcome out = runRanks(2, [&](int rank, int, const gyreUniqueId&) {
    Checker check(rank);
    device::EmulatedBackend b;
    if (rank == 0) {
      void* d = b.allocate(4096, 0);
      check.expect(sendAll(p.toPeer[1], b.exportMemory(d)), "send the handle");
      return check.failures();  // exits: its memfd closes
    }
    device::ExportedMemory e;
    check.expect(recvAll(p.toPeer[0], e), "receive the handle");
    pid_t owner;
    std::memcpy(&owner, e.handle.bytes + 8, sizeof owner);  // EmulatedIpc's pid
    // Until the owner has exited (a pidfd becomes readable once it has,
    // after its files are closed); the run's deadline bounds the wait.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, owner, 0));
    check.expect(pidfd >= 0, "pidfd_open");
    pollfd pfd{pidfd, POLLIN, 0};
    check.expect(poll(&pfd, 1, -1) == 1, "the owner exits");
    close(pidfd);
    const std::string why = errorOf([&] { b.openMemory(e.handle); });
    check.expect(contains(why, "cannot open process " + std::to_string(owner)), "the error names the owner: " + why);
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// The same exchange on CUDA's backend, two processes sharing GPU 0 (label
// gpu). CUDA is first touched in the ranks, after the fork; a rank without
// a usable CUDA backend exits 77 and the test skips. shareable: rank 0's
// memory is allocateShareable's (gyreMemAlloc's).
void shareOnCuda(bool shareable) {
  Pipes p;
  RunOutcome out = runRanks(2, [&](int rank, int, const gyreUniqueId&) {
    std::string why;
    device::Backend* b = device::backend(&why);
    if (!b || std::strcmp(b->name(), "cuda") != 0) {
      std::printf("no CUDA backend: %s\n", why.c_str());
      return 77;
    }
    return shareBody(rank, *b, p, shareable);
  });
  if (!out.timedOut && !out.ranks.empty() && out.ranks[0].exitCode == 77)
    GTEST_SKIP() << "no GPU: " << out.ranks[0].output;
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// cudaMalloc's memory, through cudaIpc* handles.
TEST(CudaIpc, APeerProcessReadsAndWritesDeviceMemoryThroughAHandle) { shareOnCuda(false); }

// gyreMemAlloc's memory on CUDA: virtual memory with a POSIX descriptor,
// which the peer takes with pidfd_getfd and maps.
TEST(CudaIpc, ShareableMemoryIsMappedByAPeerProcess) { shareOnCuda(true); }

}  // namespace
}  // namespace gyre::test
