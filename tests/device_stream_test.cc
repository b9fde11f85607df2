// Calls on device memory and streams, on the host-emulated device
// (src/device/emulated.h): every rank is a real process over a real
// transport; its "GPU" is host memory the backend hands out and its streams
// are ordered queues run by threads. What is checked is what a CUDA user
// relies on: a call on a stream returns at once, runs after the work
// enqueued before it, and work enqueued after it sees its results; groups
// go as one unit; bad buffers and streams are named; a dead peer or an
// abort releases the stream and is reported, never a hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/support/emulated_gpu.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

using Gpu = EmulatedGpu;

constexpr const char* kTransport = "shm";

// ---- every collective on device buffers, in stream order ----

// The tests' ways to run a device call: "shm" (every rank on one host: the
// single-copy plans on the device buffers, read by the peers' GPUs),
// "shm-staged" (the same with GYRE_DEVICE_DIRECT=0: through host staging)
// and "tcp" (as across hosts: staged). Sets the environment; returns the
// transport.
const char* useWay(const std::string& way) {
  if (way == "shm-staged") {
    setenv("GYRE_DEVICE_DIRECT", "0", 1);
    return "shm";
  }
  return way == "shm" ? "shm" : "tcp";
}

// count: elements per rank's block; copyDelay: how long each copy on a
// stream takes at least.
int everyCollectiveBody(int rank, int n, const gyreUniqueId& id, const std::string& way, size_t count = 1000,
                        std::chrono::microseconds copyDelay = {}) {
  Checker check(rank);
  Gpu gpu;
  gpu.emu.setCopyDelay(copyDelay);
  gyreComm_t comm = initRank(rank, n, id, useWay(way));
  if (!comm) return 1;
  device::Stream s = gpu.emu.createStream(0);
  float* send = gpu.floats(count * n);
  float* recv = gpu.floats(count * n);
  auto expectAll = [&](const std::vector<float>& got, const std::function<float(size_t)>& want,
                       const std::string& what) {
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want(i)) {
        check.fail(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                   std::to_string(want(i)));
        return;
      }
  };
  std::vector<float> mine(count * n);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(rank * 10000 + i);
  const float rankSum = static_cast<float>(n * (n - 1) / 2);

  // AllReduce: its input written by the stream just before, its result
  // read by the stream just after.
  gpu.fill(s, send, mine);
  check.expectOk(gyreAllReduce(send, recv, count, gyreFloat32, gyreSum, comm, s), "allreduce");
  expectAll(gpu.read(s, recv, count),
            [&](size_t i) { return rankSum * 10000 + static_cast<float>(n * i); }, "allreduce");
  // Direct: the reduction was the device's, and nothing was staged (the
  // stream copied nothing; the proxy's stream made the copies).
  const bool direct = way == "shm";
  check.expect((gpu.emu.reductionsRun() > 0) == direct,
               std::string("the allreduce ") + (direct ? "ran on the device" : "was staged") + " (" +
                   std::to_string(gpu.emu.reductionsRun()) + " device reductions)");
  // In place.
  gpu.fill(s, recv, std::vector<float>(count, static_cast<float>(rank + 1)));
  check.expectOk(gyreAllReduce(recv, recv, count, gyreFloat32, gyreMax, comm, s), "allreduce in place");
  expectAll(gpu.read(s, recv, count), [&](size_t) { return static_cast<float>(n); }, "allreduce in place");
  // Broadcast from the last rank.
  gpu.fill(s, send, mine);
  check.expectOk(gyreBroadcast(send, recv, count, gyreFloat32, n - 1, comm, s), "broadcast");
  expectAll(gpu.read(s, recv, count), [&](size_t i) { return static_cast<float>((n - 1) * 10000 + i); },
            "broadcast");
  // AllGather.
  check.expectOk(gyreAllGather(send, recv, count, gyreFloat32, comm, s), "allgather");
  expectAll(gpu.read(s, recv, count * n),
            [&](size_t i) { return static_cast<float>((i / count) * 10000 + i % count); }, "allgather");
  // ReduceScatter.
  check.expectOk(gyreReduceScatter(send, recv, count, gyreFloat32, gyreSum, comm, s), "reducescatter");
  expectAll(gpu.read(s, recv, count),
            [&](size_t i) { return rankSum * 10000 + static_cast<float>(n * (rank * count + i)); },
            "reducescatter");
  // AllToAll.
  check.expectOk(gyreAllToAll(send, recv, count, gyreFloat32, comm, s), "alltoall");
  expectAll(gpu.read(s, recv, count * n),
            [&](size_t i) { return static_cast<float>((i / count) * 10000 + rank * count + i % count); },
            "alltoall");
  // AllToAllv with gaps: one element to each peer, at a stride of 3 in the
  // receive buffer; the gaps keep what the stream wrote there before.
  {
    std::vector<size_t> sc(n, 1), sd(n), rc(n, 1), rd(n);
    for (int p = 0; p < n; ++p) sd[p] = p, rd[p] = 3 * p;
    gpu.fill(s, recv, std::vector<float>(3 * n, -1.0f));
    check.expectOk(gyreAllToAllv(send, sc.data(), sd.data(), recv, rc.data(), rd.data(), gyreFloat32, comm, s),
                   "alltoallv");
    expectAll(gpu.read(s, recv, 3 * n),
              [&](size_t i) { return i % 3 ? -1.0f : static_cast<float>((i / 3) * 10000 + rank); }, "alltoallv");
  }
  // Reduce to rank 0: the others' receive buffers are not touched.
  gpu.fill(s, recv, std::vector<float>(count, -2.0f));
  check.expectOk(gyreReduce(send, recv, count, gyreFloat32, gyreSum, 0, comm, s), "reduce");
  expectAll(gpu.read(s, recv, count),
            [&](size_t i) { return rank == 0 ? rankSum * 10000 + static_cast<float>(n * i) : -2.0f; }, "reduce");
  // Send/Recv in a group: a ring shift, one unit on the stream.
  check.expectOk(gyreGroupStart(), "group start");
  gyreSend(send, count, gyreFloat32, (rank + 1) % n, comm, s);
  gyreRecv(recv, count, gyreFloat32, (rank + n - 1) % n, comm, s);
  check.expectOk(gyreGroupEnd(), "group end");
  expectAll(gpu.read(s, recv, count),
            [&](size_t i) { return static_cast<float>(((rank + n - 1) % n) * 10000 + i); }, "send/recv");
  // A host call after stream calls runs after them (call order).
  std::vector<float> host(count, 1.0f);
  check.expectOk(gyreAllReduce(host.data(), host.data(), count, gyreFloat32, gyreSum, comm, nullptr),
                 "host allreduce after stream calls");
  check.expect(host[0] == static_cast<float>(n), "the host call's result");
  gyreResult_t async = gyreSuccess;
  check.expectOk(gyreCommGetAsyncError(comm, &async), "async error query");
  check.expect(async == gyreSuccess, "no async error");
  check.expectOk(gyreCommDestroy(comm), "destroy");
  gpu.emu.destroyStream(s);
  return check.failures() ? 1 : 0;
}

class DeviceCollectives : public testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(DeviceCollectives, EveryCollectiveRunsInStreamOrderOnDeviceBuffers) {
  const std::string way = std::get<0>(GetParam());
  RunOutcome out = runRanks(std::get<1>(GetParam()), [&](int r, int n, const gyreUniqueId& id) {
    return everyCollectiveBody(r, n, id, way);
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

std::string wayName(const char* way) {
  std::string s = way;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceCollectives,
                         testing::Combine(testing::Values("shm", "shm-staged", "tcp"), testing::Values(2, 3)),
                         [](const auto& p) {
                           return wayName(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param));
                         });

// Inputs of several MiB come in through staging in pieces, the call
// starting on the first (docs/gpu.md, "Pipelined staging"). With every
// copy slowed down, a step that read a piece before its copy had written it
// would read what the staging block held before: each call checks every
// element.
class DevicePipelinedCollectives : public testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(DevicePipelinedCollectives, LargeInputsArriveInPiecesAndEveryStepReadsWhatArrived) {
  const std::string way = std::get<0>(GetParam());
  RunOutcome out = runRanks(
      std::get<1>(GetParam()),
      [&](int r, int n, const gyreUniqueId& id) {
        // 2.4 MiB per block: over shm, pieces of the default 1 MiB or more;
        // over tcp, of 200001 bytes, which cut elements in two.
        if (way == "tcp") setenv("GYRE_DEVICE_PIECE_BYTES", "200001", 1);
        return everyCollectiveBody(r, n, id, way, 600 * 1000, std::chrono::milliseconds(3));
      });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, DevicePipelinedCollectives,
                         testing::Combine(testing::Values("shm-staged", "tcp"), testing::Values(2, 3)),
                         [](const auto& p) {
                           return wayName(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param));
                         });

// ---- a call on a stream returns before the stream reaches it ----

TEST(DeviceStreams, ACallReturnsAtOnceAndWaitsForTheWorkBeforeIt) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Gpu gpu;
    gyreComm_t comm = initRank(rank, n, id, kTransport);
    if (!comm) return 1;
    device::Stream s = gpu.emu.createStream(0);
    float* buf = gpu.floats(4);
    // The stream is held by earlier work that writes the input late.
    std::atomic<bool> release{false};
    gpu.holdUntil(s, release);
    gpu.fill(s, buf, {1, 2, 3, static_cast<float>(rank)});
    check.expectOk(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, comm, s), "enqueue while the stream is held");
    release.store(true);  // only now can the input be written
    const std::vector<float> got = gpu.read(s, buf, 4);
    check.expect(got[0] == 2 && got[2] == 6 && got[3] == 1, "the call saw the input written before it");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    gpu.emu.destroyStream(s);
    return check.failures() ? 1 : 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- bad buffers and streams are named ----

TEST(DeviceStreams, BadBuffersAndStreamsAreErrorsNamingThem) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Gpu gpu;
    gyreComm_t comm = initRank(rank, n, id, kTransport);
    if (!comm) return 1;
    device::Stream s0 = gpu.emu.createStream(0), s1 = gpu.emu.createStream(1);
    float* dev0 = gpu.floats(16, 0);
    float* dev1 = gpu.floats(16, 1);
    std::vector<float> host(16, 1.0f);
    auto refused = [&](gyreResult_t r, gyreResult_t code, const std::string& words, const std::string& what) {
      const std::string msg = gyreGetLastError(comm);
      check.expect(r == code, what + ": got " + gyreGetErrorString(r) + " (" + msg + ")");
      check.expect(contains(msg, words), what + ": the message says '" + words + "': " + msg);
    };
    refused(gyreAllReduce(host.data(), dev0, 16, gyreFloat32, gyreSum, comm, s0), gyreInvalidArgument,
            "sendbuff is pageable host memory", "host memory on a stream");
    refused(gyreAllReduce(dev0, dev0, 16, gyreFloat32, gyreSum, comm, nullptr), gyreInvalidArgument,
            "stream is NULL", "device memory without a stream");
    refused(gyreAllReduce(dev0, dev1, 16, gyreFloat32, gyreSum, comm, s0), gyreInvalidArgument,
            "recvbuff is device memory of GPU 1, but the stream is GPU 0's", "a buffer of another GPU");
    refused(gyreAllReduce(dev1, dev1, 16, gyreFloat32, gyreSum, comm, s0), gyreInvalidArgument, "GPU 1",
            "buffers of the stream's other GPU");
    int notAStream = 0;
    refused(gyreAllReduce(dev0, dev0, 16, gyreFloat32, gyreSum, comm, &notAStream), gyreInvalidArgument,
            "is not a stream", "a handle that is not a stream");
    check.expectOk(gyreGroupStart(), "group start");
    gyreAllReduce(dev0, dev0, 16, gyreFloat32, gyreSum, comm, s0);
    gyreAllReduce(host.data(), host.data(), 16, gyreFloat32, gyreSum, comm, nullptr);
    refused(gyreGroupEnd(), gyreInvalidUsage, "mixes calls on CUDA streams with host calls", "a mixed group");
    // None of it broke the communicator: a good call still works.
    gpu.fill(s0, dev0, std::vector<float>(16, 2.0f));
    check.expectOk(gyreAllReduce(dev0, dev0, 16, gyreFloat32, gyreSum, comm, s0), "a good call after");
    check.expect(gpu.read(s0, dev0, 16)[15] == 2.0f * n, "its result");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    gpu.emu.destroyStream(s0);
    gpu.emu.destroyStream(s1);
    return check.failures() ? 1 : 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- pinned host memory is device-reachable: allowed on a stream ----

TEST(DeviceStreams, PinnedHostMemoryWorksOnAStream) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Gpu gpu;
    gyreComm_t comm = initRank(rank, n, id, kTransport);
    if (!comm) return 1;
    device::Stream s = gpu.emu.createStream(0);
    auto* pinned = static_cast<float*>(gpu.emu.allocateHost(8 * sizeof(float)));
    for (int i = 0; i < 8; ++i) pinned[i] = static_cast<float>(rank + i);
    check.expectOk(gyreAllReduce(pinned, pinned, 8, gyreFloat32, gyreSum, comm, s), "pinned on a stream");
    gpu.emu.synchronize(s);
    check.expect(pinned[7] == static_cast<float>(1 + 14), "its result");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    gpu.emu.destroyStream(s);
    return check.failures() ? 1 : 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- gyreMemAlloc gives device memory; the legacy stream as NCCL's NULL ----

TEST(DeviceStreams, MemAllocGivesDeviceMemoryAndTheLegacyStreamIsNcclsNull) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Gpu gpu;
    gyreComm_t comm = initRank(rank, n, id, kTransport);
    if (!comm) return 1;
    int dev = -2;
    check.expectOk(gyreCommDevice(comm, &dev), "comm device");
    check.expect(dev == 0, "the communicator is GPU 0's: " + std::to_string(dev));
    void* p = nullptr;
    check.expectOk(gyreMemAlloc(&p, 64 * sizeof(float)), "gyreMemAlloc");
    check.expect(gpu.emu.classify(p).kind == device::MemoryKind::Device, "gyreMemAlloc gave device memory");
    auto* buf = static_cast<float*>(p);
    const device::Stream legacy = GYRE_STREAM_LEGACY;
    gpu.fill(legacy, buf, std::vector<float>(64, static_cast<float>(rank + 1)));
    check.expectOk(gyreAllReduce(buf, buf, 64, gyreFloat32, gyreSum, comm, GYRE_STREAM_LEGACY),
                   "device memory on the legacy stream");
    check.expect(gpu.read(legacy, buf, 64)[63] == 3.0f, "enqueued on the legacy stream, in order");
    // Host memory on the legacy stream: a host call, done on return.
    std::vector<float> host(8, 1.0f);
    check.expectOk(gyreAllReduce(host.data(), host.data(), 8, gyreFloat32, gyreSum, comm, GYRE_STREAM_LEGACY),
                   "host memory on the legacy stream");
    check.expect(host[7] == 2.0f, "a host call: its result is there when it returns");
    check.expectOk(gyreMemFree(p), "gyreMemFree of device memory");
    check.expect(gpu.emu.classify(p).kind == device::MemoryKind::Host, "freed through the device");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures() ? 1 : 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- a dead peer releases the stream, and the error names it ----

// Three ranks on shared memory make call(comm, stream, rank, n) (which
// returns its first failure) once, which firstCall's checks may look at;
// then rank 2 dies and the others make it again: their streams are
// released, the async error is a remote one, and the next call fails
// naming rank 2.
template <class Call, class FirstCall>
void peerKilledBetweenCalls(Call call, FirstCall firstCall) {
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      3,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        gyreComm_t comm = initRank(rank, n, id, kTransport, 30000);
        if (!comm) return 1;
        device::Stream s = gpu.emu.createStream(0);
        check.expectOk(call(gpu, comm, s, rank, n), "first call");
        gpu.emu.synchronize(s);
        firstCall(check, gpu, s, rank, n);
        if (rank == 2) kill(getpid(), SIGKILL);
        check.expectOk(call(gpu, comm, s, rank, n), "enqueue the second");
        gpu.emu.synchronize(s);  // must return: the stream is released
        gyreResult_t async = gyreSuccess;
        check.expectOk(gyreCommGetAsyncError(comm, &async), "async error query");
        check.expect(async == gyreRemoteError, std::string("async error is a remote error: ") +
                                                   gyreGetErrorString(async));
        const gyreResult_t next = call(gpu, comm, s, rank, n);
        const std::string msg = gyreGetLastError(comm);
        check.expect(next != gyreSuccess, "the next call reports the failure");
        check.expect(contains(msg, "rank 2"), "and names the dead rank: " + msg);
        gyreCommDestroy(comm);
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    if (r.rank == 2) {
      EXPECT_EQ(r.signal, SIGKILL) << out.describe();
    } else {
      EXPECT_EQ(r.exitCode, 0) << out.describe();
    }
  }
}

TEST(DeviceStreams, APeerKilledWhileACallIsEnqueuedReleasesTheStream) {
  peerKilledBetweenCalls(
      [](Gpu& gpu, gyreComm_t comm, device::Stream s, int, int) {
        static float* buf = gpu.floats(1 << 16);  // (one rank's process: one buffer)
        return gyreAllReduce(buf, buf, 1 << 16, gyreFloat32, gyreSum, comm, s);
      },
      [](Checker&, Gpu&, device::Stream, int, int) {});
}

// The same with the pieces as device messages (docs/gpu.md, "Device
// messages"): a Send/Recv ring shift of 4 MiB, more than a connection's
// slots hold, so the survivors wait for room at the dead rank or for its
// pieces. The shift's group gives its first failure (a call on a failed
// communicator fails where it is made, inside the group).
TEST(DeviceStreams, APeerKilledDuringDeviceMessagesReleasesTheStream) {
  constexpr size_t kCount = 1 << 20;
  static float *in = nullptr, *recv = nullptr;  // (one rank's process: its buffers)
  peerKilledBetweenCalls(
      [](Gpu& gpu, gyreComm_t comm, device::Stream s, int rank, int n) {
        if (!in) {
          in = gpu.floats(kCount);
          recv = gpu.floats(kCount);
          gpu.fill(s, in, std::vector<float>(kCount, static_cast<float>(rank)));
        }
        gyreGroupStart();
        const gyreResult_t r[] = {gyreSend(in, kCount, gyreFloat32, (rank + 1) % n, comm, s),
                                  gyreRecv(recv, kCount, gyreFloat32, (rank + n - 1) % n, comm, s), gyreGroupEnd()};
        for (gyreResult_t x : r)
          if (x != gyreSuccess) return x;
        return gyreSuccess;
      },
      [](Checker& check, Gpu& gpu, device::Stream s, int rank, int n) {
        const std::vector<float> got = gpu.read(s, recv, 4);
        check.expect(got[0] == static_cast<float>((rank + n - 1) % n), "the first shift's data");
        check.expect(gpu.emu.deviceToDeviceCopies() > 0, "its pieces went device to device");
      });
}

// ---- an abort ends an enqueued call, and releases its stream ----

TEST(DeviceStreams, AnAbortReleasesTheStreamOfAnEnqueuedCall) {
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      2,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        gyreComm_t comm = initRank(rank, n, id, kTransport, 0);  // no timeout: only the abort ends it
        if (!comm) return 1;
        if (rank == 1) {
          // Waits for rank 0, which aborts instead: the barrier fails.
          const gyreResult_t r = gyreBarrier(comm, nullptr);
          check.expect(r != gyreSuccess, "the peer of an aborted rank is told");
          gyreCommDestroy(comm);
          return check.failures() ? 1 : 0;
        }
        device::Stream s = gpu.emu.createStream(0);
        float* buf = gpu.floats(16);
        std::atomic<bool> release{false};
        gpu.holdUntil(s, release);
        check.expectOk(gyreAllReduce(buf, buf, 16, gyreFloat32, gyreSum, comm, s), "enqueue");
        check.expectOk(gyreCommAbort(comm), "abort while the call waits for its stream");
        release.store(true);
        gpu.emu.synchronize(s);  // returns: the abort released the gate
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- many calls in flight: staging is reused and bounded ----

// Each call stages 16 MiB; 80 of them enqueued back to back are five times
// the communicator's staging limit, so the caller waits for the stream to
// give blocks back, and every call still sees the one before.
TEST(DeviceStreams, ManyCallsInFlightShareBoundedStaging) {
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      2,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        gyreComm_t comm = initRank(rank, n, id, kTransport, 60000);
        if (!comm) return 1;
        device::Stream s = gpu.emu.createStream(0);
        const size_t count = size_t{4} << 20;
        float* buf = gpu.floats(count);
        gpu.fill(s, buf, std::vector<float>(count, 1.0f));
        const int calls = 80;
        for (int i = 0; i < calls && !check.failures(); ++i)
          check.expectOk(gyreAllReduce(buf, buf, count, gyreFloat32, gyreSum, comm, s), "call " + std::to_string(i));
        const std::vector<float> got = gpu.read(s, buf, count);
        const float want = std::ldexp(1.0f, calls);  // doubled by every call (2 ranks)
        check.expect(got[0] == want && got[count - 1] == want,
                     "each call saw the one before: " + std::to_string(got[0]));
        gyreResult_t async = gyreSuccess;
        check.expectOk(gyreCommGetAsyncError(comm, &async), "async error query");
        check.expect(async == gyreSuccess, "no async error");
        check.expectOk(gyreCommDestroy(comm), "destroy");
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- memory freed before the stream ran: an error, never a crash ----

TEST(DeviceStreams, MemoryFreedBeforeTheStreamRanIsAnErrorNotACrash) {
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      2,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        // Staged: the stream's own copy touches the freed memory. (A direct
        // call's proxy finds the memory gone when it registers it for the
        // peers, unless an allocation took its place meanwhile: a use after
        // free that no one can tell from a use.)
        setenv("GYRE_DEVICE_DIRECT", "0", 1);
        gyreComm_t comm = initRank(rank, n, id, kTransport, 30000);
        if (!comm) return 1;
        device::Stream s = gpu.emu.createStream(0);
        float* buf = gpu.floats(1024);
        if (rank == 0) {
          // The call is enqueued behind held work; its buffer is freed
          // before the stream gets to it.
          std::atomic<bool> release{false};
          gpu.holdUntil(s, release);
          check.expectOk(gyreAllReduce(buf, buf, 1024, gyreFloat32, gyreSum, comm, s), "enqueue");
          gpu.emu.free(buf);
          release.store(true);
          bool failed = false;
          try {
            gpu.emu.synchronize(s);
          } catch (const Error& e) {
            failed = contains(e.what(), "freed");
          }
          check.expect(failed, "the stream failed, saying why");
        } else {
          check.expectOk(gyreAllReduce(buf, buf, 1024, gyreFloat32, gyreSum, comm, s), "enqueue");
          gpu.emu.synchronize(s);  // released when rank 0 fails
        }
        // A host call queues behind the enqueued one: it reports the failure.
        const gyreResult_t next = gyreBarrier(comm, nullptr);
        const std::string msg = gyreGetLastError(comm);
        check.expect(next != gyreSuccess, "the next call reports it");
        check.expect(rank == 0 ? contains(msg, "freed") : contains(msg, "rank 0"),
                     "the message says what happened: " + msg);
        gyreResult_t async = gyreSuccess;
        check.expectOk(gyreCommGetAsyncError(comm, &async), "async error query");
        check.expect(async != gyreSuccess, "and gyreCommGetAsyncError");
        gyreCommDestroy(comm);
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
