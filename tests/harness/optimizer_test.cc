// AdamW, clipping and the schedule against values worked out by hand.
#include "harness/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace gyre::harness::test {
namespace {

TEST(HarnessOptimizer, AdamWTwoStepsByHand) {
  // Two parameters, the first decayed and the second not; lr 0.1.
  AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weightDecay = 0.01f};
  AdamW adam({{0, 1, true}, {1, 1, false}}, 2, config);
  std::vector<float> p = {1.0f, 2.0f};
  // Step 1, g = (0.5, -0.25): the bias-corrected moments are g and g^2, so
  // the update is sign(g) (less eps): p0 = 1 - 0.1 (1 + 0.01 * 1) = 0.899,
  // p1 = 2 + 0.1 = 2.1.
  adam.step(p, std::vector<float>{0.5f, -0.25f}, 0.1f);
  EXPECT_NEAR(p[0], 0.899, 1e-6);
  EXPECT_NEAR(p[1], 2.1, 1e-6);
  // The moments in float: 1 - 0.999f is 0.00099998713, not 0.001.
  EXPECT_NEAR(adam.m()[0], 0.05, 1e-7);
  EXPECT_NEAR(adam.v()[1], 0.001 * 0.0625, 1e-9);
  // Step 2, g = (0.1, 0.25):
  //   m0 = 0.9 * 0.05 + 0.1 * 0.1 = 0.055,  mhat0 = 0.055 / (1 - 0.81) = 0.289474
  //   v0 = 0.999 * 0.00025 + 0.001 * 0.01 = 0.00025975,  vhat0 = v0 / (1 - 0.999^2) = 0.129940
  //   p0 = 0.899 - 0.1 (0.289474 / 0.360472 + 0.01 * 0.899) = 0.817797
  //   m1 = 0.9 * -0.025 + 0.1 * 0.25 = 0.0025,  mhat1 = 0.0131579
  //   v1 = 0.999 * 0.0000625 + 0.001 * 0.0625 = 0.0001249375,  vhat1 = 0.0625
  //   p1 = 2.1 - 0.1 (0.0131579 / 0.25) = 2.094737 (no decay)
  adam.step(p, std::vector<float>{0.1f, 0.25f}, 0.1f);
  EXPECT_NEAR(p[0], 0.8177969, 2e-6);
  EXPECT_NEAR(p[1], 2.0947368, 2e-6);
  EXPECT_EQ(adam.steps(), 2);
}

TEST(HarnessOptimizer, DecaySegmentsFollowTheLayout) {
  GptConfig c;
  c.layers = 1;
  std::vector<ParamInfo> layout = gptLayout(c);
  std::vector<DecaySegment> segments = decaySegments(layout);
  // wte+wpe decay (merged), then the block alternates 1-D and 2-D, then lnf.
  ASSERT_FALSE(segments.empty());
  EXPECT_TRUE(segments[0].decay);
  EXPECT_EQ(segments[0].size, layout[0].size + layout[1].size);
  size_t covered = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    EXPECT_EQ(segments[i].offset, covered);
    if (i > 0) {
      EXPECT_NE(segments[i].decay, segments[i - 1].decay);
    }
    covered += segments[i].size;
  }
  EXPECT_EQ(covered, layout.back().offset + layout.back().size);
  EXPECT_THROW(AdamW({{0, 5, true}}, 4, AdamWConfig{}), std::invalid_argument);
}

TEST(HarnessOptimizer, ClipByGlobalNorm) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_EQ(sumOfSquares(g), 25.0);
  EXPECT_FLOAT_EQ(clipToNorm(g, 5.0, 1.0f), 0.2f);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.8f);
  // Within bounds: untouched.
  EXPECT_EQ(clipToNorm(g, 1.0, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
}

TEST(HarnessOptimizer, WarmupThenCosine) {
  LrSchedule s{.maxLr = 1.0f, .minLr = 0.1f, .warmupSteps = 4, .totalSteps = 14};
  EXPECT_FLOAT_EQ(learningRate(s, 0), 0.25f);
  EXPECT_FLOAT_EQ(learningRate(s, 1), 0.5f);
  EXPECT_FLOAT_EQ(learningRate(s, 3), 1.0f);
  EXPECT_FLOAT_EQ(learningRate(s, 4), 1.0f);   // the cosine's top
  EXPECT_FLOAT_EQ(learningRate(s, 9), 0.55f);  // halfway down: (max + min) / 2
  EXPECT_NEAR(learningRate(s, 13), 0.1f + 0.9f * 0.5f * (1.0f + std::cos(std::numbers::pi * 0.9)),
              1e-6);
  EXPECT_FLOAT_EQ(learningRate(s, 14), 0.1f);
  EXPECT_FLOAT_EQ(learningRate(s, 1000), 0.1f);
}

}  // namespace
}  // namespace gyre::harness::test
