// Single-process training: the same seed gives the same run bit for bit,
// and the model learns a generated corpus. Later steps check every parallel
// configuration against this run, so it has to be exactly reproducible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/random.h"

namespace gyre::harness::test {
namespace {

// A sentence repeated: every byte is predictable from the few before it,
// except where a window starts mid-word.
std::vector<int> corpus() {
  const std::string sentence = "the quick brown fox jumps over the lazy dog. ";
  std::vector<int> tokens;
  for (int i = 0; i < 40; ++i) {
    for (unsigned char ch : sentence) tokens.push_back(ch);
  }
  return tokens;
}

struct TrainingRun {
  std::vector<float> losses;
  std::vector<float> params;
};

TrainingRun train(uint64_t seed, int steps) {
  GptConfig config;
  config.vocab = 256;
  config.maxSeq = 32;
  config.layers = 2;
  config.heads = 4;
  config.dim = 32;
  const int B = 8, T = 32;
  Gpt model(config);
  model.initialize(seed);
  AdamW adam(decaySegments(model.layout()), model.params().size(), AdamWConfig{});
  const LrSchedule schedule{.maxLr = 1e-2f, .minLr = 1e-3f, .warmupSteps = 10, .totalSteps = steps};
  const std::vector<int> data = corpus();
  Random sampler(seed ^ 0x5eed);
  std::vector<int> inputs(B * T), targets(B * T);
  TrainingRun run;
  for (int step = 0; step < steps; ++step) {
    for (int b = 0; b < B; ++b) {
      const size_t start = sampler.below(data.size() - T - 1);
      for (int t = 0; t < T; ++t) {
        inputs[b * T + t] = data[start + t];
        targets[b * T + t] = data[start + t + 1];
      }
    }
    model.zeroGrad();
    run.losses.push_back(model.forward(inputs.data(), targets.data(), B, T));
    model.backward();
    clipToNorm(model.grads(), std::sqrt(sumOfSquares(model.grads())), 1.0f);
    adam.step(model.params(), model.grads(), learningRate(schedule, step));
  }
  run.params.assign(model.params().begin(), model.params().end());
  return run;
}

TEST(HarnessTraining, SameSeedSameRunBitForBit) {
  const TrainingRun a = train(7, 6), b = train(7, 6), c = train(8, 6);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  EXPECT_EQ(std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)), 0);
  EXPECT_NE(a.losses.back(), c.losses.back()) << "another seed must give another run";
}

TEST(HarnessTraining, LossFallsOnARepeatedSentence) {
  const TrainingRun run = train(1, 150);
  // At initialization every byte is about equally likely: log 256 = 5.55.
  EXPECT_NEAR(run.losses.front(), std::log(256.0), 0.2);
  float last = 0.0f;
  for (size_t i = run.losses.size() - 10; i < run.losses.size(); ++i) last += run.losses[i] / 10;
  // The sentence's 28 distinct bytes alone give log 28 = 3.3; the model has
  // to use the context to get far below that.
  EXPECT_LT(last, 0.5f) << "mean loss of the last 10 steps";
  for (size_t i = 0; i < run.losses.size(); i += 15)
    std::printf("step %3zu loss %.4f\n", i, run.losses[i]);
}

}  // namespace
}  // namespace gyre::harness::test
