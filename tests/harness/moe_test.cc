// The mixture-of-experts MLP (harness/moe.h) on one rank: routing and its
// capacity rule worked out by hand, the layer against a token-by-token
// reference, and every gradient (input, gate, each expert, the load-balancing
// loss) against central finite differences.
#include "harness/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "harness/layers.h"
#include "harness/random.h"

namespace gyre::harness::test {
namespace {

// E experts' parameters in one array each, and views of them.
struct Experts {
  int E, C;
  std::vector<float> fcw, fcb, projw, projb;
  Experts(int experts, int dim, Random& rng)
      : E(experts),
        C(dim),
        fcw(normals(static_cast<size_t>(E) * 4 * C * C, rng, 0.0f, 0.3f)),
        fcb(normals(static_cast<size_t>(E) * 4 * C, rng, 0.0f, 0.3f)),
        projw(normals(static_cast<size_t>(E) * C * 4 * C, rng, 0.0f, 0.3f)),
        projb(normals(static_cast<size_t>(E) * C, rng, 0.0f, 0.3f)) {}
  Experts(int experts, int dim) : E(experts), C(dim) {
    fcw.assign(static_cast<size_t>(E) * 4 * C * C, 0.0f);
    fcb.assign(static_cast<size_t>(E) * 4 * C, 0.0f);
    projw.assign(fcw.size(), 0.0f);
    projb.assign(static_cast<size_t>(E) * C, 0.0f);
  }
  std::vector<ExpertParams> params() const {
    return expertViews<ExpertParams>(fcw.data(), fcb.data(), projw.data(), projb.data(), E, C);
  }
  std::vector<ExpertGrads> grads() {
    return expertViews<ExpertGrads>(fcw.data(), fcb.data(), projw.data(), projb.data(), E, C);
  }
};

// A gate whose logits are 10 x the input's first E features: a token's
// choices are where its input is largest.
std::vector<float> pickingGate(int E, int C) {
  std::vector<float> gate(static_cast<size_t>(E) * C, 0.0f);
  for (int e = 0; e < E; ++e) gate[static_cast<size_t>(e) * C + e] = 10.0f;
  return gate;
}

TEST(HarnessMoe, CapacityTakesFirstChoicesBeforeSecondOnesInTokenOrder) {
  const int E = 3, C = 4, N = 4;
  const MoeConfig config{.experts = E, .topK = 2, .capacityFactor = 0.75f};  // ceil(.75*8/3) = 2
  // First and second choices: t0 (0, 1), t1 (0, 2), t2 (0, 1), t3 (1, 0).
  const std::vector<float> x = {3, 2, 0, 0,  3, 0, 2, 0,  3, 2, 0, 0,  2, 3, 0, 0};
  const std::vector<float> gate = pickingGate(E, C);
  const MoeRouting r = moeRoute(config, x.data(), gate.data(), N, C);
  EXPECT_EQ(r.choice, (std::vector<int>{0, 1, 0, 2, 0, 1, 1, 0}));
  // Expert 0 takes t0 and t1's first choices; t2's first choice and t3's
  // second are dropped. Expert 1 takes t3's first choice, then t0's second
  // (t2's second is over its capacity of 2). Expert 2 takes t1's second.
  EXPECT_EQ(r.dropped, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(r.expertRow, (std::vector<int>{0, 2, 4, 5}));
  EXPECT_EQ(r.rowSlot, (std::vector<int>{0 * 2 + 0, 1 * 2 + 0, 3 * 2 + 0, 0 * 2 + 1, 1 * 2 + 1}));
  EXPECT_EQ(r.row, (std::vector<int>{0, 3, 1, 4, -1, -1, 2, -1}));
  // f: expert 0 chosen 4 times of 8, expert 1 3 times, expert 2 once.
  EXPECT_EQ(r.fraction, (std::vector<float>{0.5f, 0.375f, 0.125f}));
  // Without a capacity nothing is dropped.
  const MoeRouting all = moeRoute({.experts = E, .topK = 2}, x.data(), gate.data(), N, C);
  EXPECT_EQ(all.dropped, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(all.rows(), 8);
}

TEST(HarnessMoe, TheLayerIsTheWeightedSumOfEachTokensExperts) {
  const int E = 4, C = 6, N = 7;
  Random rng(11);
  const Experts ex(E, C, rng);
  const std::vector<float> x = normals(N * C, rng), gate = normals(E * C, rng);
  for (const float factor : {0.0f, 0.6f}) {
    SCOPED_TRACE(factor);
    const MoeConfig config{.experts = E, .topK = 2, .capacityFactor = factor};
    MoeRouting routing;
    ExpertActivations acts;
    std::vector<float> out(N * C);
    moeForward(config, x.data(), gate.data(), ex.params(), out.data(), N, C, routing, acts);
    int kept = 0;
    for (int t = 0; t < N; ++t) {
      std::vector<double> want(C, 0.0);
      for (int j = 0; j < 2; ++j) {
        if (routing.row[t * 2 + j] < 0) continue;
        ++kept;
        const ExpertParams p = ex.params()[routing.choice[t * 2 + j]];
        std::vector<float> fc(4 * C), g(4 * C), y(C);
        linearForward(fc.data(), x.data() + t * C, p.fcw, p.fcb, 1, C, 4 * C);
        geluForward(g.data(), fc.data(), 4 * C);
        linearForward(y.data(), g.data(), p.projw, p.projb, 1, 4 * C, C);
        for (int c = 0; c < C; ++c) want[c] += routing.weight[t * 2 + j] * y[c];
      }
      for (int c = 0; c < C; ++c) EXPECT_NEAR(out[t * C + c], want[c], 1e-5) << t << "," << c;
    }
    int dropped = 0;
    for (int d : routing.dropped) dropped += d;
    EXPECT_EQ(kept + dropped, N * 2);
    if (factor > 0) {
      EXPECT_GT(dropped, 0) << "the capacity case should drop something";
    }
  }
}

TEST(HarnessMoe, AnExpertNobodyChoosesAndAnEmptyBatchAreFine) {
  const int E = 4, C = 4, N = 3;
  Random rng(5);
  const Experts ex(E, C, rng);
  const std::vector<float> gate = pickingGate(E, C);
  const std::vector<float> x = {3, 2, 0, 0, 3, 2, 0, 0, 2, 3, 0, 0};  // experts 2 and 3 unused
  MoeRouting routing;
  ExpertActivations acts;
  std::vector<float> out(N * C), dx(N * C, 0.0f), dgate(E * C, 0.0f);
  const MoeConfig config{.experts = E, .topK = 2};
  moeForward(config, x.data(), gate.data(), ex.params(), out.data(), N, C, routing, acts);
  EXPECT_EQ(routing.expertRow, (std::vector<int>{0, 3, 6, 6, 6}));
  Experts g(E, C);
  const std::vector<float> dout(N * C, 1.0f);
  moeBackward(config, x.data(), gate.data(), ex.params(), g.grads(), routing, acts, dout.data(),
              1.0f, dgate.data(), dx.data(), C);
  for (size_t i = 2 * 16 * C; i < g.fcw.size(); ++i) ASSERT_EQ(g.fcw[i], 0.0f) << i;

  MoeRouting none;
  moeForward(config, nullptr, gate.data(), ex.params(), nullptr, 0, C, none, acts);
  EXPECT_EQ(none.rows(), 0);
  EXPECT_EQ(none.auxLoss, 0.0);
}

// Expert parallelism's exchange on one rank: every expert local, each
// slot's row where the routing's packed order puts it. The parallel forms
// of the layer must then be the one-rank layer, drops and all.
struct LoopbackExchange : ExpertExchange {
  struct R : Route {
    const MoeRouting* routing = nullptr;
  };
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::shared_ptr<Route> dispatch(const MoeRouting& routing, const float* x, int C,
                                  std::vector<float>& rows, std::vector<int>& counts) override {
    rows.assign(static_cast<size_t>(routing.rows()) * C, 0.0f);
    moePack(routing, x, rows.data(), C);
    counts.assign(routing.E, 0);
    for (int e = 0; e < routing.E; ++e) counts[e] = routing.expertRow[e + 1] - routing.expertRow[e];
    auto r = std::make_shared<R>();
    r->routing = &routing;
    return r;
  }
  void combine(Route& route, const float* rows, float* slots, int C) override {
    const MoeRouting& m = *static_cast<R&>(route).routing;
    for (size_t slot = 0; slot < m.row.size(); ++slot) {
      float* out = slots + slot * C;
      if (m.row[slot] < 0) {
        std::fill(out, out + C, 0.0f);
      } else {
        std::copy_n(rows + static_cast<size_t>(m.row[slot]) * C, C, out);
      }
    }
  }
  void dispatchSlots(Route& route, const float* slots, float* rows, int C) override {
    const MoeRouting& m = *static_cast<R&>(route).routing;
    for (size_t slot = 0; slot < m.row.size(); ++slot)
      if (m.row[slot] >= 0)
        std::copy_n(slots + slot * C, C, rows + static_cast<size_t>(m.row[slot]) * C);
  }
};

TEST(HarnessMoe, TheExpertParallelFormsAreTheOneRankLayer) {
  const int E = 4, C = 8, N = 16;
  for (const float factor : {0.0f, 0.75f}) {
    Random rng(31);
    const Experts ex(E, C, rng);
    const std::vector<float> x = normals(N * C, rng), gate = normals(E * C, rng, 0.0f, 0.5f),
                             dout = normals(N * C, rng);
    const MoeConfig config{.experts = E, .topK = 2, .capacityFactor = factor, .auxCoef = 0.5f};
    MoeRouting one, par;
    ExpertActivations oneActs, parActs;
    std::vector<float> oneOut(N * C), parOut(N * C);
    moeForward(config, x.data(), gate.data(), ex.params(), oneOut.data(), N, C, one, oneActs);
    LoopbackExchange loop;
    moeForward(config, loop, x.data(), gate.data(), ex.params(), parOut.data(), N, C, par,
               parActs);
    EXPECT_EQ(par.row, one.row);
    EXPECT_EQ(par.dropped, one.dropped);
    for (int i = 0; i < N * C; ++i) EXPECT_NEAR(parOut[i], oneOut[i], 1e-6) << i;
    Experts oneG(E, C), parG(E, C);
    std::vector<float> oneDx(N * C, 0.0f), parDx(N * C, 0.0f), oneDgate(E * C, 0.0f),
        parDgate(E * C, 0.0f);
    moeBackward(config, x.data(), gate.data(), ex.params(), oneG.grads(), one, oneActs,
                dout.data(), 1.0f, oneDgate.data(), oneDx.data(), C);
    moeBackward(config, loop, x.data(), gate.data(), ex.params(), parG.grads(), par, parActs,
                dout.data(), 1.0f, parDgate.data(), parDx.data(), C);
    auto near = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << what << " " << i;
    };
    near(parDx, oneDx, "dx");
    near(parDgate, oneDgate, "dgate");
    near(parG.fcw, oneG.fcw, "fc.w");
    near(parG.projb, oneG.projb, "proj.b");
  }
  // Local experts that do not match the exchange's share are refused.
  LoopbackExchange loop;
  Random rng(3);
  const Experts two(2, 4, rng);
  const std::vector<float> x(4, 1.0f), gate(16, 0.1f);
  std::vector<float> out(4);
  MoeRouting r;
  ExpertActivations a;
  EXPECT_THROW(moeForward({.experts = 4, .topK = 2}, loop, x.data(), gate.data(), two.params(),
                          out.data(), 1, 4, r, a),
               std::invalid_argument);
}

TEST(HarnessMoe, BadConfigurationsAreNamed) {
  const std::vector<float> x(4), gate(8);
  EXPECT_THROW(moeRoute({.experts = 0}, x.data(), gate.data(), 1, 4), std::invalid_argument);
  EXPECT_THROW(moeRoute({.experts = 2, .topK = 3}, x.data(), gate.data(), 1, 4),
               std::invalid_argument);
  EXPECT_THROW(moeRoute({.experts = 2, .topK = 1, .capacityFactor = -1}, x.data(), gate.data(), 1, 4),
               std::invalid_argument);
}

// loss = sum(out x r) + the load-balancing loss. Top-k and capacity are
// steps: an element whose +-h moves a choice is left out (counted).
TEST(HarnessMoe, GradientsMatchFiniteDifferences) {
  const int E = 4, C = 5, N = 8;
  for (const float factor : {0.0f, 0.75f}) {
    SCOPED_TRACE(factor);
    Random rng(21);
    Experts ex(E, C, rng);
    std::vector<float> x = normals(N * C, rng), gate = normals(E * C, rng, 0.0f, 0.5f);
    const std::vector<float> r = normals(N * C, rng);
    const MoeConfig config{.experts = E, .topK = 2, .capacityFactor = factor, .auxCoef = 0.5f};
    MoeRouting base;
    ExpertActivations acts;
    std::vector<float> out(N * C);
    moeForward(config, x.data(), gate.data(), ex.params(), out.data(), N, C, base, acts);
    if (factor > 0) {
      int dropped = 0;
      for (int d : base.dropped) dropped += d;
      ASSERT_GT(dropped, 0);
    }
    Experts g(E, C);
    std::vector<float> dx(N * C, 0.0f), dgate(E * C, 0.0f);
    moeBackward(config, x.data(), gate.data(), ex.params(), g.grads(), base, acts, r.data(), 1.0f,
                dgate.data(), dx.data(), C);

    bool moved = false;
    auto loss = [&] {
      MoeRouting routing;
      ExpertActivations a;
      moeForward(config, x.data(), gate.data(), ex.params(), out.data(), N, C, routing, a);
      if (routing.row != base.row || routing.choice != base.choice) moved = true;
      return weightedSum(out, r) + routing.auxLoss;
    };
    // Central differences one element at a time, keeping the elements whose
    // step left the routing as it was.
    auto check = [&](std::vector<float>& v, const std::vector<float>& analytic, const char* what) {
      std::vector<float> keptAnalytic;
      std::vector<double> keptNumeric;
      for (size_t i = 0; i < v.size(); ++i) {
        moved = false;
        const std::vector<double> n = numericGradient(std::span<float>(v).subspan(i, 1), loss);
        if (moved) continue;
        keptAnalytic.push_back(analytic[i]);
        keptNumeric.push_back(n[0]);
      }
      EXPECT_GE(keptAnalytic.size(), v.size() * 3 / 4) << what << ": too many choices moved";
      EXPECT_TRUE(gradientsAgree(keptAnalytic, keptNumeric, 1e-2, 1e-3)) << what;
    };
    check(x, dx, "x");
    check(gate, dgate, "gate");
    check(ex.fcw, g.fcw, "fc.w");
    check(ex.fcb, g.fcb, "fc.b");
    check(ex.projw, g.projw, "proj.w");
    check(ex.projb, g.projb, "proj.b");
  }
}

}  // namespace
}  // namespace gyre::harness::test
