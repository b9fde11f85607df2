// Decentralized averaging: gyrePeerAverage's selections' pairings
// (symmetric, perfect matchings where they should be, shift_one meeting
// every cross pair), then real rank processes over shared memory and TCP,
// in and out of place, against the average in rank order; low-precision
// decentralized SGD against a reference of every rank's arithmetic; bad
// input, and ranks that disagree on the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "collectives/peer_average.h"
#include "kernels/cpu/codec.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

using collectives::averagingPeers;
using collectives::PeerSelection;

TEST(PeerSelections, AreSymmetricAndAgreeOnEveryRank) {
  for (PeerSelection s : {PeerSelection::ShiftOne, PeerSelection::Ring, PeerSelection::Random})
    for (int n = 2; n <= 9; ++n) {
      if (s == PeerSelection::ShiftOne && n % 2) continue;
      for (uint64_t step = 0; step < 12; ++step)
        for (int r = 0; r < n; ++r)
          for (int q : averagingPeers(s, step, n, r)) {
            EXPECT_NE(q, r);
            const std::vector<int> back = averagingPeers(s, step, n, q);
            EXPECT_TRUE(std::find(back.begin(), back.end(), r) != back.end())
                << collectives::peerSelectionName(s) << " n=" << n << " step " << step << ": " << r << " -> " << q;
          }
    }
}

TEST(PeerSelections, ShiftOneMeetsEveryCrossPairOverHalfTheRanksSteps) {
  for (int n = 2; n <= 10; n += 2) {
    std::set<std::pair<int, int>> met;
    for (uint64_t step = 0; step < static_cast<uint64_t>(n / 2); ++step)
      for (int r = 0; r < n / 2; ++r) {
        const std::vector<int> p = averagingPeers(PeerSelection::ShiftOne, step, n, r);
        ASSERT_EQ(p.size(), 1u);
        EXPECT_GE(p[0], n / 2);
        met.insert({r, p[0]});
      }
    EXPECT_EQ(met.size(), static_cast<size_t>(n / 2) * (n / 2)) << n;
  }
}

TEST(PeerSelections, RandomIsAMatchingThatChangesWithTheStep) {
  for (int n = 2; n <= 9; ++n) {
    std::set<std::vector<int>> seen;
    for (uint64_t step = 0; step < 20; ++step) {
      int alone = 0;
      std::vector<int> partner(n);
      for (int r = 0; r < n; ++r) {
        const std::vector<int> p = averagingPeers(PeerSelection::Random, step, n, r);
        ASSERT_LE(p.size(), 1u);
        alone += p.empty();
        partner[r] = p.empty() ? -1 : p[0];
      }
      EXPECT_EQ(alone, n % 2) << "n=" << n << " step " << step;
      seen.insert(partner);
    }
    if (n >= 4) {
      EXPECT_GT(seen.size(), 1u) << n;
    }
  }
}

TEST(PeerSelections, ShiftOneRefusesAnOddRankCount) {
  EXPECT_THROW(averagingPeers(PeerSelection::ShiftOne, 0, 3, 0), Error);
}

float valueOf(int rank, size_t i, uint64_t step) {
  return static_cast<float>((rank * 7919 + static_cast<int>(i % 1013) * 31 + static_cast<int>(step) * 3) % 2000) / 16.0f -
         40.0f;
}

struct Case {
  const char* transport;
  PeerSelection selection;
  int ranks;
};

class PeerAverage : public ::testing::TestWithParam<Case> {};

TEST_P(PeerAverage, EachRankGetsTheAverageOfItsPeersInRankOrder) {
  const Case p = GetParam();
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      p.ranks,
      [p](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, p.transport);
        if (!comm) return 1;
        const gyrePeers_t sel = static_cast<gyrePeers_t>(p.selection);
        for (size_t count : {size_t{1}, size_t{1000}, size_t{300007}})
          for (uint64_t step = 0; step < 4; ++step) {
            const bool inPlace = step % 2 == 1;
            std::vector<float> in(count), got(count);
            for (size_t i = 0; i < count; ++i) in[i] = valueOf(rank, i, step);
            float* dst = inPlace ? in.data() : got.data();
            const std::string what = std::to_string(count) + " step " + std::to_string(step);
            if (!check.expectOk(gyrePeerAverage(in.data(), dst, count, gyreFloat32, sel, step, comm, nullptr), what))
              continue;
            std::vector<int> group = averagingPeers(p.selection, step, n, rank);
            group.push_back(rank);
            std::sort(group.begin(), group.end());
            for (size_t i = 0; i < count; ++i) {
              float acc = valueOf(group[0], i, step);
              for (size_t g = 1; g < group.size(); ++g) acc += valueOf(group[g], i, step);
              acc /= static_cast<float>(group.size());
              if (std::memcmp(&acc, &dst[i], sizeof(float)) != 0) {
                check.fail(what + ": element " + std::to_string(i) + " is " + std::to_string(dst[i]) + ", expected " +
                           std::to_string(acc));
                break;
              }
            }
          }
        check.expectOk(gyreCommDestroy(comm), "destroy");
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const char* t : {"shm", "tcp"})
    for (int n = 1; n <= 5; ++n)
      for (PeerSelection s : {PeerSelection::ShiftOne, PeerSelection::Ring, PeerSelection::Random}) {
        if (s == PeerSelection::ShiftOne && n % 2) continue;
        if (std::string(t) == "tcp" && n != 4 && n != 3) continue;
        c.push_back({t, s, n});
      }
  return c;
}

INSTANTIATE_TEST_SUITE_P(Selections, PeerAverage, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.transport) + "_" +
                                  collectives::peerSelectionName(i.param.selection) + "_" +
                                  std::to_string(i.param.ranks) + "ranks";
                         });

// Low-precision decentralized SGD (gyreDecentralized*): five steps of a
// local update and a mixing step, each rank's model against a reference
// that runs every rank's arithmetic (neighbours' replicas are, bit for bit,
// their own models, since both add the same decoded changes).
struct LowPrecisionCase {
  gyreCodec_t codec;
  int ranks;
};

class LowPrecisionDecentralized : public ::testing::TestWithParam<LowPrecisionCase> {};

float gradientOf(int rank, size_t i, int step) {
  return static_cast<float>((rank * 131 + static_cast<int>(i % 977) * 7 + step * 17) % 200 - 100) / 50.0f;
}

TEST_P(LowPrecisionDecentralized, ModelsFollowTheReference) {
  const LowPrecisionCase p = GetParam();
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      p.ranks,
      [p](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, "tcp");
        if (!comm) return 1;
        const size_t count = 10007;
        auto initial = [&](int r) {
          std::vector<float> m(count);
          for (size_t i = 0; i < count; ++i) m[i] = static_cast<float>((r + 1) * static_cast<int>(i % 13)) / 4.0f;
          return m;
        };
        // The reference: every rank's model as its neighbours know it.
        std::vector<std::vector<float>> prev;
        for (int r = 0; r < n; ++r) prev.push_back(initial(r));
        auto neighbours = [&](int r) {
          std::vector<int> nb;
          if (n >= 2) nb.push_back((r + n - 1) % n);
          if (n >= 3) nb.push_back((r + 1) % n);
          return nb;
        };
        const kernels::Codec codec = static_cast<kernels::Codec>(p.codec);
        std::vector<float> model = initial(rank);
        gyreDecentralized_t d = nullptr;
        if (!check.expectOk(gyreDecentralizedCreate(&d, comm, model.data(), count, gyreFloat32, p.codec), "create"))
          return 1;
        for (int step = 0; step < 5; ++step) {
          for (size_t i = 0; i < count; ++i) model[i] -= 0.1f * gradientOf(rank, i, step);
          if (!check.expectOk(gyreDecentralizedStep(d, model.data()), "step " + std::to_string(step))) break;
          std::vector<std::vector<float>> next = prev;
          for (int r = 0; r < n; ++r) {
            const std::vector<int> nb = neighbours(r);
            const float w = 1.0f / static_cast<float>(nb.size() + 1);
            std::vector<float> change(count);
            for (size_t i = 0; i < count; ++i) {
              const float x = prev[r][i] - 0.1f * gradientOf(r, i, step);
              float pull = 0.0f;
              for (int q : nb) pull += prev[q][i] - prev[r][i];
              change[i] = (x - prev[r][i]) + w * pull;
            }
            std::vector<unsigned char> msg(kernels::messageBytes(codec, count));
            kernels::encode(codec, kernels::DType::Float32, change.data(), count, msg.data(), nullptr);
            kernels::decode(codec, msg.data(), count, kernels::DType::Float32, next[r].data(), true);
          }
          prev = next;
          if (std::memcmp(model.data(), prev[rank].data(), count * sizeof(float)) != 0) {
            check.fail("step " + std::to_string(step) + ": the model differs from the reference");
            break;
          }
        }
        check.expectOk(gyreDecentralizedDestroy(d), "destroy");
        check.expectOk(gyreCommDestroy(comm), "destroy comm");
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Codecs, LowPrecisionDecentralized,
                         ::testing::Values(LowPrecisionCase{gyreCodecInt8, 1}, LowPrecisionCase{gyreCodecInt8, 2},
                                           LowPrecisionCase{gyreCodecInt8, 4}, LowPrecisionCase{gyreCodecOneBit, 3},
                                           LowPrecisionCase{gyreCodecFp16, 3}),
                         [](const ::testing::TestParamInfo<LowPrecisionCase>& i) {
                           return std::string(kernels::codecName(static_cast<kernels::Codec>(i.param.codec))) + "_" +
                                  std::to_string(i.param.ranks) + "ranks";
                         });

TEST(PeerAverageBadInput, IsRefusedByName) {
  RunOutcome out = runRanks(3, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", 20000);
    if (!comm) return 1;
    std::vector<float> a(100, 1.0f), b(100);
    gyreResult_t r = gyrePeerAverage(a.data(), b.data(), 100, gyreFloat32, gyrePeersShiftOne, 0, comm, nullptr);
    std::string msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidArgument && msg.find("even number of ranks") != std::string::npos,
                 "shift_one on 3 ranks: " + msg);
    r = gyrePeerAverage(a.data(), b.data(), 100, gyreFloat32, static_cast<gyrePeers_t>(7), 0, comm, nullptr);
    msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidArgument && msg.find("not a gyrePeers_t") != std::string::npos, "peers 7: " + msg);
    gyreDecentralized_t d = nullptr;
    r = gyreDecentralizedCreate(&d, comm, a.data(), 100, gyreFloat64, gyreCodecInt8);
    msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidArgument && msg.find("float32") != std::string::npos, "float64 model: " + msg);
    r = gyreDecentralizedCreate(&d, comm, a.data(), 100, gyreFloat32, gyreCodecNone);
    msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidArgument && msg.find("encodes") != std::string::npos, "codec none: " + msg);
    // Ranks that disagree on the step: named, on every rank.
    r = gyrePeerAverage(a.data(), b.data(), 100, gyreFloat32, gyrePeersRing, rank == 1 ? 5 : 4, comm, nullptr);
    msg = gyreGetLastError(nullptr);
    check.expect(r != gyreSuccess && msg.find("step") != std::string::npos, "different steps: " + msg);
    gyreCommDestroy(comm);
    return check.failures() ? 1 : 0;
  });
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
