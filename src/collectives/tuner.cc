#include "collectives/tuner.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace gyre::collectives {

namespace {

// The cost formula of each algorithm the tuner may pick by itself. An
// algorithm missing here would run only when GYRE_ALGO asks for it.
struct Costed {
  OpKind op;
  const char* name;
  CostFn cost;
};

const Costed kCosts[] = {
    {OpKind::AllReduce, "ring", costRingAllReduce},
    {OpKind::AllReduce, "recursive_doubling", costRecursiveDoublingAllReduce},
    {OpKind::AllReduce, "rabenseifner", costRabenseifnerAllReduce},
    {OpKind::AllReduce, "direct", costDirectAllReduce},
    {OpKind::AllReduce, "double_binary_tree", costDoubleTreeAllReduce},
    {OpKind::AllReduce, "hierarchical", costHierarchicalAllReduce},
    {OpKind::Broadcast, "chain", costChainBroadcast},
    {OpKind::Broadcast, "binomial_tree", costTreeBroadcast},
    {OpKind::Broadcast, "direct", costDirectBroadcast},
    {OpKind::Reduce, "chain", costChainReduce},
    {OpKind::Reduce, "binomial_tree", costTreeReduce},
    {OpKind::AllGather, "ring", costRingAllGather},
    {OpKind::AllGather, "bruck", costBruckAllGather},
    {OpKind::AllGather, "direct", costDirectAllGather},
    {OpKind::AllGather, "recursive_doubling", costDoublingAllGather},
    {OpKind::ReduceScatter, "ring", costRingReduceScatter},
    {OpKind::ReduceScatter, "recursive_halving", costHalvingReduceScatter},
    {OpKind::ReduceScatter, "direct", costDirectReduceScatter},
    {OpKind::AllToAll, "pairwise", costPairwiseAllToAll},
    {OpKind::AllToAll, "bruck", costBruckAllToAll},
    {OpKind::AllToAll, "direct", costDirectAllToAll},
    // AllToAllv: none; its choice may not weigh one rank's counts (allToAllvChoice).
    {OpKind::Gather, "linear", costOnlyChoice},
    {OpKind::Scatter, "linear", costOnlyChoice},
    {OpKind::Barrier, "dissemination", costOnlyChoice},
};

// Calls f(algorithm, estimate) for each registered algorithm of the
// shape's operation that has a formula which applies.
template <class F>
void forEachCandidate(const CallShape& shape, const CostModel& model, F&& f) {
  for (const Costed& c : kCosts) {
    if (c.op != shape.op) continue;
    const double us = c.cost(shape, model);
    if (us >= kNotApplicable) continue;
    for (const Algorithm& a : algorithms())
      if (a.op == c.op && std::strcmp(a.name, c.name) == 0) f(a, us);
  }
}

template <class F>
void forEachCandidate(const CallRequest& req, const PlanEnv& env, F&& f) {
  forEachCandidate(callShape(req, env), env.tuning().model, f);
}

// AllToAllv's ranks may send different totals (a mixture of experts'
// imbalance), so a choice from this rank's counts could differ between
// ranks, which then cannot talk. The choice rests on what every rank shares:
// blockwise decides per block, from a size both its ends know
// (alltoallv_blockwise.cc), and is pairwise where peers cannot be read.
const Algorithm* allToAllvChoice(const PlanEnv& env) {
  // Every call with new counts comes here: no search by name.
  static const Algorithm* const blockwise = findAlgorithm(OpKind::AllToAllv, "blockwise");
  static const Algorithm* const pairwise = findAlgorithm(OpKind::AllToAllv, "pairwise");
  return env.readsAreLocal() ? blockwise : pairwise;
}

// For the log (rank 0): blockwise's threshold, and what either way would
// cost at this rank's average block.
std::string describeAllToAllv(const CallRequest& req, const PlanEnv& env) {
  CallShape s = callShape(req, env);
  s.op = OpKind::AllToAll;
  const CostModel& m = env.tuning().model;
  const size_t threshold = env.tuning().blockwiseReadBytes;
  char out[256];
  if (threshold == SIZE_MAX) {
    std::snprintf(out, sizeof out,
                  "every block through the connection; pairwise %.3gus at this rank's average block (%zu bytes)",
                  costPairwiseAllToAll(s, m), s.bytes);
  } else {
    std::snprintf(out, sizeof out,
                  "blocks of %zu bytes and more read, smaller ones through the connection; at this rank's average "
                  "block (%zu bytes) pairwise %.3gus, direct %.3gus",
                  threshold, s.bytes, costPairwiseAllToAll(s, m), costDirectAllToAll(s, m));
  }
  return out;
}

}  // namespace

const Algorithm* findAlgorithm(OpKind op, const char* name) {
  for (const Algorithm& a : algorithms())
    if (a.op == op && std::strcmp(a.name, name) == 0) return &a;
  throwError(gyreInternalError, std::string("no algorithm ") + name + " for " + opKindName(op));
}

CallShape callShape(const CallRequest& req, const PlanEnv& env) {
  size_t bytes = req.bytes();
  if (req.sendCounts) {  // AllToAllv: the average block
    bytes = CallRequest::totalCount(req.sendCounts, env.nranks()) * req.elemSize /
            static_cast<size_t>(env.nranks());
  }
  return callShape(req.desc.kind, bytes, env.nranks(), env.tuning(), env.readsAreLocal());
}

CallShape callShape(OpKind op, size_t bytes, int nranks, const TuningParams& t,
                    bool readsAreLocal) {
  CallShape s;
  s.op = op;
  s.nranks = nranks;
  s.bytes = bytes;
  s.hosts = t.hosts;
  s.perHost = t.perHost;
  s.cores = t.cores;
  s.canRead = readsAreLocal;
  // Only where a read is the whole work: the reducing direct algorithms
  // (AllReduce, ReduceScatter) measured 0.67-0.89x the ring at 16-64 MiB
  // even from mapped buffers (docs/PERFORMANCE-memalloc.md), so they keep
  // the kernel-read price that leaves them to the ring.
  const bool reduces = s.op == OpKind::AllReduce || s.op == OpKind::ReduceScatter || s.op == OpKind::Reduce;
  s.mappedReads = s.canRead && t.mappedBuffers && !reduces;
  s.localChunk = t.localChunk;
  s.networkChunk = t.networkChunk;
  s.pairwisePiece = t.pairwisePiece();
  s.sockets = t.hosts > 1 ? t.networkSockets : t.localSockets;
  return s;
}

namespace {

// GYRE_SMALL_MSG_BYTES, when set, still means what it always did.
bool smallAllReduce(OpKind op, size_t bytes, const TuningParams& t) {
  return op == OpKind::AllReduce && t.smallMessageBytes && bytes <= t.smallMessageBytes;
}

}  // namespace

Candidate modelChoice(const CallShape& shape, const TuningParams& t) {
  if (shape.op == OpKind::AllToAllv)
    throwError(gyreInternalError, "AllToAllv is not chosen by the cost model");
  const bool small = smallAllReduce(shape.op, shape.bytes, t);
  Candidate best{nullptr, kNotApplicable};
  // Ties go to the first registered (the simplest).
  forEachCandidate(shape, t.model, [&](const Algorithm& a, double us) {
    if (small ? std::strcmp(a.name, "recursive_doubling") == 0 : us < best.us)
      best = Candidate{&a, us};
  });
  if (!best.algo)
    throwError(gyreInternalError, std::string("no algorithm for ") + opKindName(shape.op));
  return best;
}

const Algorithm* chooseAlgorithm(const CallRequest& req, PlanEnv& env) {
  if (req.desc.kind == OpKind::AllToAllv) return allToAllvChoice(env);
  if (smallAllReduce(req.desc.kind, req.bytes(), env.tuning()))
    return findAlgorithm(OpKind::AllReduce, "recursive_doubling");
  return modelChoice(callShape(req, env), env.tuning()).algo;
}

std::string describeEstimates(const CallRequest& req, const PlanEnv& env) {
  if (req.desc.kind == OpKind::AllToAllv) return describeAllToAllv(req, env);
  std::string out;
  forEachCandidate(req, env, [&](const Algorithm& a, double us) {
    char item[96];
    std::snprintf(item, sizeof item, "%s%s %.3gus", out.empty() ? "" : ", ", a.name, us);
    out += item;
  });
  return out;
}

std::vector<Candidate> rankedCandidates(const CallRequest& req, const PlanEnv& env) {
  std::vector<Candidate> out;
  forEachCandidate(req, env, [&](const Algorithm& a, double us) { out.push_back(Candidate{&a, us}); });
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.us < b.us; });
  return out;
}

}  // namespace gyre::collectives
