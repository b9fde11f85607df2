// AllToAll(v) and Barrier.
#pragma once

#include "collectives/planner.h"

namespace gyre::collectives {

// Pairwise exchange: at step k each rank sends to rank + k and receives from
// rank - k, so no rank is everyone's target at once. Sends and receives run
// as two lanes, each in that order; the slowest lane can always go on, so no
// mix of speeds deadlocks. In place: the input is first saved in scratch.
void buildPairwiseAllToAll(const CallRequest& req, PlanEnv& env, Plan& plan);
// The same with per-peer counts and displacements. An empty block still
// travels as an empty message, so that mismatched counts are reported.
void buildPairwiseAllToAllv(const CallRequest& req, PlanEnv& env, Plan& plan);
// Pairwise's rounds, but each block travels the way its own size favours:
// read straight from the sender's buffer (as direct does) from the cost
// model's single-copy threshold up, through the connection below it. Both
// ends of a block know its size, so they agree without asking, and every
// rank runs this same algorithm whatever it sends (alltoallv_blockwise.cc).
void buildBlockwiseAllToAllv(const CallRequest& req, PlanEnv& env, Plan& plan);
// Blockwise's threshold for this communicator (blockwiseReadThreshold for
// its shape and model): computed once, when the model is set, into
// TuningParams::blockwiseReadBytes; a scan of the model that would cost
// every AllToAllv call whose arrays differ from the last one's (its plan is
// reused only for identical arrays) half a microsecond.
size_t blockwiseThresholdOf(const PlanEnv& env);
// GYRE_DEBUG=INFO, from rank 0: what blockwise does on this communicator.
void logBlockwiseThreshold(const PlanEnv& env);
// Dissemination: ceil(log2 n) rounds of empty messages to rank + 2^k.
void buildDisseminationBarrier(const CallRequest& req, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
