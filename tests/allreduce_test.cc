// AllReduce over real processes: every transport x rank count x dtype x op x
// count x in/out-of-place, with inputs whose exact result is known, so every
// element is checked bit for bit; plus guard bytes past the end and an
// untouched input for out-of-place calls.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1000, 1000003};
constexpr size_t kGuard = 64;  // bytes after the data that must stay untouched
constexpr unsigned char kFill = 0xA5;

struct MatrixParam {
  const char* transport;
  int nranks;
  const char* algo;             // nullptr: automatic choice
  const char* env = nullptr;    // "NAME=VALUE NAME=VALUE" set in each rank
  const char* label = nullptr;  // test name suffix for env variants
};

// What ctest shows after the test name.
void PrintTo(const MatrixParam& p, std::ostream* os) {
  *os << p.transport << ", " << p.nranks << " ranks, " << (p.algo ? p.algo : "auto")
      << (p.env ? std::string(", ") + p.env : std::string());
}

std::string paramName(const testing::TestParamInfo<MatrixParam>& info) {
  std::string algo = info.param.algo ? info.param.algo : "auto";
  std::string name =
      std::string(info.param.transport) + "_" + std::to_string(info.param.nranks) + "ranks_" + algo;
  return info.param.label ? name + "_" + info.param.label : name;
}

void applyEnv(const char* env) {
  if (!env) return;
  std::string all = env;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(' ', start);
    std::string kv = all.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

int runMatrix(int rank, int nranks, const gyreUniqueId& id, const MatrixParam& p) {
  if (p.algo) setenv("GYRE_ALGO", p.algo, 1);
  applyEnv(p.env);
  // Several "hosts" on this one: ranks r and r' share one when r/k == r'/k
  // (shared memory within, TCP across).
  if (const char* k = getenv("TEST_RANKS_PER_HOST"))
    setenv("GYRE_HOSTID", ("host" + std::to_string(rank / std::atoi(k))).c_str(), 1);
  // Or dealt round-robin over k hosts (r % k): the topology's ring then
  // differs from rank order.
  if (const char* k = getenv("TEST_HOSTS_DEALT"))
    setenv("GYRE_HOSTID", ("host" + std::to_string(rank % std::atoi(k))).c_str(), 1);
  // Variants that test plumbing (hosts, piece sizes) rather than
  // arithmetic: two types and three ops, every count and placement. The
  // full matrix runs for every algorithm elsewhere.
  const bool light = getenv("TEST_LIGHT") != nullptr;
  Checker check(rank);
  gyreComm_t comm = initRank(rank, nranks, id, p.transport);
  if (!comm) return 1;
  const size_t maxBytes = kCounts[4] * 8 + kGuard;
  std::vector<unsigned char> sendVec(maxBytes), recvVec(maxBytes), sendCopy(maxBytes);
  // TEST_MEMALLOC: buffers from gyreMemAllocHost, which local peers map and
  // reduce from directly instead of reading through the kernel; "odd": only
  // odd ranks' (the others are read through the kernel).
  struct MemAlloc {
    void* p = nullptr;
    ~MemAlloc() { gyreMemFree(p); }
  } sendMem, recvMem;
  std::span<unsigned char> send(sendVec), recv(recvVec);
  const char* memalloc = getenv("TEST_MEMALLOC");
  if (memalloc && (std::string(memalloc) != "odd" || rank % 2 == 1)) {
    if (!check.expectOk(gyreMemAllocHost(&sendMem.p, maxBytes), "gyreMemAllocHost") ||
        !check.expectOk(gyreMemAllocHost(&recvMem.p, maxBytes), "gyreMemAllocHost"))
      return 1;
    send = {static_cast<unsigned char*>(sendMem.p), maxBytes};
    recv = {static_cast<unsigned char*>(recvMem.p), maxBytes};
  }
  for (int t = 0; t < gyreNumTypes; ++t) {
    const auto dtype = static_cast<gyreDataType_t>(t);
    if (light && dtype != gyreFloat32 && dtype != gyreInt32) continue;
    const size_t esz = dtypeBytes(dtype);
    for (int o = 0; o < gyreNumOps; ++o) {
      const auto op = static_cast<gyreRedOp_t>(o);
      if (light && op != gyreSum && op != gyreMax && op != gyreAvg) continue;
      for (size_t count : kCounts) {
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          const std::string what = std::string(dtypeLabel(dtype)) + " " + opLabel(op) + " count " +
                                   std::to_string(count) +
                                   (inPlace ? " in-place" : " out-of-place");
          std::memset(send.data(), kFill, count * esz + kGuard);
          std::memset(recv.data(), kFill, count * esz + kGuard);
          fillInput(send.data(), count, dtype, op, rank);
          void* out = inPlace ? send.data() : recv.data();
          if (!inPlace) std::memcpy(sendCopy.data(), send.data(), count * esz);
          if (!check.expectOk(gyreAllReduce(send.data(), out, count, dtype, op, comm, nullptr),
                              what))
            return check.failures();
          std::string bad;
          size_t wrong = countWrong(out, count, dtype, op, nranks, &bad);
          check.expect(wrong == 0, what + ": " + std::to_string(wrong) + " wrong; " + bad);
          const auto* guard = static_cast<unsigned char*>(out) + count * esz;
          bool guardOk = true;
          for (size_t g = 0; g < kGuard; ++g) guardOk = guardOk && guard[g] == kFill;
          check.expect(guardOk, what + ": wrote past the end of recvbuff");
          if (!inPlace)
            check.expect(std::memcmp(sendCopy.data(), send.data(), count * esz) == 0,
                         what + ": modified sendbuff");
        }
      }
    }
  }
  check.expectOk(gyreCommDestroy(comm), "destroy");
  return check.failures() ? 1 : 0;
}

class AllReduceMatrix : public testing::TestWithParam<MatrixParam> {};

TEST_P(AllReduceMatrix, ExactResultsForEveryTypeOpAndCount) {
  const MatrixParam p = GetParam();
  RunOptions options;
  options.timeoutSec = 300;
  RunOutcome out = runRanks(
      p.nranks, [&](int r, int n, const gyreUniqueId& id) { return runMatrix(r, n, id, p); },
      options);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Auto, AllReduceMatrix,
    testing::Values(MatrixParam{"shm", 1, nullptr}, MatrixParam{"shm", 2, nullptr},
                    MatrixParam{"shm", 3, nullptr}, MatrixParam{"shm", 4, nullptr},
                    MatrixParam{"shm", 5, nullptr}, MatrixParam{"tcp", 1, nullptr},
                    MatrixParam{"tcp", 2, nullptr}, MatrixParam{"tcp", 3, nullptr},
                    MatrixParam{"tcp", 4, nullptr}, MatrixParam{"tcp", 5, nullptr},
                    MatrixParam{"net", 2, nullptr}, MatrixParam{"net", 3, nullptr}
#ifdef GYRE_HAVE_UCX
                    ,
                    MatrixParam{"ucx", 2, nullptr}, MatrixParam{"ucx", 3, nullptr}, MatrixParam{"ucx", 4, nullptr}
#endif
                    ),
    paramName);

// The automatic choice uses recursive doubling only for small vectors; force
// each algorithm across all sizes too.
INSTANTIATE_TEST_SUITE_P(
    Forced, AllReduceMatrix,
    testing::Values(MatrixParam{"shm", 3, "ring"}, MatrixParam{"shm", 4, "recursive_doubling"},
                    MatrixParam{"shm", 5, "recursive_doubling"}, MatrixParam{"shm", 2, "direct"},
                    MatrixParam{"shm", 3, "direct"}, MatrixParam{"shm", 5, "direct"},
                    MatrixParam{"shm", 3, "direct", "GYRE_SHM_SLOT_BYTES=4K GYRE_SHM_SLOTS=2", "4Kslots"},
                    // The device's plan, run by the host (GYRE_ALGO only).
                    MatrixParam{"shm", 2, "direct_multi"}, MatrixParam{"shm", 3, "direct_multi"},
                    MatrixParam{"shm", 5, "direct_multi"},
                    MatrixParam{"tcp", 2, "ring"},
                    MatrixParam{"tcp", 3, "recursive_doubling"}, MatrixParam{"tcp", 4, "ring"},
                    MatrixParam{"shm", 3, "rabenseifner"}, MatrixParam{"shm", 4, "rabenseifner"},
                    MatrixParam{"shm", 5, "rabenseifner"}, MatrixParam{"tcp", 3, "rabenseifner"},
                    // Two trees: powers of two, odd rank counts (rank 0 a leaf
                    // in both trees), 8 ranks for depth 3.
                    MatrixParam{"shm", 2, "double_binary_tree"},
                    MatrixParam{"shm", 3, "double_binary_tree"},
                    MatrixParam{"shm", 4, "double_binary_tree"},
                    MatrixParam{"shm", 5, "double_binary_tree"},
                    MatrixParam{"shm", 8, "double_binary_tree"},
                    MatrixParam{"tcp", 3, "double_binary_tree"}),
    paramName);

// Transport settings that change how bytes move: several sockets per peer
// (each message striped across them), tiny pieces that make every FIFO wrap
// and fill many times per call.
INSTANTIATE_TEST_SUITE_P(
    Settings, AllReduceMatrix,
    testing::Values(MatrixParam{"tcp", 3, nullptr, "GYRE_NSOCKS_PERPEER=3", "3sockets"},
                    MatrixParam{"tcp", 2, "ring", "GYRE_NSOCKS_PERPEER=2 GYRE_TCP_CHUNK_BYTES=8K",
                                "2sockets_8Kchunks"},
                    MatrixParam{"shm", 3, "ring", "GYRE_SHM_SLOT_BYTES=4K GYRE_SHM_SLOTS=2",
                                "4Kslots"},
                    // Many pieces per tree, far more than a FIFO holds: the
                    // trees' interleaved order must never deadlock.
                    MatrixParam{"shm", 5, "double_binary_tree",
                                "TEST_LIGHT=1 GYRE_SHM_SLOT_BYTES=4K GYRE_SHM_SLOTS=2", "4Kslots"},
                    MatrixParam{"tcp", 4, "double_binary_tree", "TEST_LIGHT=1 GYRE_TCP_CHUNK_BYTES=4K",
                                "4Kchunks"},
                    MatrixParam{"shm", 2, nullptr, "GYRE_SPIN_NS=0", "nospin"},
                    MatrixParam{"shm", 2, "direct", "TEST_MEMALLOC=1", "memalloc"},
                    MatrixParam{"shm", 3, "direct", "TEST_LIGHT=1 TEST_MEMALLOC=1", "memalloc"},
                    MatrixParam{"shm", 3, "direct_multi", "TEST_LIGHT=1 TEST_MEMALLOC=1", "memalloc"},
                    MatrixParam{"shm", 3, nullptr, "TEST_LIGHT=1 TEST_MEMALLOC=odd GYRE_MAPPED_BUFFERS=1",
                                "memalloc_some"}),
    paramName);

// Ranks on several hosts (host ids given per rank): the hierarchical
// AllReduce with even and uneven hosts, a host of one, many pieces, TCP
// within hosts too; and links of two kinds with different largest messages,
// which every rank must still cut into the same pieces.
INSTANTIATE_TEST_SUITE_P(
    Hosts, AllReduceMatrix,
    testing::Values(MatrixParam{"auto", 4, "hierarchical", "TEST_RANKS_PER_HOST=2", "2hosts"},
                    MatrixParam{"auto", 5, "hierarchical", "TEST_LIGHT=1 TEST_RANKS_PER_HOST=2", "3hosts"},
                    MatrixParam{"auto", 6, "hierarchical",
                                "TEST_LIGHT=1 TEST_RANKS_PER_HOST=3 GYRE_SHM_SLOT_BYTES=4K GYRE_SHM_SLOTS=2 "
                                "GYRE_TCP_CHUNK_BYTES=8K",
                                "2hosts_smallpieces"},
                    MatrixParam{"shm", 3, "hierarchical"},
                    MatrixParam{"tcp", 4, "hierarchical", "TEST_LIGHT=1 TEST_RANKS_PER_HOST=2", "2hosts"},
                    MatrixParam{"auto", 4, nullptr, "TEST_LIGHT=1 TEST_RANKS_PER_HOST=2", "2hosts"},
                    // Rank 4, alone on its host, has only TCP neighbours; the
                    // others have a shared-memory one.
                    MatrixParam{"auto", 5, "ring",
                                "TEST_LIGHT=1 TEST_RANKS_PER_HOST=2 GYRE_SHM_SLOT_BYTES=4K GYRE_TCP_CHUNK_BYTES=8K",
                                "3hosts_mixedpieces"},
                    MatrixParam{"auto", 4, "double_binary_tree",
                                "TEST_LIGHT=1 TEST_RANKS_PER_HOST=2 GYRE_SHM_SLOT_BYTES=4K "
                                "GYRE_TCP_CHUNK_BYTES=8K",
                                "2hosts_mixedpieces"},
                    // Hosts dealt by rank: the ring and the trees (one per
                    // host, one across hosts; a host's root has up to four
                    // children) both differ from rank order.
                    MatrixParam{"auto", 6, "double_binary_tree", "TEST_LIGHT=1 TEST_HOSTS_DEALT=2", "2hosts_dealt"},
                    MatrixParam{"auto", 7, "double_binary_tree",
                                "TEST_LIGHT=1 TEST_HOSTS_DEALT=3 GYRE_SHM_SLOT_BYTES=4K GYRE_TCP_CHUNK_BYTES=8K",
                                "3hosts_dealt_smallpieces"},
                    MatrixParam{"auto", 5, "ring", "TEST_LIGHT=1 TEST_HOSTS_DEALT=2", "2hosts_dealt"}),
    paramName);

}  // namespace
}  // namespace gyre::test
