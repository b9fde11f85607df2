// Broadcast and Reduce: a pipelined chain (bandwidth: every link carries the
// data once, pieces flowing down the chain at once) and a binomial tree
// (latency: log2(n) rounds).
#pragma once

#include "collectives/planner.h"

namespace gyre::collectives {

void buildChainBroadcast(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildTreeBroadcast(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildChainReduce(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildTreeReduce(const CallRequest& req, PlanEnv& env, Plan& plan);

// The binomial tree rooted at `root`: this rank's parent (-1 at the root) and
// children, farthest subtree first. Ranks, not virtual ranks.
struct BinomialTree {
  int parent = -1;
  int children[32];
  int nchildren = 0;
};
BinomialTree binomialTree(int rank, int nranks, int root);

}  // namespace gyre::collectives
