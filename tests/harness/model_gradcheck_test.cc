// The whole model's backward against finite differences of its loss, for
// every parameter of a tiny configuration, and the flat layout's bookkeeping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "harness/model.h"

namespace gyre::harness::test {
namespace {

GptConfig tinyConfig() {
  GptConfig c;
  c.vocab = 7;
  c.maxSeq = 6;
  c.layers = 2;
  c.heads = 2;
  c.dim = 8;
  return c;
}

TEST(HarnessModel, LayoutIsOneContiguousTable) {
  GptConfig c = tinyConfig();
  Gpt model(c);
  const auto& layout = model.layout();
  ASSERT_EQ(layout.size(), 2u + 12u * c.layers + 2u);
  size_t offset = 0;
  for (const ParamInfo& p : layout) {
    EXPECT_EQ(p.offset, offset) << p.name;
    EXPECT_EQ(p.size, elementsOf(p.shape)) << p.name;
    EXPECT_EQ(p.decay, p.shape.size() == 2) << p.name;
    offset += p.size;
  }
  EXPECT_EQ(offset, model.params().size());
  EXPECT_EQ(offset, model.grads().size());
  // GPT-2's count for this shape: embeddings, 12 C^2 + 13 C per block, the final norm.
  const size_t C = c.dim;
  EXPECT_EQ(offset, (c.vocab + c.maxSeq) * C + c.layers * (12 * C * C + 13 * C) + 2 * C);
  EXPECT_EQ(model.info("h1.mlp.fc.w").shape, (std::vector<int>{32, 8}));
  EXPECT_EQ(model.info("h1.ln1.w").part, 1);
  EXPECT_EQ(model.param("h0.attn.qkv.b").data(),
            model.params().data() + model.info("h0.attn.qkv.b").offset);
  EXPECT_THROW(model.info("h2.ln1.w"), std::invalid_argument);
}

TEST(HarnessModel, InitializationFollowsTheSeed) {
  Gpt a(tinyConfig()), b(tinyConfig()), c(tinyConfig());
  a.initialize(42);
  b.initialize(42);
  c.initialize(43);
  EXPECT_EQ(std::memcmp(a.params().data(), b.params().data(), a.params().size() * sizeof(float)),
            0);
  EXPECT_NE(std::memcmp(a.params().data(), c.params().data(), a.params().size() * sizeof(float)),
            0);
  for (float w : a.param("h0.ln2.w")) EXPECT_EQ(w, 1.0f);
  for (float w : a.param("h1.mlp.fc.b")) EXPECT_EQ(w, 0.0f);
}

TEST(HarnessModel, RejectsBadInputs) {
  Gpt model(tinyConfig());
  const std::vector<int> ok(7, 1), bad = {1, 2, 7, 1, 1, 1, 1};
  EXPECT_THROW(model.forward(ok.data(), ok.data(), 1, 7), std::invalid_argument);   // T > maxSeq
  EXPECT_THROW(model.forward(bad.data(), ok.data(), 1, 6), std::invalid_argument);  // token 7 of 7
  EXPECT_THROW(model.backward(), std::logic_error);
  GptConfig c = tinyConfig();
  c.dim = 9;
  EXPECT_THROW(Gpt{c}, std::invalid_argument);  // 9 channels into 2 heads
}

TEST(HarnessModel, GradientOfEveryParameter) {
  Gpt model(tinyConfig());
  // Larger weights than GPT-2's 0.02, so that every path carries a gradient
  // well above the finite differences' noise.
  Random rng(11);
  for (const ParamInfo& p : model.layout()) {
    const bool gain = p.name.ends_with("ln1.w") || p.name.ends_with("ln2.w") || p.name == "lnf.w";
    for (float& w : model.param(p.name)) w = rng.normal(gain ? 1.0f : 0.0f, gain ? 0.2f : 0.4f);
  }
  const int B = 2, T = 6;
  const std::vector<int> inputs = {0, 3, 5, 1, 1, 6, 2, 2, 4, 0, 6, 3};
  const std::vector<int> targets = {3, 5, 1, 1, 6, 2, 2, 4, 0, 6, 3, 5};
  model.zeroGrad();
  const float loss0 = model.forward(inputs.data(), targets.data(), B, T);
  model.backward();
  const std::vector<float> analytic(model.grads().begin(), model.grads().end());
  auto loss = [&] {
    return static_cast<double>(model.forward(inputs.data(), targets.data(), B, T));
  };
  const std::vector<double> numeric = numericGradient(model.params(), loss);
  EXPECT_EQ(static_cast<float>(loss()), loss0)
      << "the check must leave the parameters as it found them";
  // Per parameter, so that a failure names the one that is wrong. The loss
  // is a mean over 12 tokens: its gradients are ~1e-2, and a float loss
  // near 2 is known to ~2e-7, so the absolute tolerance is tighter here.
  for (const ParamInfo& p : model.layout()) {
    std::span<const float> a(analytic.data() + p.offset, p.size);
    std::span<const double> n(numeric.data() + p.offset, p.size);
    EXPECT_TRUE(gradientsAgree(a, n, 1e-2, 1e-4)) << p.name;
  }
}

// A mixture of experts in every block (harness/moe.h): the layout's
// tensors, and every parameter's gradient of the next-token loss plus the
// load-balancing losses against finite differences, capacity dropping
// slots. Top-k is a step: elements whose step moves any block's routing
// are left out (few).
TEST(HarnessModel, MixtureOfExpertsGradientOfEveryParameter) {
  GptConfig c = tinyConfig();
  c.experts = 3;
  c.topK = 2;
  c.capacityFactor = 0.75f;  // 12 tokens x 2 / 3 x 0.75: 6 slots an expert
  c.auxCoef = 0.3f;
  Gpt model(c);
  EXPECT_EQ(model.layout().size(), 2u + 13u * c.layers + 2u);
  EXPECT_EQ(model.info("h1.moe.fc.w").shape, (std::vector<int>{3 * 32, 8}));
  EXPECT_EQ(model.info("h0.moe.gate.w").shape, (std::vector<int>{3, 8}));
  EXPECT_THROW(model.info("h0.mlp.fc.w"), std::invalid_argument);
  Random rng(12);
  for (const ParamInfo& p : model.layout()) {
    const bool gain = p.name.ends_with("ln1.w") || p.name.ends_with("ln2.w") || p.name == "lnf.w";
    for (float& w : model.param(p.name)) w = rng.normal(gain ? 1.0f : 0.0f, gain ? 0.2f : 0.4f);
  }
  const int B = 2, T = 6;
  const std::vector<int> inputs = {0, 3, 5, 1, 1, 6, 2, 2, 4, 0, 6, 3};
  const std::vector<int> targets = {3, 5, 1, 1, 6, 2, 2, 4, 0, 6, 3, 5};
  auto routing = [&] {
    std::vector<int> r;
    for (const Activations::Block& b : model.lastActivations().blocks) {
      r.insert(r.end(), b.moe.choice.begin(), b.moe.choice.end());
      r.insert(r.end(), b.moe.row.begin(), b.moe.row.end());
    }
    return r;
  };
  model.zeroGrad();
  model.forward(inputs.data(), targets.data(), B, T);
  const std::vector<int> base = routing();
  int dropped = 0;
  for (const Activations::Block& b : model.lastActivations().blocks)
    for (int d : b.moe.dropped) dropped += d;
  EXPECT_GT(dropped, 0) << "the capacity should drop slots in this check";
  EXPECT_GT(model.lastActivations().aux, 0.0);
  model.backward();
  const std::vector<float> analytic(model.grads().begin(), model.grads().end());
  bool moved = false;
  auto loss = [&] {
    const double ce = model.forward(inputs.data(), targets.data(), B, T);
    if (routing() != base) moved = true;
    return ce + model.lastActivations().aux;
  };
  for (const ParamInfo& p : model.layout()) {
    std::vector<float> a;
    std::vector<double> n;
    std::span<float> w = model.param(p.name);
    for (size_t i = 0; i < w.size(); ++i) {
      moved = false;
      const double g = numericGradient(w.subspan(i, 1), loss)[0];
      if (moved) continue;
      a.push_back(analytic[p.offset + i]);
      n.push_back(g);
    }
    EXPECT_GE(a.size(), p.size * 3 / 4) << p.name << ": too many steps moved a choice";
    EXPECT_TRUE(gradientsAgree(a, n, 1e-2, 1e-4)) << p.name;
  }
}

TEST(HarnessModel, GradientsAccumulateUntilZeroed) {
  Gpt model(tinyConfig());
  model.initialize(3);
  const std::vector<int> inputs = {1, 2, 3}, targets = {2, 3, 4};
  model.zeroGrad();
  model.forward(inputs.data(), targets.data(), 1, 3);
  model.backward();
  const std::vector<float> once(model.grads().begin(), model.grads().end());
  model.backward();
  // Twice, up to rounding: a gradient summed over rows adds each row to the
  // running total, and the second total starts from the first.
  for (size_t i = 0; i < once.size(); ++i) {
    ASSERT_NEAR(model.grads()[i], 2.0f * once[i], 1e-5f * std::fabs(once[i]) + 1e-8f) << i;
  }
  model.zeroGrad();
  for (float g : model.grads()) ASSERT_EQ(g, 0.0f);
}

}  // namespace
}  // namespace gyre::harness::test
