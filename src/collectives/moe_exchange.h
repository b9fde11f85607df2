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
//   anything; the lane receiving from a peer takes its counts and then, as
//   soon as they are in, that peer's rows (LaneResolver appends the
//   receives), into a staging block per source, which core places once
//   every lane is done. No peer's rows wait for another peer's counts, and
//   nobody waits for a round of counts before the first row leaves.
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

// The pipelined dispatch. Its buffers: Input the packed rows, extra 0 the
// counts going out, extra 1 the counts coming in, extra 2 + q source q's
// staged rows (set by the resolver when q's counts come). Our own counts
// and rows are not in the plan: core copies them.
class MoePipelinedDispatch final : public LaneResolver {
 public:
  MoePipelinedDispatch(MoeRoute& r, size_t hidden, const CallRequest& req, PlanEnv& env, Plan& plan);
  // The buffers the plan's extra ids name (CallArgs::extra).
  void* const* extra() const { return extra_.data(); }
  // Source q's rows, in its order, once the plan has run.
  const void* staged(int q) const { return staging_[static_cast<size_t>(q)].data(); }
  Range resolve(const Step& s) override;

 private:
  MoeRoute& r_;
  Plan& plan_;
  size_t hidden_, elemSize_, chunk_;
  std::vector<std::vector<char>> staging_;
  std::vector<void*> extra_;
};

}  // namespace gyre::collectives
