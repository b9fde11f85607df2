// Every layer's backward against central finite differences of its forward:
// a scalar sum(out * R) with random R, differentiated by each input and
// parameter in turn.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "harness/layers.h"

namespace gyre::harness::test {
namespace {

constexpr double kRtol = 1e-2;
constexpr double kAtol = 1e-3;

TEST(HarnessLayers, EmbeddingGradients) {
  const int B = 2, T = 3, C = 4, V = 5;
  Random rng(1);
  std::vector<float> wte = normals(V * C, rng), wpe = normals(T * C, rng),
                     r = normals(B * T * C, rng);
  const std::vector<int> tokens = {1, 3, 1, 4, 1, 0};  // token 1 three times: its rows must add up
  std::vector<float> out(B * T * C);
  auto loss = [&] {
    embeddingForward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return weightedSum(out, r);
  };
  std::vector<float> dwte(V * C), dwpe(T * C);
  embeddingBackward(dwte.data(), dwpe.data(), r.data(), tokens.data(), B, T, C);
  EXPECT_TRUE(gradientsAgree(dwte, numericGradient(wte, loss), kRtol, kAtol));
  EXPECT_TRUE(gradientsAgree(dwpe, numericGradient(wpe, loss), kRtol, kAtol));
  for (int c = 0; c < C; ++c) EXPECT_EQ(dwte[2 * C + c], 0.0f) << "token 2 is not in the batch";
}

TEST(HarnessLayers, LayerNormGradients) {
  const int N = 3, C = 7;
  Random rng(2);
  std::vector<float> inp = normals(N * C, rng, 0.5f, 2.0f), w = normals(C, rng, 1.0f, 0.3f),
                     b = normals(C, rng);
  std::vector<float> r = normals(N * C, rng), out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    layerNormForward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    return weightedSum(out, r);
  };
  loss();
  std::vector<float> dinp(N * C), dw(C), db(C);
  layerNormBackward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), mean.data(),
                    rstd.data(), N, C);
  EXPECT_TRUE(gradientsAgree(dinp, numericGradient(inp, loss), kRtol, kAtol));
  EXPECT_TRUE(gradientsAgree(dw, numericGradient(w, loss), kRtol, kAtol));
  EXPECT_TRUE(gradientsAgree(db, numericGradient(b, loss), kRtol, kAtol));
}

TEST(HarnessLayers, LayerNormNormalizes) {
  const int C = 4;
  const std::vector<float> inp = {1, 2, 3, 4}, w = {1, 1, 1, 1}, b = {0, 0, 0, 0};
  std::vector<float> out(C);
  float mean, rstd;
  layerNormForward(out.data(), &mean, &rstd, inp.data(), w.data(), b.data(), 1, C);
  EXPECT_FLOAT_EQ(mean, 2.5f);
  EXPECT_NEAR(rstd, 1.0 / std::sqrt(1.25 + 1e-5), 1e-6);
  EXPECT_NEAR(out[0], -1.5 / std::sqrt(1.25 + 1e-5), 1e-6);
}

TEST(HarnessLayers, LinearGradients) {
  const int N = 4, C = 5, OC = 3;
  Random rng(3);
  std::vector<float> inp = normals(N * C, rng), w = normals(OC * C, rng), b = normals(OC, rng);
  std::vector<float> r = normals(N * OC, rng), out(N * OC);
  auto loss = [&] {
    linearForward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
    return weightedSum(out, r);
  };
  std::vector<float> dinp(N * C), dw(OC * C), db(OC);
  linearBackward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), N, C, OC);
  EXPECT_TRUE(gradientsAgree(dinp, numericGradient(inp, loss), kRtol, kAtol));
  EXPECT_TRUE(gradientsAgree(dw, numericGradient(w, loss), kRtol, kAtol));
  EXPECT_TRUE(gradientsAgree(db, numericGradient(b, loss), kRtol, kAtol));
}

TEST(HarnessLayers, LinearMatchesTheDefinitionAndAccumulates) {
  // out = inp * w^T + b with w stored [out, in].
  const std::vector<float> inp = {1, 2}, w = {3, 4, 5, 6, 7, 8}, b = {1, 0, -1};
  std::vector<float> out(3);
  linearForward(out.data(), inp.data(), w.data(), b.data(), 1, 2, 3);
  EXPECT_EQ(out, (std::vector<float>{12, 17, 22}));
  linearForward(out.data(), inp.data(), w.data(), nullptr, 1, 2, 3);
  EXPECT_EQ(out, (std::vector<float>{11, 17, 23}));
  // Backward adds: twice the same call gives twice the gradient.
  const std::vector<float> dout = {1, 1, 1};
  std::vector<float> dw(6);
  linearBackward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), 1, 2, 3);
  linearBackward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), 1, 2, 3);
  EXPECT_EQ(dw, (std::vector<float>{2, 4, 2, 4, 2, 4}));
}

TEST(HarnessLayers, AttentionGradients) {
  const int B = 2, T = 5, C = 8, NH = 2;
  Random rng(4);
  std::vector<float> qkv = normals(B * T * 3 * C, rng), r = normals(B * T * C, rng);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  auto loss = [&] {
    attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return weightedSum(out, r);
  };
  loss();
  std::vector<float> dqkv(B * T * 3 * C);
  attentionBackward(dqkv.data(), r.data(), qkv.data(), att.data(), B, T, C, NH);
  EXPECT_TRUE(gradientsAgree(dqkv, numericGradient(qkv, loss), kRtol, kAtol));
}

TEST(HarnessLayers, AttentionIsCausal) {
  // Changing the last position's query, key and value changes no earlier output.
  const int B = 1, T = 4, C = 4, NH = 2;
  Random rng(5);
  std::vector<float> qkv = normals(T * 3 * C, rng), out(T * C), att(NH * T * T);
  attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  const std::vector<float> before = out;
  for (int i = 0; i < 3 * C; ++i) qkv[(T - 1) * 3 * C + i] += 1.0f;
  attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int i = 0; i < (T - 1) * C; ++i) EXPECT_EQ(out[i], before[i]) << "element " << i;
  for (int h = 0; h < NH; ++h) {
    for (int i = 0; i < T; ++i) {
      double rowSum = 0.0;
      for (int j = 0; j < T; ++j) {
        rowSum += att[(h * T + i) * T + j];
        if (j > i) {
          EXPECT_EQ(att[(h * T + i) * T + j], 0.0f);
        }
      }
      EXPECT_NEAR(rowSum, 1.0, 1e-6);
    }
  }
}

TEST(HarnessLayers, GeluGradients) {
  const int n = 24;
  std::vector<float> inp(n), r(n), out(n);
  Random rng(6);
  for (int i = 0; i < n; ++i) inp[i] = -4.0f + 8.0f * i / (n - 1);  // both tails and the bend
  r = normals(n, rng);
  auto loss = [&] {
    geluForward(out.data(), inp.data(), n);
    return weightedSum(out, r);
  };
  std::vector<float> dinp(n);
  geluBackward(dinp.data(), inp.data(), r.data(), n);
  EXPECT_TRUE(gradientsAgree(dinp, numericGradient(inp, loss), kRtol, kAtol));
  const float x = 1.0f;
  float y;
  geluForward(&y, &x, 1);
  EXPECT_NEAR(y, 0.841192, 1e-5);  // GPT-2's tanh form at 1
}

TEST(HarnessLayers, ResidualGradients) {
  const int n = 6;
  Random rng(7);
  std::vector<float> a = normals(n, rng), b = normals(n, rng), r = normals(n, rng), out(n);
  auto loss = [&] {
    residualForward(out.data(), a.data(), b.data(), n);
    return weightedSum(out, r);
  };
  std::vector<float> da(n), db(n);
  residualBackward(da.data(), db.data(), r.data(), n);
  EXPECT_TRUE(gradientsAgree(da, numericGradient(a, loss), kRtol, kAtol));
  EXPECT_TRUE(gradientsAgree(db, numericGradient(b, loss), kRtol, kAtol));
}

TEST(HarnessLayers, CrossEntropyGradients) {
  const int N = 3, V = 6;
  Random rng(8);
  std::vector<float> logits = normals(N * V, rng, 0.0f, 2.0f), probs(N * V);
  const std::vector<int> targets = {0, 5, 2};
  auto loss = [&] {
    return static_cast<double>(
        crossEntropyForward(probs.data(), logits.data(), targets.data(), N, V));
  };
  loss();
  std::vector<float> dlogits(N * V);
  crossEntropyBackward(dlogits.data(), probs.data(), targets.data(), N, V);
  EXPECT_TRUE(gradientsAgree(dlogits, numericGradient(logits, loss, 1e-2f), kRtol, kAtol));
}

TEST(HarnessLayers, CrossEntropyOfKnownLogits) {
  // Equal logits: every token has probability 1/V, the loss is log V.
  const int V = 8;
  std::vector<float> logits(2 * V, 3.0f), probs(2 * V);
  const std::vector<int> targets = {1, 7};
  EXPECT_NEAR(crossEntropyForward(probs.data(), logits.data(), targets.data(), 2, V), std::log(8.0),
              1e-6);
  EXPECT_FLOAT_EQ(probs[5], 1.0f / V);
  // A hopeless target (probability below float's range) still has a finite loss.
  logits.assign(2, 0.0f);
  logits[0] = 200.0f;
  const int target = 1;
  EXPECT_NEAR(crossEntropyForward(probs.data(), logits.data(), &target, 1, 2), 200.0, 1e-3);
}

}  // namespace
}  // namespace gyre::harness::test
