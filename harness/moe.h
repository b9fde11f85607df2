// A mixture-of-experts MLP (GShard / Switch style), the layer the harness's
// expert parallelism is built on: a linear gate and softmax over E experts,
// each token sent to its top-k experts (k = 2 by default) with the gate's
// probabilities renormalized over those k as weights, each expert a GELU MLP
// of its own (C -> 4C -> C), and the outputs summed by those weights. An
// expert takes at most `capacity` tokens of a batch; the rest of its slots
// are dropped (the token keeps only the residual stream's path for that
// slot) and counted. A load-balancing loss pushes the gate towards using the
// experts evenly.
//
// The layer runs in phases so that expert parallelism can put its exchanges
// between them (docs/moe.md): route (gate, top-k, capacity), pack (each
// expert's rows, in priority order), the experts, and combine. On one rank
// the rows go straight from pack to the experts and back.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace gyre::harness {

struct MoeConfig {
  int experts = 4;  // E
  int topK = 2;     // k, 1..E
  // The most slots one expert takes per batch: capacityFactor x N x k / E,
  // rounded up; 0: no limit. Slots beyond it are dropped: all first choices
  // before any second one, each in token order (GShard's priority).
  float capacityFactor = 0.0f;
  // Weight of the load-balancing loss: auxCoef x E x sum_e f_e x P_e, with
  // f_e the share of the batch's slots whose choice is e (before capacity)
  // and P_e the mean gate probability of e. 1 when the use is even.
  float auxCoef = 0.01f;
};

// One expert's parameters: fc [4C, C] and its bias, proj [C, 4C] and its bias.
struct ExpertParams {
  const float *fcw, *fcb, *projw, *projb;
};
struct ExpertGrads {
  float *fcw, *fcb, *projw, *projb;
};

// Views of E experts stacked as the layout stacks them (layout.h): fc
// [E x 4C, C] and its bias [E x 4C], proj [E x C, 4C] and its bias
// [E x C], expert e's rows the e-th block of each. P is ExpertParams over
// const float, ExpertGrads over float.
template <typename P, typename F>
std::vector<P> expertViews(F* fcw, F* fcb, F* projw, F* projb, int E, int C) {
  std::vector<P> out;
  const size_t H = 4 * static_cast<size_t>(C), c = static_cast<size_t>(C);
  for (size_t e = 0; e < static_cast<size_t>(E); ++e)
    out.push_back({fcw + e * H * c, fcb + e * H, projw + e * c * H, projb + e * c});
  return out;
}

// Where every (token, slot) of a batch goes.
struct MoeRouting {
  int N = 0, k = 0, E = 0;
  std::vector<float> probs;    // [N, E] the gate's softmax
  std::vector<int> choice;     // [N, k] the chosen experts, best first
  std::vector<float> weight;   // [N, k] probs of the choices over their sum
  std::vector<int> row;        // [N, k] the slot's row in the packed batch, -1 when dropped
  std::vector<int> rowSlot;    // [rows] token x k + slot of each packed row
  std::vector<int> expertRow;  // [E + 1] expert e's rows are [expertRow[e], expertRow[e + 1])
  std::vector<int> dropped;    // [E] slots each expert dropped
  std::vector<float> fraction; // [E] f_e: share of the slots choosing e
  double auxLoss = 0;          // the load-balancing loss, auxCoef included
  int rows() const { return expertRow.empty() ? 0 : expertRow.back(); }
};

// The gate on x [N, C] with gate [E, C] (no bias): probabilities, top-k,
// weights, capacity and the packed order of the kept slots.
MoeRouting moeRoute(const MoeConfig& config, const float* x, const float* gate, int N, int C);

// The packed rows: rows() x C, row r = x[token of r].
void moePack(const MoeRouting& routing, const float* x, float* rows, int C);

// Expert parallelism: the experts live on `size()` ranks, rank r holding
// experts [r x E/size, (r + 1) x E/size), and a token's rows travel to them
// and back between the layer's phases. This interface is those journeys;
// harness/expert_parallel.h makes them gyre's dispatch and combine, so the
// layer itself never talks to another rank.
class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  // What one forward's dispatch leaves for its combine and for the
  // backward's two exchanges (the same route, as docs/moe.md says).
  struct Route {
    virtual ~Route() = default;
  };
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Each kept slot's row of x [N, C] to its expert's rank. rows gets what
  // this rank's experts received, [sum(counts), C]: local expert by local
  // expert, within one by source rank, within a source in its priority
  // order; counts each local expert's rows.
  virtual std::shared_ptr<Route> dispatch(const MoeRouting& routing, const float* x, int C,
                                          std::vector<float>& rows, std::vector<int>& counts) = 0;
  // Rows [received, C] (what dispatch gave, transformed) back to the slots
  // they came from: slots [N x k, C], zero where a slot was dropped.
  virtual void combine(Route& route, const float* rows, float* slots, int C) = 0;
  // The reverse of combine, for backward: each slot's row of slots [N x k, C]
  // to where dispatch put it: rows [received, C].
  virtual void dispatchSlots(Route& route, const float* slots, float* rows, int C) = 0;
};

// What the experts keep for their backward: per packed row (with expert
// parallelism, per row this rank's experts received).
struct ExpertActivations {
  std::vector<float> in, fc, gelu, out;  // [rows, C], [rows, 4C], [rows, 4C], [rows, C]
  // Expert parallelism only: the route, each local expert's rows, and each
  // slot's output back at its token [N x k, C] (the gate's gradient needs it).
  std::shared_ptr<ExpertExchange::Route> route;
  std::vector<int> counts;
  std::vector<float> slotOut;
};

// Runs expert e's MLP over its `count` rows starting at in (C wide) into out.
void expertForward(const ExpertParams& p, const float* in, float* fc, float* gelu, float* out,
                   int count, int C);
// Adds the expert's parameter gradients and writes din [count, C] from dout.
void expertBackward(const ExpertParams& p, const ExpertGrads& g, const float* in, const float* fc,
                    const float* gelu, const float* dout, float* din, int count, int C);

// out [N, C] = sum over kept slots of weight x that slot's row of rowsOut, in
// slot order (dropped slots add nothing).
void moeCombine(const MoeRouting& routing, const float* rowsOut, float* out, int C);

// The layer on one rank: route, pack, every expert, combine. experts[e] are
// expert e's parameters.
void moeForward(const MoeConfig& config, const float* x, const float* gate,
                const std::vector<ExpertParams>& experts, float* out, int N, int C,
                MoeRouting& routing, ExpertActivations& acts);

// Backward through combine: each packed row's output gradient (weight x
// dout of its token) into drows [rows, C], and the gradient of each slot's
// weight (dout . that row's output) into dweight [N, k] (0 when dropped).
void moeCombineBackward(const MoeRouting& routing, const float* rowsOut, const float* dout,
                        float* drows, float* dweight, int C);
// Backward through the gate: from dweight and the load-balancing loss
// (scaled by auxScale) to the gate's gradient (added into dgate [E, C]) and
// x's (added into dx [N, C]).
void moeGateBackward(const MoeConfig& config, const MoeRouting& routing, const float* x,
                     const float* gate, const float* dweight, float auxScale, float* dgate,
                     float* dx, int C);
// Adds each packed row's input gradient to its token's in dx, in row order.
void moeUnpackAdd(const MoeRouting& routing, const float* drowsIn, float* dx, int C);

// The whole layer's backward on one rank: adds into dx [N, C], dgate and
// every expert's gradients.
void moeBackward(const MoeConfig& config, const float* x, const float* gate,
                 const std::vector<ExpertParams>& experts, const std::vector<ExpertGrads>& grads,
                 const MoeRouting& routing, const ExpertActivations& acts, const float* dout,
                 float auxScale, float* dgate, float* dx, int C);

// The layer with expert parallelism: this rank routes its own N tokens
// (the capacity is per expert and per source rank, as on one rank: each
// rank's batch is its own), its rows go to their experts' ranks, this
// rank's experts (experts: the local ones, config.experts / exchange.size()
// of them) run on what they received, and the outputs come back to be
// weighted and summed. Collective over the exchange's ranks.
void moeForward(const MoeConfig& config, ExpertExchange& exchange, const float* x,
                const float* gate, const std::vector<ExpertParams>& experts, float* out, int N,
                int C, MoeRouting& routing, ExpertActivations& acts);
// Its backward, the same exchanges reversed: each slot's output gradient to
// its expert's rank, the local experts' backward there (their gradients
// from every source rank's tokens), the input gradients back; adds into dx,
// dgate and the local experts' gradients. Collective likewise.
void moeBackward(const MoeConfig& config, ExpertExchange& exchange, const float* x,
                 const float* gate, const std::vector<ExpertParams>& experts,
                 const std::vector<ExpertGrads>& grads, const MoeRouting& routing,
                 const ExpertActivations& acts, const float* dout, float auxScale, float* dgate,
                 float* dx, int C);

}  // namespace gyre::harness
