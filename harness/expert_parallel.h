// Expert parallelism over gyre: the exchanges of a mixture-of-experts layer
// (moe.h's ExpertExchange) made of the C ABI's dispatch and combine
// (docs/moe.md), over the ranks that hold the experts between them
// (Mesh::ep()). The layer routes its own tokens (gate, top-k, capacity)
// and tells this class only where each kept slot goes; gyre's routing then
// serves the forward's dispatch and combine and the backward's two
// exchanges (docs/harness.md, "Expert parallelism").
#pragma once

#include <memory>
#include <vector>

#include "gyre/gyre.h"
#include "harness/moe.h"

namespace gyre::harness {

class GyreExpertExchange : public ExpertExchange {
 public:
  // comm: the expert-parallel ranks (not owned), which hold experts
  // experts / ranks each, in rank order (gyre's default expert map).
  // seconds, if not null, has the time spent in the exchanges added to it.
  // Throws GyreError when comm cannot say its rank, std::invalid_argument
  // when the experts do not split evenly over its ranks.
  GyreExpertExchange(gyreComm_t comm, int experts, int topK, double* seconds = nullptr);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Collective over comm. Every rank routes the same number of tokens
  // (each data-parallel rank's batch is the same size), so the most rows
  // that can arrive is known and the counts travel just ahead of the rows
  // in one call.
  std::shared_ptr<Route> dispatch(const MoeRouting& routing, const float* x, int C,
                                  std::vector<float>& rows, std::vector<int>& counts) override;
  void combine(Route& route, const float* rows, float* slots, int C) override;
  void dispatchSlots(Route& route, const float* slots, float* rows, int C) override;

 private:
  gyreComm_t comm_;
  int rank_ = 0, size_ = 1, experts_ = 0, topK_ = 0;
  double* seconds_ = nullptr;
};

}  // namespace gyre::harness
