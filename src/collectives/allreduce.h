// AllReduce algorithms. Each "append" function adds its steps to a plan over
// a group of ranks, between buffer regions, so that bigger algorithms can
// be built from them; the "build" functions make a whole call's plan.
#pragma once

#include "collectives/group.h"
#include "collectives/planner.h"

namespace gyre::collectives {

// Ring: reduce-scatter then all-gather around the group, pipelined in pieces
// of at most chunkElems. Each piece's reduction runs once, in ring order,
// and is then copied to every rank: bitwise-identical results everywhere.
// Reads src (from srcOffset), writes dst (from dstOffset).
void appendRingAllReduce(Plan& plan, const Group& g, size_t count, size_t chunkElems, size_t elemSize,
                         BufId src, size_t srcOffset, BufId dst, size_t dstOffset);

// Recursive doubling (latency-bound sizes): log2(n) exchanges of the whole
// vector; ranks beyond the largest power of two fold into a partner first.
// Each pair reduces with the lower rank's data on the left, so both get the
// same bits.
void appendRecursiveDoublingAllReduce(Plan& plan, const Group& g, size_t count, size_t chunkElems, BufId src,
                                      size_t srcOffset, BufId dst, size_t dstOffset);

// The partners of appendRecursiveDoublingAllReduce (at most 32); returns how many.
int recursiveDoublingPeers(const Group& g, int* out);

// Double binary tree (NCCL's): half the vector is reduced up one binary
// tree and broadcast back down it, the other half over a second tree whose
// interior ranks are the first one's leaves; pipelined in pieces. Each
// piece is reduced once, at its tree's root, and copied down:
// bitwise-identical results everywhere. The trees are the topology's
// (src/topology/tree_shape.h: per host and across hosts).
void buildDoubleBinaryTreeAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan);

void buildRingAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan);
void buildRecursiveDoublingAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan);
// Reduce within each host, ring across the hosts' leaders, broadcast back.
void buildHierarchicalAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
