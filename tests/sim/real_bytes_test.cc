// A plan simulated moves what the same plan moves for real: ranks on this
// host run a collective with the algorithm forced, each reports the bytes it
// sent each peer (gyreCommGetStats), and the simulation of the same call,
// algorithm and rank count must say the same bytes for every pair.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "sim/simulate.h"
#include "tests/support/multiprocess.h"

namespace gyre::sim {
namespace {

// Each rank's sentToPeer, through memory shared with the forked ranks.
std::vector<uint64_t> realBytes(int n, const char* transport, const char* algo, collectives::OpKind op, size_t count) {
  const size_t cells = size_t(n) * size_t(n);
  auto* shared = static_cast<uint64_t*>(
      mmap(nullptr, cells * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return {};
  setenv("GYRE_ALGO", algo, 1);
  test::RunOutcome out = test::runRanks(n, [&](int rank, int nranks, const gyreUniqueId& id) {
    test::Checker check(rank);
    gyreComm_t comm = test::initRank(rank, nranks, id, transport);
    if (!comm) return 1;
    std::vector<float> in(count * size_t(nranks), 1.0f), outBuf(count * size_t(nranks), 0.0f);
    gyreResult_t r = gyreSuccess;
    switch (op) {
      case collectives::OpKind::AllReduce:
        r = gyreAllReduce(in.data(), outBuf.data(), count, gyreFloat32, gyreSum, comm, nullptr);
        break;
      case collectives::OpKind::AllGather:
        r = gyreAllGather(in.data(), outBuf.data(), count, gyreFloat32, comm, nullptr);
        break;
      case collectives::OpKind::ReduceScatter:
        r = gyreReduceScatter(in.data(), outBuf.data(), count, gyreFloat32, gyreSum, comm, nullptr);
        break;
      default:
        r = gyreAllToAll(in.data(), outBuf.data(), count, gyreFloat32, comm, nullptr);
        break;
    }
    check.expectOk(r, "the collective");
    gyreCommStats_t stats;
    check.expectOk(gyreCommGetStats(comm, &stats, shared + size_t(rank) * size_t(nranks)), "stats");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  unsetenv("GYRE_ALGO");
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  std::vector<uint64_t> bytes(shared, shared + cells);
  munmap(shared, cells * sizeof(uint64_t));
  return bytes;
}

TEST(SimulatedPlans, MoveTheBytesTheSamePlansMoveForRealForEveryPair) {
  struct Run {
    const char* algo;
    collectives::OpKind op;
    int nranks;
    size_t count;  // as the API takes it
  };
  const Run runs[] = {
      {"allreduce:ring", collectives::OpKind::AllReduce, 4, 100'000},
      {"allreduce:rabenseifner", collectives::OpKind::AllReduce, 4, 70'001},
      {"allreduce:recursive_doubling", collectives::OpKind::AllReduce, 3, 1'000},
      {"allreduce:double_binary_tree", collectives::OpKind::AllReduce, 5, 300'000},
      {"allgather:ring", collectives::OpKind::AllGather, 3, 50'000},
      {"reducescatter:ring", collectives::OpKind::ReduceScatter, 4, 30'000},
      {"alltoall:pairwise", collectives::OpKind::AllToAll, 4, 20'000},
      {"alltoall:bruck", collectives::OpKind::AllToAll, 5, 1'000},
  };
  for (const char* transport : {"shm", "tcp"}) {
    for (const Run& run : runs) {
      const std::string what = std::string(run.algo) + " on " + std::to_string(run.nranks) + " ranks over " + transport;
      const std::vector<uint64_t> real = realBytes(run.nranks, transport, run.algo, run.op, run.count);
      ASSERT_EQ(real.size(), size_t(run.nranks * run.nranks)) << what;
      ClusterSpec spec;
      spec.hosts = 1;
      spec.ranksPerHost = run.nranks;
      spec.nicsPerHost = 1;
      spec.peerReads = false;
      collectives::CallRequest req;
      req.desc.kind = run.op;
      req.desc.count = run.count;
      req.elemSize = 4;
      const CallResult sim = simulateCall(spec, req, run.algo);
      uint64_t total = 0;
      for (uint64_t b : real) total += b;
      EXPECT_GT(total, run.count * 4) << what << ": the real ranks sent less than a block";
      EXPECT_EQ(double(total), sim.run.bytesSent) << what;
      for (int from = 0; from < run.nranks; ++from)
        for (int to = 0; to < run.nranks; ++to) {
          const size_t i = size_t(from * run.nranks + to);
          EXPECT_EQ(uint64_t(sim.run.sentTo[i]), real[i]) << what << ": rank " << from << " to rank " << to;
        }
    }
  }
}

}  // namespace
}  // namespace gyre::sim
