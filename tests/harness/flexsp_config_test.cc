// FlexSP's mode refuses what it cannot run, each by a sentence naming the
// problem, before it touches any communicator (Trainer validates first).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "harness/trainer.h"

namespace gyre::harness::test {
namespace {

TrainerConfig flexspConfig() {
  TrainerConfig c;
  c.model = {.vocab = 256, .maxSeq = 32, .layers = 1, .heads = 4, .dim = 16};
  c.mesh.dp = 4;
  c.batch = 2;
  c.seq = 32;
  c.flexsp.on = true;
  c.flexsp.lengths = {.mu = 2.3, .sigma = 0.8, .minLen = 4, .maxLen = 32};
  return c;
}

void expectRefused(const std::function<void(TrainerConfig&)>& change, const std::string& words) {
  TrainerConfig c = flexspConfig();
  change(c);
  try {
    Trainer trainer(nullptr, c);
    ADD_FAILURE() << "not refused; expected: " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("FlexSP ", 0), 0u) << e.what();
  }
}

TEST(HarnessFlexspConfig, BadConfigurationsAreRefusedByName) {
  expectRefused([](TrainerConfig& c) { c.mesh = {.dp = 2, .tp = 2}; }, "tensor parallelism (tp 2)");
  expectRefused([](TrainerConfig& c) { c.mesh = {.dp = 2, .pp = 2}; }, "pipeline (pp 2)");
  expectRefused([](TrainerConfig& c) { c.mesh = {.dp = 2, .sp = 2}; },
                "fixed sequence-parallel size (sp 2)");
  expectRefused([](TrainerConfig& c) { c.codec = gyreCodecInt8; }, "compressed or decentralized");
  expectRefused([](TrainerConfig& c) { c.decentralized = true; }, "compressed or decentralized");
  expectRefused([](TrainerConfig& c) { c.mesh.dp = 6; }, "on 6 ranks");
  expectRefused([](TrainerConfig& c) { c.zero = 2; }, "ZeRO stage 2");
  expectRefused([](TrainerConfig& c) { c.zero = 3; }, "ZeRO stage 3");
  expectRefused([](TrainerConfig& c) { c.microBatches = 2; }, "micro-batches");
  expectRefused([](TrainerConfig& c) { c.model.experts = 4; }, "mixture of experts");
  expectRefused([](TrainerConfig& c) { c.flexsp.lengths.minLen = 2; }, "as short as 2 tokens");
  expectRefused([](TrainerConfig& c) { c.seq = 64; }, "over the model's maxSeq 32");
  expectRefused([](TrainerConfig& c) { c.flexsp.memoryTokens = 8; },
                "4 ranks hold fewer than a batch's 64");
  expectRefused(
      [](TrainerConfig& c) {
        c.model.heads = 1;  // groups of one rank only, each holding 16 tokens
        c.flexsp.lengths.minLen = 1;
        c.flexsp.memoryTokens = 16;  // 4 ranks x 16: the batch's 2 x 32 tokens
      },
      "a sequence of 32 tokens (seq) needs more than the largest group, 1 ranks, holds");
  expectRefused(
      [](TrainerConfig& c) {
        c.mesh.dp = 8;
        c.flexsp.lengths.minLen = 8;
        c.flexsp.fixedUlysses = true;
      },
      "heads do not split");
}

TEST(HarnessFlexspConfig, LargestGroupIsWhatTheHeadsAndTheWorldAllow) {
  TrainerConfig c = flexspConfig();
  EXPECT_EQ(flexspLargestGroup(c), 4);
  c.mesh.dp = 8;
  EXPECT_EQ(flexspLargestGroup(c), 4);  // 4 heads
  c.model.heads = 6;
  EXPECT_EQ(flexspLargestGroup(c), 2);
  c.mesh.dp = 1;
  EXPECT_EQ(flexspLargestGroup(c), 1);
}

}  // namespace
}  // namespace gyre::harness::test
