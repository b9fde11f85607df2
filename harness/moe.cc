#include "harness/moe.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/layers.h"

namespace gyre::harness {

namespace {

void checkConfig(const MoeConfig& c) {
  if (c.experts < 1) throw std::invalid_argument("MoE: need at least one expert");
  if (c.topK < 1 || c.topK > c.experts) {
    throw std::invalid_argument("MoE: top-" + std::to_string(c.topK) + " of " +
                                std::to_string(c.experts) + " experts");
  }
  if (!(c.capacityFactor >= 0.0f)) throw std::invalid_argument("MoE: a negative capacity factor");
}

// Runs `counts` consecutive runs of rows through the matching experts.
void runExperts(const std::vector<ExpertParams>& experts, const std::vector<int>& counts,
                ExpertActivations& acts, int C) {
  size_t first = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    expertForward(experts[e], acts.in.data() + first * C, acts.fc.data() + first * 4 * C,
                  acts.gelu.data() + first * 4 * C, acts.out.data() + first * C, counts[e], C);
    first += counts[e];
  }
}

// Their backward: drows [rows, C] the rows' output gradients, into drowsIn.
void runExpertsBackward(const std::vector<ExpertParams>& experts,
                        const std::vector<ExpertGrads>& grads, const std::vector<int>& counts,
                        const ExpertActivations& acts, const float* drows, float* drowsIn,
                        int C) {
  size_t first = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    expertBackward(experts[e], grads[e], acts.in.data() + first * C,
                   acts.fc.data() + first * 4 * C, acts.gelu.data() + first * 4 * C,
                   drows + first * C, drowsIn + first * C, counts[e], C);
    first += counts[e];
  }
}

}  // namespace

MoeRouting moeRoute(const MoeConfig& config, const float* x, const float* gate, int N, int C) {
  checkConfig(config);
  const int E = config.experts, k = config.topK;
  MoeRouting r;
  r.N = N;
  r.k = k;
  r.E = E;
  r.probs.assign(static_cast<size_t>(N) * E, 0.0f);
  if (N > 0) linearForward(r.probs.data(), x, gate, nullptr, N, C, E);
  for (int t = 0; t < N; ++t) {  // softmax of the logits, in place
    float* p = r.probs.data() + static_cast<size_t>(t) * E;
    const float top = *std::max_element(p, p + E);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += (p[e] = std::exp(p[e] - top));
    for (int e = 0; e < E; ++e) p[e] /= sum;
  }
  // Top-k, best first; equal probabilities go to the lower expert, so the
  // choice is a function of the bits alone.
  r.choice.assign(static_cast<size_t>(N) * k, -1);
  r.weight.assign(r.choice.size(), 0.0f);
  std::vector<int> order(E);
  std::vector<int> chosen(E, 0);
  for (int t = 0; t < N; ++t) {
    const float* p = r.probs.data() + static_cast<size_t>(t) * E;
    for (int e = 0; e < E; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [p](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += p[order[j]];
    for (int j = 0; j < k; ++j) {
      r.choice[static_cast<size_t>(t) * k + j] = order[j];
      r.weight[static_cast<size_t>(t) * k + j] = p[order[j]] / sum;
      ++chosen[order[j]];
    }
  }
  // Capacity, first choices before second ones, each in token order.
  const int capacity =
      config.capacityFactor > 0.0f
          ? static_cast<int>(std::ceil(static_cast<double>(config.capacityFactor) * N * k / E))
          : INT_MAX;
  std::vector<int> taken(E, 0), position(r.choice.size(), -1);
  r.dropped.assign(E, 0);
  for (int j = 0; j < k; ++j) {
    for (int t = 0; t < N; ++t) {
      const size_t slot = static_cast<size_t>(t) * k + j;
      const int e = r.choice[slot];
      if (taken[e] < capacity) {
        position[slot] = taken[e]++;
      } else {
        ++r.dropped[e];
      }
    }
  }
  r.expertRow.assign(E + 1, 0);
  for (int e = 0; e < E; ++e) r.expertRow[e + 1] = r.expertRow[e] + taken[e];
  r.row.assign(r.choice.size(), -1);
  r.rowSlot.assign(r.rows(), 0);
  for (size_t slot = 0; slot < r.choice.size(); ++slot) {
    if (position[slot] < 0) continue;
    const int row = r.expertRow[r.choice[slot]] + position[slot];
    r.row[slot] = row;
    r.rowSlot[row] = static_cast<int>(slot);
  }
  // The load-balancing loss: E x sum_e f_e x P_e, 1 when both are even.
  r.fraction.assign(E, 0.0f);
  double aux = 0;
  if (N > 0) {
    for (int e = 0; e < E; ++e) {
      r.fraction[e] = static_cast<float>(chosen[e]) / static_cast<float>(N * k);
      double mean = 0;
      for (int t = 0; t < N; ++t) mean += r.probs[static_cast<size_t>(t) * E + e];
      aux += static_cast<double>(r.fraction[e]) * (mean / N);
    }
  }
  r.auxLoss = config.auxCoef * E * aux;
  return r;
}

void moePack(const MoeRouting& routing, const float* x, float* rows, int C) {
  for (int row = 0; row < routing.rows(); ++row) {
    const float* src = x + static_cast<size_t>(routing.rowSlot[row] / routing.k) * C;
    std::copy(src, src + C, rows + static_cast<size_t>(row) * C);
  }
}

void expertForward(const ExpertParams& p, const float* in, float* fc, float* gelu, float* out,
                   int count, int C) {
  if (count == 0) return;
  const int H = 4 * C;
  linearForward(fc, in, p.fcw, p.fcb, count, C, H);
  geluForward(gelu, fc, count * H);
  linearForward(out, gelu, p.projw, p.projb, count, H, C);
}

void expertBackward(const ExpertParams& p, const ExpertGrads& g, const float* in, const float* fc,
                    const float* gelu, const float* dout, float* din, int count, int C) {
  if (count == 0) return;
  const int H = 4 * C;
  std::vector<float> dgelu(static_cast<size_t>(count) * H, 0.0f), dfc(dgelu.size(), 0.0f);
  linearBackward(dgelu.data(), g.projw, g.projb, dout, gelu, p.projw, count, H, C);
  geluBackward(dfc.data(), fc, dgelu.data(), count * H);
  std::fill(din, din + static_cast<size_t>(count) * C, 0.0f);
  linearBackward(din, g.fcw, g.fcb, dfc.data(), in, p.fcw, count, C, H);
}

void moeCombine(const MoeRouting& routing, const float* rowsOut, float* out, int C) {
  const int k = routing.k;
  std::fill(out, out + static_cast<size_t>(routing.N) * C, 0.0f);
  for (int t = 0; t < routing.N; ++t) {
    float* o = out + static_cast<size_t>(t) * C;
    for (int j = 0; j < k; ++j) {
      const size_t slot = static_cast<size_t>(t) * k + j;
      if (routing.row[slot] < 0) continue;
      const float w = routing.weight[slot];
      const float* y = rowsOut + static_cast<size_t>(routing.row[slot]) * C;
      for (int c = 0; c < C; ++c) o[c] += w * y[c];
    }
  }
}

void moeForward(const MoeConfig& config, const float* x, const float* gate,
                const std::vector<ExpertParams>& experts, float* out, int N, int C,
                MoeRouting& routing, ExpertActivations& acts) {
  if (static_cast<int>(experts.size()) != config.experts) {
    throw std::invalid_argument("MoE: " + std::to_string(experts.size()) + " experts' parameters for " +
                                std::to_string(config.experts) + " experts");
  }
  routing = moeRoute(config, x, gate, N, C);
  const size_t rows = routing.rows();
  acts.in.assign(rows * C, 0.0f);
  acts.fc.assign(rows * 4 * C, 0.0f);
  acts.gelu.assign(acts.fc.size(), 0.0f);
  acts.out.assign(rows * C, 0.0f);
  moePack(routing, x, acts.in.data(), C);
  acts.counts.resize(config.experts);
  for (int e = 0; e < config.experts; ++e)
    acts.counts[e] = routing.expertRow[e + 1] - routing.expertRow[e];
  runExperts(experts, acts.counts, acts, C);
  moeCombine(routing, acts.out.data(), out, C);
}

void moeCombineBackward(const MoeRouting& routing, const float* rowsOut, const float* dout,
                        float* drows, float* dweight, int C) {
  const int k = routing.k;
  for (int t = 0; t < routing.N; ++t) {
    const float* d = dout + static_cast<size_t>(t) * C;
    for (int j = 0; j < k; ++j) {
      const size_t slot = static_cast<size_t>(t) * k + j;
      const int row = routing.row[slot];
      dweight[slot] = 0.0f;
      if (row < 0) continue;
      const float w = routing.weight[slot];
      const float* y = rowsOut + static_cast<size_t>(row) * C;
      float* dr = drows + static_cast<size_t>(row) * C;
      float dot = 0.0f;
      for (int c = 0; c < C; ++c) {
        dr[c] = w * d[c];
        dot += d[c] * y[c];
      }
      dweight[slot] = dot;
    }
  }
}

void moeGateBackward(const MoeConfig& config, const MoeRouting& routing, const float* x,
                     const float* gate, const float* dweight, float auxScale, float* dgate,
                     float* dx, int C) {
  const int N = routing.N, E = routing.E, k = routing.k;
  if (N == 0) return;
  std::vector<float> dlogits(static_cast<size_t>(N) * E, 0.0f), dp(E);
  const float auxPerProb = auxScale * config.auxCoef * E / N;  // times f_e: dL_aux / dp_te
  for (int t = 0; t < N; ++t) {
    const float* p = routing.probs.data() + static_cast<size_t>(t) * E;
    for (int e = 0; e < E; ++e) dp[e] = auxPerProb * routing.fraction[e];
    // w_j = p_j / S over the chosen: dL/dp_j = (dw_j - sum_i dw_i w_i) / S.
    float sum = 0.0f, weighted = 0.0f;
    for (int j = 0; j < k; ++j) {
      const size_t slot = static_cast<size_t>(t) * k + j;
      sum += p[routing.choice[slot]];
      weighted += dweight[slot] * routing.weight[slot];
    }
    for (int j = 0; j < k; ++j) {
      const size_t slot = static_cast<size_t>(t) * k + j;
      dp[routing.choice[slot]] += (dweight[slot] - weighted) / sum;
    }
    // Through the softmax.
    float dot = 0.0f;
    for (int e = 0; e < E; ++e) dot += p[e] * dp[e];
    float* dl = dlogits.data() + static_cast<size_t>(t) * E;
    for (int e = 0; e < E; ++e) dl[e] = p[e] * (dp[e] - dot);
  }
  linearBackward(dx, dgate, nullptr, dlogits.data(), x, gate, N, C, E);
}

void moeUnpackAdd(const MoeRouting& routing, const float* drowsIn, float* dx, int C) {
  for (int row = 0; row < routing.rows(); ++row) {
    float* d = dx + static_cast<size_t>(routing.rowSlot[row] / routing.k) * C;
    const float* s = drowsIn + static_cast<size_t>(row) * C;
    for (int c = 0; c < C; ++c) d[c] += s[c];
  }
}

void moeBackward(const MoeConfig& config, const float* x, const float* gate,
                 const std::vector<ExpertParams>& experts, const std::vector<ExpertGrads>& grads,
                 const MoeRouting& routing, const ExpertActivations& acts, const float* dout,
                 float auxScale, float* dgate, float* dx, int C) {
  const size_t rows = routing.rows();
  std::vector<float> drows(rows * C, 0.0f), dweight(routing.choice.size(), 0.0f),
      drowsIn(rows * C, 0.0f);
  moeCombineBackward(routing, acts.out.data(), dout, drows.data(), dweight.data(), C);
  std::vector<int> counts(config.experts);
  for (int e = 0; e < config.experts; ++e)
    counts[e] = routing.expertRow[e + 1] - routing.expertRow[e];
  runExpertsBackward(experts, grads, counts, acts, drows.data(), drowsIn.data(), C);
  moeUnpackAdd(routing, drowsIn.data(), dx, C);
  moeGateBackward(config, routing, x, gate, dweight.data(), auxScale, dgate, dx, C);
}

void moeForward(const MoeConfig& config, ExpertExchange& exchange, const float* x,
                const float* gate, const std::vector<ExpertParams>& experts, float* out, int N,
                int C, MoeRouting& routing, ExpertActivations& acts) {
  if (exchange.size() < 1 || config.experts % exchange.size() != 0 ||
      static_cast<int>(experts.size()) != config.experts / exchange.size()) {
    throw std::invalid_argument("MoE: " + std::to_string(experts.size()) +
                                " local experts' parameters for " +
                                std::to_string(config.experts) + " experts over " +
                                std::to_string(exchange.size()) + " expert-parallel ranks");
  }
  routing = moeRoute(config, x, gate, N, C);
  acts.route = exchange.dispatch(routing, x, C, acts.in, acts.counts);
  const size_t rows = acts.in.size() / C;
  acts.fc.assign(rows * 4 * C, 0.0f);
  acts.gelu.assign(acts.fc.size(), 0.0f);
  acts.out.assign(rows * C, 0.0f);
  runExperts(experts, acts.counts, acts, C);
  acts.slotOut.assign(static_cast<size_t>(N) * routing.k * C, 0.0f);
  exchange.combine(*acts.route, acts.out.data(), acts.slotOut.data(), C);
  // The weighted sum in slot order, as moeCombine does from packed rows.
  std::fill(out, out + static_cast<size_t>(N) * C, 0.0f);
  for (size_t slot = 0; slot < routing.choice.size(); ++slot) {
    if (routing.row[slot] < 0) continue;
    const float w = routing.weight[slot];
    const float* y = acts.slotOut.data() + slot * C;
    float* o = out + (slot / routing.k) * C;
    for (int c = 0; c < C; ++c) o[c] += w * y[c];
  }
}

void moeBackward(const MoeConfig& config, ExpertExchange& exchange, const float* x,
                 const float* gate, const std::vector<ExpertParams>& experts,
                 const std::vector<ExpertGrads>& grads, const MoeRouting& routing,
                 const ExpertActivations& acts, const float* dout, float auxScale, float* dgate,
                 float* dx, int C) {
  if (!acts.route) throw std::logic_error("MoE: an expert-parallel backward without its forward");
  const size_t slots = routing.choice.size(), rows = acts.in.size() / C;
  // Each kept slot's share of its token's gradient, and its weight's gradient.
  std::vector<float> dslots(slots * C, 0.0f), dweight(slots, 0.0f);
  for (size_t slot = 0; slot < slots; ++slot) {
    if (routing.row[slot] < 0) continue;
    const float w = routing.weight[slot];
    const float* d = dout + (slot / routing.k) * C;
    const float* y = acts.slotOut.data() + slot * C;
    float* ds = dslots.data() + slot * C;
    float dot = 0.0f;
    for (int c = 0; c < C; ++c) {
      ds[c] = w * d[c];
      dot += d[c] * y[c];
    }
    dweight[slot] = dot;
  }
  std::vector<float> drows(rows * C, 0.0f), drowsIn(rows * C, 0.0f);
  exchange.dispatchSlots(*acts.route, dslots.data(), drows.data(), C);
  runExpertsBackward(experts, grads, acts.counts, acts, drows.data(), drowsIn.data(), C);
  // The input gradients back to their slots, then summed into each token.
  exchange.combine(*acts.route, drowsIn.data(), dslots.data(), C);
  for (size_t slot = 0; slot < slots; ++slot) {
    if (routing.row[slot] < 0) continue;
    const float* s = dslots.data() + slot * C;
    float* d = dx + (slot / routing.k) * C;
    for (int c = 0; c < C; ++c) d[c] += s[c];
  }
  moeGateBackward(config, routing, x, gate, dweight.data(), auxScale, dgate, dx, C);
}

}  // namespace gyre::harness
