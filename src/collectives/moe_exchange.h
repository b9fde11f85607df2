// Mixture-of-experts exchanges (docs/moe.md): the plans that move a
// routing's counts and rows (moe_route.h). Lanes as pairwise AllToAll's:
// one per peer each way, so a slow peer holds up only its own lanes.
//
// Three plans:
// - counts: each rank sends every peer, for each of that peer's experts,
//   the rows it keeps for it and the slots it dropped (uint64 pairs);
// - rows with known counts: dispatch sends each (destination, expert)
//   block from the packed rows and receives each (expert, source) block in
//   its place in the output; combine the reverse, into the packed order;
// - dispatch with the counts unknown (pipelined): to each peer its counts
//   and then, on the same ordered connection, its rows, without waiting for
//   anything. A lane receiving from a peer takes its counts, then waits
//   until every peer's counts are in (they left first, so this costs one
//   message's latency, not a round), and then (LaneResolver) receives that
//   peer's rows straight into their places in the output. An output too
//   small for what comes is found then: the rows go to staging instead,
//   and core fails the call on this rank only. No sender waits for
//   anything, so the rows are on their way while the counts arrive.
#pragma once

#include <vector>

#include "collectives/moe_route.h"
#include "collectives/planner.h"

namespace gyre::collectives {

// Input countsOut, Output countsIn (uint64 elements; CallArgs::elemSize 8).
void buildMoeCounts(const MoeRoute& r, PlanEnv& env, Plan& plan);

// Rows of `hidden` elements of req.elemSize. Dispatch: Input the packed
// rows, Output the expert-grouped rows. Combine: Input the expert-grouped
// rows, Output the packed rows.
void buildMoeRows(const MoeRoute& r, bool dispatch, size_t hidden, const CallRequest& req, PlanEnv& env,
                  Plan& plan);

// The pipelined dispatch. Its buffers: Input the packed rows, Output the
// caller's (outputRows rows), extra 0 the counts going out, extra 1 the
// counts coming in, extra 2 + q source q's staged rows (only when the
// output is too small; staging is the caller's, kept between calls). Our
// own counts must be in countsIn before it runs, and our own rows are not
// in the plan: core copies them.
class MoePipelinedDispatch final : public LaneResolver {
 public:
  MoePipelinedDispatch(MoeRoute& r, size_t hidden, size_t outputRows, const CallRequest& req, PlanEnv& env,
                       Plan& plan, std::vector<std::vector<char>>& staging);
  // The buffers the plan's extra ids name (CallArgs::extra).
  void* const* extra() const { return extra_.data(); }
  // Whether the rows went to the output (else to staging: it was too small).
  bool direct() const { return direct_; }
  // Source q's rows, in its order, once the plan has run (not direct).
  const void* staged(int q) const { return staging_[static_cast<size_t>(q)].data(); }
  Range resolve(const Step& s) override;

 private:
  MoeRoute& r_;
  Plan& plan_;
  size_t hidden_, elemSize_, chunk_, outputRows_;
  std::vector<std::vector<char>>& staging_;
  std::vector<void*> extra_;
  std::vector<bool> arrived_;
  size_t waiting_ = 0;  // peers whose counts have not come
  bool settled_ = false, direct_ = true;
};

}  // namespace gyre::collectives
