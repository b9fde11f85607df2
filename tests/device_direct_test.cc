// Direct device calls (docs/gpu.md, "Direct device calls"), on the
// host-emulated device: ranks on one host run the single-copy plans on
// their device buffers, each rank's "GPU" (the proxy's stream) reading its
// peers' buffers through IPC and reducing with the device's kernel, and
// every other plan (rings, trees, chains, point to point) moving its pieces
// device to device through the receivers' device slots. What is checked:
// every type and operation gives the host path's bits; ranks whose buffers
// cannot go on the device (pinned host memory) run the same plan staged
// beside ranks that do; the setting must agree across ranks.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/emulated_gpu.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

using Gpu = EmulatedGpu;

size_t sizeOf(gyreDataType_t t) {
  switch (t) {
    case gyreInt8:
    case gyreUint8: return 1;
    case gyreFloat16:
    case gyreBfloat16: return 2;
    case gyreInt32:
    case gyreUint32:
    case gyreFloat32: return 4;
    default: return 8;
  }
}

// v (1 or 2) as one element of t, written at p: exact in every type, and
// so are the sums (at most 6), products (at most 8) and maxima of three
// ranks, whatever order a plan adds them in.
void put(gyreDataType_t t, unsigned char* p, int v) {
  switch (t) {
    case gyreInt8:
    case gyreUint8: *p = static_cast<unsigned char>(v); return;
    case gyreInt32:
    case gyreUint32: {
      const int32_t x = v;
      std::memcpy(p, &x, 4);
      return;
    }
    case gyreInt64:
    case gyreUint64: {
      const int64_t x = v;
      std::memcpy(p, &x, 8);
      return;
    }
    case gyreFloat16: {
      const uint16_t x = v == 1 ? 0x3C00 : 0x4000;
      std::memcpy(p, &x, 2);
      return;
    }
    case gyreBfloat16: {
      const uint16_t x = v == 1 ? 0x3F80 : 0x4000;
      std::memcpy(p, &x, 2);
      return;
    }
    case gyreFloat32: {
      const float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    default: {
      const double x = v;
      std::memcpy(p, &x, 8);
      return;
    }
  }
}

std::vector<unsigned char> valuesOf(gyreDataType_t t, size_t count, int rank) {
  std::vector<unsigned char> out(count * sizeOf(t));
  for (size_t i = 0; i < count; ++i) put(t, out.data() + i * sizeOf(t), 1 + static_cast<int>((i + rank) % 2));
  return out;
}

const gyreDataType_t kTypes[] = {gyreInt8,   gyreUint8,   gyreInt32,   gyreUint32, gyreInt64,
                                 gyreUint64, gyreFloat16, gyreFloat32, gyreFloat64, gyreBfloat16};
const gyreRedOp_t kOps[] = {gyreSum, gyreProd, gyreMax, gyreMin, gyreAvg};

// Every type and operation of AllReduce (out of place and in place) and
// ReduceScatter and Reduce on device buffers, against the same call on host buffers
// (NULL stream: the host's kernels): the same bytes. An odd count leaves
// the kernels unaligned heads and tails.
TEST(DirectDeviceCalls, EveryTypeAndOperationGivesTheHostPathsBits) {
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      3,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        gyreComm_t comm = initRank(rank, n, id, "shm");
        if (!comm) return 1;
        device::Stream s = gpu.emu.createStream(0);
        constexpr size_t kCount = 777;
        for (gyreDataType_t t : kTypes) {
          const size_t esz = sizeOf(t), bytes = kCount * n * esz;
          auto* dsend = static_cast<unsigned char*>(gpu.emu.allocate(bytes, 0));
          auto* drecv = static_cast<unsigned char*>(gpu.emu.allocate(bytes, 0));
          const std::vector<unsigned char> mine = valuesOf(t, kCount * n, rank);
          for (gyreRedOp_t op : kOps) {
            const std::string what = "type " + std::to_string(t) + ", op " + std::to_string(op);
            std::vector<unsigned char> want(bytes), got(bytes);
            // AllReduce, out of place.
            check.expectOk(gyreAllReduce(mine.data(), want.data(), kCount, t, op, comm, nullptr), "host " + what);
            gpu.emu.copy(dsend, mine.data(), bytes);
            check.expectOk(gyreAllReduce(dsend, drecv, kCount, t, op, comm, s), "device " + what);
            gpu.emu.synchronize(s);
            gpu.emu.copy(got.data(), drecv, kCount * esz);
            check.expect(std::memcmp(got.data(), want.data(), kCount * esz) == 0, "allreduce bits: " + what);
            // In place.
            gpu.emu.copy(drecv, mine.data(), bytes);
            check.expectOk(gyreAllReduce(drecv, drecv, kCount, t, op, comm, s), "device in place " + what);
            gpu.emu.synchronize(s);
            gpu.emu.copy(got.data(), drecv, kCount * esz);
            check.expect(std::memcmp(got.data(), want.data(), kCount * esz) == 0,
                         "allreduce in place bits: " + what);
            // ReduceScatter: each rank's block of kCount.
            check.expectOk(gyreReduceScatter(mine.data(), want.data(), kCount, t, op, comm, nullptr),
                           "host reducescatter " + what);
            check.expectOk(gyreReduceScatter(dsend, drecv, kCount, t, op, comm, s), "device reducescatter " + what);
            gpu.emu.synchronize(s);
            gpu.emu.copy(got.data(), drecv, kCount * esz);
            check.expect(std::memcmp(got.data(), want.data(), kCount * esz) == 0, "reducescatter bits: " + what);
            // Reduce to rank 1 (the others keep their slices in scratch).
            const int root = 1;
            check.expectOk(gyreReduce(mine.data(), want.data(), kCount, t, op, root, comm, nullptr),
                           "host reduce " + what);
            check.expectOk(gyreReduce(dsend, drecv, kCount, t, op, root, comm, s), "device reduce " + what);
            gpu.emu.synchronize(s);
            gpu.emu.copy(got.data(), drecv, kCount * esz);
            if (rank == root)
              check.expect(std::memcmp(got.data(), want.data(), kCount * esz) == 0, "reduce bits: " + what);
          }
          gpu.emu.free(dsend);
          gpu.emu.free(drecv);
        }
        check.expect(gpu.emu.reductionsRun() > 0, "the device reduced");
        check.expectOk(gyreCommDestroy(comm), "destroy");
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Rank 1's buffers are pinned host memory: its calls are staged and run
// the same single-copy plans on the host, reading the others' device
// buffers through the transport (a device copy), while ranks 0 and 2 read
// its host buffers through a pinned bounce buffer. Every result is right,
// and only ranks 0 and 2 used their device.
TEST(DirectDeviceCalls, RanksWithHostBuffersRunTheSamePlanStaged) {
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      3,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        gyreComm_t comm = initRank(rank, n, id, "shm");
        if (!comm) return 1;
        device::Stream s = gpu.emu.createStream(0);
        constexpr size_t kCount = 100000;  // several read pieces
        const bool onDevice = rank != 1;
        auto alloc = [&](size_t bytes) {
          return static_cast<float*>(onDevice ? gpu.emu.allocate(bytes, 0) : gpu.emu.allocateHost(bytes));
        };
        float* send = alloc(kCount * n * sizeof(float));
        float* recv = alloc(kCount * n * sizeof(float));
        std::vector<float> mine(kCount * n), got(kCount * n);
        for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(rank * 1000 + i % 1000);
        auto run = [&](gyreResult_t r, const std::string& what, size_t elems) {
          check.expectOk(r, what);
          gpu.emu.synchronize(s);
          gpu.emu.copy(got.data(), recv, elems * sizeof(float));
        };
        auto expectAll = [&](size_t elems, const std::function<float(size_t)>& want, const std::string& what) {
          for (size_t i = 0; i < elems; ++i)
            if (got[i] != want(i)) {
              check.fail(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                         ", expected " + std::to_string(want(i)));
              return;
            }
        };
        gpu.emu.copy(send, mine.data(), mine.size() * sizeof(float));
        run(gyreAllReduce(send, recv, kCount, gyreFloat32, gyreSum, comm, s), "allreduce", kCount);
        expectAll(kCount, [&](size_t i) { return 3000.0f + 3 * static_cast<float>(i % 1000); }, "allreduce");
        run(gyreAllGather(send, recv, kCount, gyreFloat32, comm, s), "allgather", kCount * n);
        expectAll(kCount * n, [&](size_t i) { return static_cast<float>((i / kCount) * 1000 + i % kCount % 1000); },
                  "allgather");
        run(gyreBroadcast(send, recv, kCount, gyreFloat32, 1, comm, s), "broadcast from the host rank", kCount);
        expectAll(kCount, [&](size_t i) { return static_cast<float>(1000 + i % 1000); }, "broadcast");
        run(gyreAllToAll(send, recv, kCount, gyreFloat32, comm, s), "alltoall", kCount * n);
        expectAll(kCount * n,
                  [&](size_t i) { return static_cast<float>((i / kCount) * 1000 + (rank * kCount + i % kCount) % 1000); },
                  "alltoall");
        run(gyreReduceScatter(send, recv, kCount, gyreFloat32, gyreMax, comm, s), "reducescatter", kCount);
        expectAll(kCount, [&](size_t i) { return static_cast<float>(2000 + (rank * kCount + i) % 1000); },
                  "reducescatter");
        // Rooted: at the host rank, and at a device rank.
        for (int root : {1, 2}) {
          const std::string at = " to/from rank " + std::to_string(root);
          run(gyreReduce(send, recv, kCount, gyreFloat32, gyreSum, root, comm, s), "reduce" + at, kCount);
          if (rank == root)
            expectAll(kCount, [&](size_t i) { return 3000.0f + 3 * static_cast<float>(i % 1000); }, "reduce" + at);
          run(gyreGather(send, recv, kCount, gyreFloat32, root, comm, s), "gather" + at, kCount * n);
          if (rank == root)
            expectAll(kCount * n,
                      [&](size_t i) { return static_cast<float>((i / kCount) * 1000 + i % kCount % 1000); },
                      "gather" + at);
          run(gyreScatter(send, recv, kCount, gyreFloat32, root, comm, s), "scatter" + at, kCount);
          expectAll(kCount, [&](size_t i) { return static_cast<float>(root * 1000 + (rank * kCount + i) % 1000); },
                    "scatter" + at);
        }
        check.expect((gpu.emu.reductionsRun() > 0) == onDevice,
                     onDevice ? "a device rank reduced on its device" : "the host rank staged its calls");
        check.expectOk(gyreCommDestroy(comm), "destroy");
        if (onDevice) {
          gpu.emu.free(send);
          gpu.emu.free(recv);
        } else {
          gpu.emu.freeHost(send);
          gpu.emu.freeHost(recv);
        }
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// A group of collectives on device buffers runs direct as one unit (the
// proxy runs them one after another on its engine): AllReduce, AllGather,
// ReduceScatter and Broadcast in one group, rank 1 with pinned host
// buffers (its group staged, the same plans); every result right, and
// only the device ranks' GPUs reduced. A group with a Send/Recv in it runs
// on the device too (its messages device to device where both ends are
// device ranks).
TEST(DirectDeviceCalls, GroupsOfCollectivesRunDirectAsOneUnit) {
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      3,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        gyreComm_t comm = initRank(rank, n, id, "shm");
        if (!comm) return 1;
        device::Stream s = gpu.emu.createStream(0);
        constexpr size_t kCount = 50000;
        const bool onDevice = rank != 1;
        auto alloc = [&](size_t elems) {
          const size_t bytes = elems * sizeof(float);
          return static_cast<float*>(onDevice ? gpu.emu.allocate(bytes, 0) : gpu.emu.allocateHost(bytes));
        };
        float* in = alloc(kCount * n);
        float* sum = alloc(kCount);
        float* all = alloc(kCount * n);
        float* part = alloc(kCount);
        float* bcast = alloc(kCount);
        std::vector<float> mine(kCount * n);
        for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(rank * 1000 + i % 1000);
        gpu.emu.copy(in, mine.data(), mine.size() * sizeof(float));
        check.expectOk(gyreGroupStart(), "group start");
        gyreAllReduce(in, sum, kCount, gyreFloat32, gyreSum, comm, s);
        gyreAllGather(in, all, kCount, gyreFloat32, comm, s);
        gyreReduceScatter(in, part, kCount, gyreFloat32, gyreMax, comm, s);
        gyreBroadcast(in, bcast, kCount, gyreFloat32, 2, comm, s);
        check.expectOk(gyreGroupEnd(), "group end");
        gpu.emu.synchronize(s);
        check.expect((gpu.emu.reductionsRun() > 0) == onDevice,
                     onDevice ? "the group ran on the device" : "the host rank's group was staged");
        auto expectAll = [&](const float* p, size_t elems, const std::function<float(size_t)>& want,
                             const std::string& what) {
          std::vector<float> got(elems);
          gpu.emu.copy(got.data(), p, elems * sizeof(float));
          for (size_t i = 0; i < elems; ++i)
            if (got[i] != want(i)) {
              check.fail(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                         std::to_string(want(i)));
              return;
            }
        };
        expectAll(sum, kCount, [](size_t i) { return 3000.0f + 3 * static_cast<float>(i % 1000); }, "allreduce");
        expectAll(all, kCount * n,
                  [&](size_t i) { return static_cast<float>((i / kCount) * 1000 + i % kCount % 1000); }, "allgather");
        expectAll(part, kCount, [&](size_t i) { return static_cast<float>(2000 + (rank * kCount + i) % 1000); },
                  "reducescatter");
        expectAll(bcast, kCount, [](size_t i) { return static_cast<float>(2000 + i % 1000); }, "broadcast");
        // A Send/Recv ring shift and an AllReduce in one group.
        const uint64_t d2d = gpu.emu.deviceToDeviceCopies();
        check.expectOk(gyreGroupStart(), "mixed group start");
        gyreSend(in, kCount, gyreFloat32, (rank + 1) % n, comm, s);
        gyreRecv(part, kCount, gyreFloat32, (rank + n - 1) % n, comm, s);
        gyreAllReduce(in, sum, kCount, gyreFloat32, gyreMin, comm, s);
        check.expectOk(gyreGroupEnd(), "mixed group end");
        gpu.emu.synchronize(s);
        expectAll(part, kCount, [&](size_t i) { return static_cast<float>(((rank + n - 1) % n) * 1000 + i % 1000); },
                  "send/recv in a group");
        expectAll(sum, kCount, [](size_t i) { return static_cast<float>(i % 1000); }, "allreduce beside it");
        check.expect((gpu.emu.deviceToDeviceCopies() > d2d) == onDevice,
                     onDevice ? "the device ranks' group moved device to device" : "the host rank's group was staged");
        check.expectOk(gyreCommDestroy(comm), "destroy");
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Point to point on device streams runs on the device within a host
// (docs/gpu.md, "Device messages"): each message's pieces go through the
// receiver's device slots, in the connection's one order, however the ranks
// group their calls. Checked here: ranks group differently (rank 0 makes
// single calls, the others group theirs), a group carries more messages per
// peer than a connection's FIFO holds, one rank's buffers are pinned host
// memory (its calls staged, its messages host ones, which the device ranks
// take and send through their bounce buffers), and a receive of another
// size than was sent is an error.
TEST(DirectDeviceCalls, PointToPointWorksHoweverRanksGroupTheirCalls) {
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      3,
      [](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        gyreComm_t comm = initRank(rank, n, id, "shm");
        if (!comm) return 1;
        device::Stream s = gpu.emu.createStream(0);
        constexpr size_t kCount = 300000;  // a few read pieces
        constexpr int kPerPeer = 12;       // messages each way per pair: more than the 8 FIFO slots
        const bool onDevice = rank != 2;
        auto alloc = [&](size_t bytes) {
          return static_cast<float*>(onDevice ? gpu.emu.allocate(bytes, 0) : gpu.emu.allocateHost(bytes));
        };
        // send[p][k]: our k-th message to p; recv[p][k]: p's k-th to us.
        std::vector<std::vector<float*>> send(n), recv(n);
        for (int p = 0; p < n; ++p)
          for (int k = 0; k < kPerPeer; ++k) {
            const size_t count = k == 0 ? kCount : 1000 + k;
            send[p].push_back(alloc(count * sizeof(float)));
            recv[p].push_back(alloc(count * sizeof(float)));
            std::vector<float> v(count);
            for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank * 1000000 + p * 10000 + k * 100 + i % 100);
            gpu.emu.copy(send[p][k], v.data(), count * sizeof(float));
          }
        auto countOf = [](int k) { return k == 0 ? kCount : size_t(1000 + k); };
        if (rank == 0) {
          // Single calls, in an order that cannot wait on itself: to rank 1
          // then from it, from rank 2 then to it, one message at a time.
          for (int k = 0; k < kPerPeer; ++k) {
            check.expectOk(gyreSend(send[1][k], countOf(k), gyreFloat32, 1, comm, s), "send to 1");
            check.expectOk(gyreRecv(recv[1][k], countOf(k), gyreFloat32, 1, comm, s), "recv from 1");
          }
          for (int k = 0; k < kPerPeer; ++k) {
            check.expectOk(gyreRecv(recv[2][k], countOf(k), gyreFloat32, 2, comm, s), "recv from 2");
            check.expectOk(gyreSend(send[2][k], countOf(k), gyreFloat32, 2, comm, s), "send to 2");
          }
        } else {
          // One group per peer, every message of the pair in it.
          for (int p : {0, 3 - rank}) {
            check.expectOk(gyreGroupStart(), "group start");
            for (int k = 0; k < kPerPeer; ++k) {
              gyreSend(send[p][k], countOf(k), gyreFloat32, p, comm, s);
              gyreRecv(recv[p][k], countOf(k), gyreFloat32, p, comm, s);
            }
            check.expectOk(gyreGroupEnd(), "group end with rank " + std::to_string(p));
          }
        }
        gpu.emu.synchronize(s);
        for (int p = 0; p < n; ++p) {
          if (p == rank) continue;
          for (int k = 0; k < kPerPeer; ++k) {
            std::vector<float> got(countOf(k));
            gpu.emu.copy(got.data(), recv[p][k], got.size() * sizeof(float));
            for (size_t i = 0; i < got.size(); ++i) {
              const float want = static_cast<float>(p * 1000000 + rank * 10000 + k * 100 + i % 100);
              if (got[i] != want) {
                check.fail("message " + std::to_string(k) + " from rank " + std::to_string(p) + ": element " +
                           std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(want));
                break;
              }
            }
          }
        }
        check.expect((gpu.emu.reductionsRun() == 0), "point to point reduces nothing");
        check.expect((gpu.emu.deviceToDeviceCopies() > 0) == onDevice,
                     onDevice ? "the device ranks' messages went device to device" : "the host rank's calls were staged");
        // Rank 0 receives 10 floats from rank 1, which sends 20: both named.
        if (rank < 2) {
          const gyreResult_t r = rank == 0 ? gyreRecv(recv[1][1], 10, gyreFloat32, 1, comm, s)
                                           : gyreSend(send[0][1], 20, gyreFloat32, 0, comm, s);
          check.expectOk(r, "enqueue the mismatched message");
          gpu.emu.synchronize(s);  // released either way: never a hang
        }
        // The receiver finds it (the sender's message may have left
        // before); the next call on every rank reports it, and the two
        // ranks concerned name both sizes.
        const gyreResult_t next = gyreBarrier(comm, nullptr);
        const std::string msg = gyreGetLastError(comm);
        check.expect(next != gyreSuccess, "the next call reports it");
        if (rank < 2)
          check.expect(msg.find("20 x float32") != std::string::npos && msg.find("10 x float32") != std::string::npos,
                       "the error names both sizes: " + msg);
        gyreCommDestroy(comm);
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Every plan that moves pieces through connections, forced by GYRE_ALGO,
// on device buffers: rings, trees, chains, Bruck, recursive doubling and
// halving, pairwise and blockwise exchanges, linear gather and scatter.
// Each call's result is the same call's on host buffers (NULL stream, the
// same plan): the same bytes. Round 0 and 2 run every rank on its device;
// in round 1 rank 1's buffers are pinned host memory (its calls staged,
// its messages host ones beside the device ranks' device messages). A
// device rank's pieces went device to device; the host rank's never did.
class DeviceMessages : public testing::TestWithParam<int> {};

TEST_P(DeviceMessages, EveryPlanThroughConnectionsGivesTheHostPathsBits) {
  const int round = GetParam();
  RunOptions o;
  o.timeoutSec = 240;
  RunOutcome out = runRanks(
      3,
      [round](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        Gpu gpu;
        const char* rounds[] = {
            "allreduce:ring;broadcast:chain;reduce:chain;allgather:ring;reducescatter:ring;alltoall:pairwise;"
            "alltoallv:pairwise;gather:linear;scatter:linear",
            "allreduce:double_binary_tree;broadcast:binomial_tree;reduce:binomial_tree;allgather:bruck;"
            "reducescatter:recursive_halving;alltoall:bruck;alltoallv:blockwise",
            "allreduce:rabenseifner;allgather:recursive_doubling;alltoall:pairwise",
        };
        device::Stream s = gpu.emu.createStream(0);
        {
          setenv("GYRE_ALGO", rounds[round], 1);
          gyreComm_t comm = initRank(rank, n, id, "shm");
          if (!comm) return 1;
          const bool onDevice = !(round == 1 && rank == 1);
          const std::string where = "round " + std::to_string(round) + ": ";
          constexpr size_t kCount = 300000;  // several pieces of a slot, and more than a FIFO's slots
          const size_t bytes = kCount * n * sizeof(float);
          auto alloc = [&](size_t b) {
            return static_cast<unsigned char*>(onDevice ? gpu.emu.allocate(b, 0) : gpu.emu.allocateHost(b));
          };
          unsigned char* dsend = alloc(bytes);
          unsigned char* drecv = alloc(bytes);
          std::vector<float> mine(kCount * n);
          for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(rank * 1000 + i % 997);
          gpu.emu.copy(dsend, mine.data(), bytes);
          std::vector<unsigned char> want(bytes), got(bytes);
          const uint64_t d2d = gpu.emu.deviceToDeviceCopies();
          // call(send, recv, stream) makes the call; `outBytes` of recv are compared.
          auto compare = [&](const std::string& what, size_t outBytes,
                             const std::function<gyreResult_t(const void*, void*, gyreStream_t)>& call) {
            // Both outputs start as the same filler: what a call leaves alone
            // (AllToAllv's gaps) compares equal, what it writes must.
            std::fill(want.begin(), want.end(), 0xEE);
            gpu.emu.copy(drecv, want.data(), bytes);
            check.expectOk(call(mine.data(), want.data(), nullptr), where + "host " + what);
            check.expectOk(call(dsend, drecv, s), where + "device " + what);
            gpu.emu.synchronize(s);
            gpu.emu.copy(got.data(), drecv, outBytes);
            check.expect(std::memcmp(got.data(), want.data(), outBytes) == 0, where + what + ": the host path's bits");
          };
          const size_t block = kCount * sizeof(float);
          compare("allreduce", block, [&](const void* a, void* b, gyreStream_t st) {
            return gyreAllReduce(a, b, kCount, gyreFloat32, gyreSum, comm, st);
          });
          compare("allgather", block * n, [&](const void* a, void* b, gyreStream_t st) {
            return gyreAllGather(a, b, kCount, gyreFloat32, comm, st);
          });
          compare("reducescatter", block, [&](const void* a, void* b, gyreStream_t st) {
            return gyreReduceScatter(a, b, kCount, gyreFloat32, gyreMax, comm, st);
          });
          compare("alltoall", block * n, [&](const void* a, void* b, gyreStream_t st) {
            return gyreAllToAll(a, b, kCount, gyreFloat32, comm, st);
          });
          // AllToAllv: rank r sends base + r + q elements to rank q.
          std::vector<size_t> counts(n), displs(n);
          for (int q = 0, at = 0; q < n; ++q) {
            counts[q] = 50000 + 1000 * (rank + q);
            displs[q] = at;
            at += static_cast<int>(counts[q]) + 7;
          }
          compare("alltoallv", bytes, [&](const void* a, void* b, gyreStream_t st) {
            return gyreAllToAllv(a, counts.data(), displs.data(), b, counts.data(), displs.data(), gyreFloat32, comm,
                                 st);
          });
          for (int root : {0, 1}) {
            const std::string at = " at rank " + std::to_string(root);
            compare("broadcast" + at, block, [&](const void* a, void* b, gyreStream_t st) {
              return gyreBroadcast(a, b, kCount, gyreFloat32, root, comm, st);
            });
            compare("reduce" + at, rank == root ? block : 0, [&](const void* a, void* b, gyreStream_t st) {
              return gyreReduce(a, b, kCount, gyreFloat32, gyreSum, root, comm, st);
            });
            compare("gather" + at, rank == root ? block * n : 0, [&](const void* a, void* b, gyreStream_t st) {
              return gyreGather(a, b, kCount, gyreFloat32, root, comm, st);
            });
            compare("scatter" + at, block, [&](const void* a, void* b, gyreStream_t st) {
              return gyreScatter(a, b, kCount, gyreFloat32, root, comm, st);
            });
          }
          // Every type and operation of the first round's ring AllReduce,
          // at a count that leaves the kernels unaligned heads and tails.
          if (round == 0) {
            constexpr size_t kSmall = 777;
            for (gyreDataType_t t : kTypes)
              for (gyreRedOp_t op : kOps) {
                const std::vector<unsigned char> v = valuesOf(t, kSmall, rank);
                gpu.emu.copy(dsend, v.data(), v.size());
                check.expectOk(gyreAllReduce(v.data(), want.data(), kSmall, t, op, comm, nullptr), where + "host ring");
                check.expectOk(gyreAllReduce(dsend, drecv, kSmall, t, op, comm, s), where + "device ring");
                gpu.emu.synchronize(s);
                gpu.emu.copy(got.data(), drecv, v.size());
                check.expect(std::memcmp(got.data(), want.data(), v.size()) == 0,
                             where + "ring allreduce bits, type " + std::to_string(t) + ", op " + std::to_string(op));
              }
          }
          check.expect((gpu.emu.deviceToDeviceCopies() > d2d) == onDevice,
                       where + (onDevice ? "a device rank's pieces went device to device" : "the host rank staged"));
          check.expectOk(gyreCommDestroy(comm), where + "destroy");
          if (onDevice) {
            gpu.emu.free(dsend);
            gpu.emu.free(drecv);
          } else {
            gpu.emu.freeHost(dsend);
            gpu.emu.freeHost(drecv);
          }
        }
        gpu.emu.destroyStream(s);
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}
INSTANTIATE_TEST_SUITE_P(Rounds, DeviceMessages, testing::Values(0, 1, 2));

// In a rank: init must fail with an error that holds `needle`; 0 if so.
int initFailsNaming(int rank, int n, const gyreUniqueId& id, const std::string& needle) {
  gyreComm_t comm = nullptr;
  if (gyreCommInitRank(&comm, n, id, rank) == gyreSuccess) {
    gyreCommDestroy(comm);
    std::fprintf(stderr, "rank %d: init succeeded\n", rank);
    return 1;
  }
  const std::string msg = gyreGetLastError(nullptr);
  if (msg.find(needle) == std::string::npos) {
    std::fprintf(stderr, "rank %d: the error does not name the setting: %s\n", rank, msg.c_str());
    return 1;
  }
  return 0;
}

// GYRE_DEVICE_DIRECT decides the plans of every stream call: ranks that
// disagree on it would choose different algorithms, so init says so.
TEST(DirectDeviceCalls, RanksThatDisagreeOnTheSettingFailAtInit) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    if (rank == 1) setenv("GYRE_DEVICE_DIRECT", "0", 1);
    return initFailsNaming(rank, n, id, "GYRE_DEVICE_DIRECT");
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// GYRE_DEVICE_GATE is read by the CUDA backend, but checked with every
// setting at init: a value that is neither wait nor host fails it, named.
TEST(DirectDeviceCalls, AnUnknownGateKindFailsInitNamingIt) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    setenv("GYRE_DEVICE_GATE", "spin", 1);
    return initFailsNaming(rank, n, id, "GYRE_DEVICE_GATE=spin must be wait or host");
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
