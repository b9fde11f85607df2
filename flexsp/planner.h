// The FlexSP planner (arXiv 2412.01523; docs/sequence-parallel.md, "FlexSP
// planner"): for one step's batch, sequence-parallel groups of power-of-two
// sizes covering the world and the sequences each runs, minimising the
// slowest group's time. A caller of gyre's C ABI like the harness: policy
// for a training step, not a collective (docs/design.md).
//
//   flexsp::Problem problem{lengths, world, memoryTokens};
//   flexsp::UlyssesTime time(model, worldComm);        // time_model.h
//   flexsp::Plan plan = flexsp::planBatch(problem, time.function());
//   gyreComm_t mine = groupComms.forPlan(plan);          // group_comms.h
#pragma once

#include <functional>
#include <string>

#include "flexsp/plan.h"

namespace gyre::flexsp {

struct PlanOptions {
  // The solver's budget; 0 plans greedily without it.
  double timeLimitSeconds = 1.0;
  // Buckets of sequence lengths in the MIP (bucketing.h): more is closer to
  // the batch and slower to solve.
  int buckets = 16;
  // false: the greedy plan alone, as where no solver was built in.
  bool useSolver = true;
  // Where the planner says how it planned (one line a batch). Empty: stderr,
  // as gyre's own log: fallbacks and time limits at WARN (shown unless
  // GYRE_DEBUG=NONE), the rest at GYRE_DEBUG=INFO.
  std::function<void(bool warning, const std::string& line)> log;
};

// Throws PlanError when the batch cannot be held: a sequence longer than
// the largest group's memory, all of it beyond the world's (then split the
// batch into micro-batches), or a world or largest group that is not a
// power of two.
Plan planBatch(const Problem& problem, const SequenceTime& time, const PlanOptions& options = {});

// Fixed Ulysses: one group of the whole world running every sequence (the
// baseline the planner is measured against).
Plan ulyssesPlan(const Problem& problem, const SequenceTime& time);

// "GLPK 5.0", or "" where the planner was built without a solver.
std::string plannerSolver();

}  // namespace gyre::flexsp
