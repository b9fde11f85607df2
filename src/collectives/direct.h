// Single-copy algorithms for ranks that share a host and may read each
// other's memory (process_vm_readv): each rank reads what it needs straight
// from its peers' buffers, instead of the data passing through a FIFO (two
// copies, both through caches that two far-apart cores do not share).
//
// Every such plan: tell each peer where our buffers are; read; then a last
// exchange of empty messages ("done") so that no rank returns, and lets its
// caller touch its buffers, while a peer may still be reading them.
#pragma once

#include "collectives/planner.h"

namespace gyre::collectives {

// Rank r reduces slice r from every rank's input (in rank order: the same
// bits on every run) into its output, says so, then reads every other
// final slice from its owner's output.
void buildDirectAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildDirectReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan);
// The same, each rank's slice reduced from every rank's data in one pass
// (Prim::ReduceFromAll; AllReduce writes it to every rank's output): the
// plan of direct device calls (docs/gpu.md), on at most
// kernels::kMaxReduceAll ranks. Not priced by the tuner: host calls get it
// only through GYRE_ALGO.
void buildDirectMultiAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildDirectMultiReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildDirectAllGather(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildDirectAllToAll(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildDirectAllToAllv(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildDirectBroadcast(const CallRequest& req, PlanEnv& env, Plan& plan);
// Rank r reduces slice r from every rank's input (as AllReduce's first
// half; a rank other than the root into its scratch), says so, and the
// root reads every slice into its output.
void buildDirectReduce(const CallRequest& req, PlanEnv& env, Plan& plan);
// The root reads each rank's input into its block of the output.
void buildDirectGather(const CallRequest& req, PlanEnv& env, Plan& plan);
// Each rank reads its block of the root's input.
void buildDirectScatter(const CallRequest& req, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
