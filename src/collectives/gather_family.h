// AllGather, ReduceScatter, Gather and Scatter: blocks of `count` elements,
// one per rank, in rank order.
#pragma once

#include "collectives/planner.h"

namespace gyre::collectives {

// Ring: n-1 steps, every link carrying (n-1)/n of the data; pipelined.
void buildRingAllGather(const CallRequest& req, PlanEnv& env, Plan& plan);
// Bruck: ceil(log2 n) rounds doubling what each rank holds, any rank count;
// for small blocks. Works in scratch, rotated into place at the end.
void buildBruckAllGather(const CallRequest& req, PlanEnv& env, Plan& plan);
// Ring: the reduce-scatter half of the ring AllReduce.
void buildRingReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan);
// Direct: the root exchanges with every rank at once (one lane per peer).
void buildLinearGather(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildLinearScatter(const CallRequest& req, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
