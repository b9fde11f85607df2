// All ranks get bitwise-identical results, and the same inputs give the same
// bits on every run: checked with inputs whose sums round (random floats),
// for each algorithm, by hashing every rank's output.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/hash.h"
#include "bench/exact_values.h"
#include "kernels/cpu/half.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

uint64_t fnv(const void* data, size_t bytes) { return fnv1a(data, bytes); }

// Each rank prints "HASH <case> <hash>"; returns {case -> set of hashes seen}.
std::map<std::string, std::set<std::string>> runAndHash(int nranks, const char* transport,
                                                        const char* algo) {
  RunOutcome out = runRanks(nranks, [&](int rank, int n, const gyreUniqueId& id) {
    if (algo) setenv("GYRE_ALGO", algo, 1);
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport);
    if (!comm) return 1;
    const gyreDataType_t types[] = {gyreFloat16, gyreBfloat16, gyreFloat32, gyreFloat64};
    const gyreRedOp_t ops[] = {gyreSum, gyreAvg, gyreProd};
    for (size_t count : {size_t(1000), size_t(300007)}) {
      for (gyreDataType_t t : types) {
        for (gyreRedOp_t op : ops) {
          const size_t esz = dtypeBytes(t);
          std::vector<unsigned char> buf(count * esz);
          // Random inputs, seeded by rank only: identical on every run.
          std::mt19937 gen(1234 + rank);
          std::uniform_real_distribution<float> dist(op == gyreProd ? 0.5f : -100.0f,
                                                     op == gyreProd ? 1.5f : 100.0f);
          for (size_t i = 0; i < count; ++i) {
            float v = dist(gen);
            switch (t) {
              case gyreFloat16:
                reinterpret_cast<uint16_t*>(buf.data())[i] = kernels::floatToHalf(v);
                break;
              case gyreBfloat16:
                reinterpret_cast<uint16_t*>(buf.data())[i] = kernels::floatToBfloat16(v);
                break;
              case gyreFloat32:
                reinterpret_cast<float*>(buf.data())[i] = v;
                break;
              default:
                reinterpret_cast<double*>(buf.data())[i] = double(v) * 1.000000001;
                break;
            }
          }
          check.expectOk(gyreAllReduce(buf.data(), buf.data(), count, t, op, comm, nullptr),
                         "allreduce");
          std::printf("HASH %s-%s-%zu %016llx\n", dtypeLabel(t), opLabel(op), count,
                      static_cast<unsigned long long>(fnv(buf.data(), buf.size())));
        }
      }
    }
    gyreCommDestroy(comm);
    return check.failures();
  });
  std::map<std::string, std::set<std::string>> hashes;
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    size_t pos = 0;
    while ((pos = r.output.find("HASH ", pos)) != std::string::npos) {
      size_t end = r.output.find('\n', pos);
      std::string line = r.output.substr(pos + 5, end - pos - 5);
      size_t sp = line.find(' ');
      hashes[line.substr(0, sp)].insert(line.substr(sp + 1));
      pos = end;
    }
  }
  return hashes;
}

class Determinism : public testing::TestWithParam<std::tuple<const char*, const char*, int>> {};

TEST_P(Determinism, IdenticalBitsOnEveryRankAndEveryRun) {
  const auto [transport, algo, nranks] = GetParam();
  auto first = runAndHash(nranks, transport, algo);
  auto second = runAndHash(nranks, transport, algo);
  ASSERT_EQ(first.size(), 24u);
  for (const auto& [name, set] : first) {
    EXPECT_EQ(set.size(), 1u) << name << ": ranks disagree";
    EXPECT_EQ(set, second[name]) << name << ": a second run gave different bits";
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, Determinism,
                         testing::Values(std::make_tuple("shm", "ring", 3),
                                         std::make_tuple("shm", "recursive_doubling", 3),
                                         std::make_tuple("tcp", "ring", 4),
                                         std::make_tuple("tcp", "recursive_doubling", 5),
                                         std::make_tuple("shm", "double_binary_tree", 5),
                                         std::make_tuple("tcp", "double_binary_tree", 4)),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::get<1>(p.param) +
                                  "_" + std::to_string(std::get<2>(p.param));
                         });

}  // namespace
}  // namespace gyre::test
