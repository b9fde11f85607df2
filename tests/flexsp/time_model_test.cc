// The Ulysses time model: compute split over the group, the all-to-alls
// priced by gyreEstimate for groups of that size (none for one rank).
#include "flexsp/time_model.h"

#include <gtest/gtest.h>

#include "flexsp/planner.h"
#include "gyre/gyre.h"

namespace gyre::flexsp::test {
namespace {

TEST(UlyssesTime, ComputeSplitsOverTheGroupAndTheAllToAllsAreGyresEstimates) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  UlyssesConfig config;
  config.compute = ComputeModel{2e-9, 3e-6, 256, 4, "test"};
  config.layers = 3;
  const UlyssesTime t(config, comm);
  EXPECT_DOUBLE_EQ(t.compute(1000, 1), 3 * (2e-9 * 1e6 + 3e-6 * 1000));
  EXPECT_DOUBLE_EQ(t.compute(1000, 4), t.compute(1000, 1) / 4);
  EXPECT_EQ(t.communication(1000, 1), 0);
  for (int ranks : {2, 8, 64}) {
    // 1000 tokens over P ranks, 256 values each, in P blocks.
    const size_t tokens = (1000 + ranks - 1) / ranks;
    const size_t block = (tokens * 256 + ranks - 1) / ranks;
    double us = 0;
    ASSERT_EQ(gyreEstimate(gyreCallAllToAll, block, gyreFloat32, ranks, comm, &us), gyreSuccess);
    EXPECT_GT(us, 0);
    EXPECT_DOUBLE_EQ(t.communication(1000, ranks), 3 * 8 * us * 1e-6) << ranks;
    EXPECT_DOUBLE_EQ(t(1000, ranks), t.compute(1000, ranks) + t.communication(1000, ranks));
  }
  EXPECT_GT(t.communication(100000, 8), t.communication(1000, 8));
  // The planner takes it as it is.
  Problem p{{4000, 300, 200, 100, 100, 50}, 8, 1000};
  EXPECT_EQ(checkPlan(planBatch(p, t.function()), p), "");
  gyreCommDestroy(comm);
}

// Groups far larger than the job that plans them (the simulated estimate,
// docs/simulator.md): a sequence spread over 1,024 or 4,096 ranks of hosts
// like this one has a price, the same all-to-all's on more ranks moves
// more and takes longer.
TEST(UlyssesTime, GroupsOfThousandsOfRanksArePriced) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  UlyssesConfig config;
  config.compute = ComputeModel{2e-9, 3e-6, 256, 4, "test"};
  const UlyssesTime t(config, comm);
  const double large = t.communication(1 << 20, 1024), larger = t.communication(1 << 22, 4096);
  EXPECT_GT(large, 0);
  EXPECT_GT(larger, large);
  gyreCommDestroy(comm);
}

TEST(ComputeModel, TheCalibratedConstantsAreThere) {
  const ComputeModel m = ComputeModel::calibrated();
  EXPECT_GT(m.attentionSeconds, 0);
  EXPECT_GT(m.linearSeconds, 0);
  EXPECT_GT(m.hidden, 0);
  EXPECT_NE(m.source.find("gyre-flexsp-calibrate"), std::string::npos) << m.source;
}

}  // namespace
}  // namespace gyre::flexsp::test
