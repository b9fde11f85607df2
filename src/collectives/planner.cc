#include "collectives/planner.h"

#include <algorithm>

#include "base/error.h"
#include "base/parse.h"
#include "collectives/allreduce.h"
#include "collectives/alltoall.h"
#include "collectives/compressed.h"
#include "collectives/direct.h"
#include "collectives/gather_family.h"
#include "collectives/more_algorithms.h"
#include "collectives/peer_average.h"
#include "collectives/rooted.h"
#include "collectives/seq_exchange.h"
#include "collectives/steps.h"
#include "collectives/tuner.h"

namespace gyre::collectives {

namespace {

const Algorithm kAlgorithms[] = {
    {OpKind::AllReduce, "ring", buildRingAllReduce},
    {OpKind::AllReduce, "recursive_doubling", buildRecursiveDoublingAllReduce},
    {OpKind::AllReduce, "direct", buildDirectAllReduce},
    {OpKind::AllReduce, "direct_multi", buildDirectMultiAllReduce},
    {OpKind::AllReduce, "rabenseifner", buildRabenseifnerAllReduce},
    {OpKind::AllReduce, "hierarchical", buildHierarchicalAllReduce},
    {OpKind::AllReduce, "double_binary_tree", buildDoubleBinaryTreeAllReduce},
    {OpKind::Broadcast, "chain", buildChainBroadcast},
    {OpKind::Broadcast, "binomial_tree", buildTreeBroadcast},
    {OpKind::Broadcast, "direct", buildDirectBroadcast},
    {OpKind::Reduce, "chain", buildChainReduce},
    {OpKind::Reduce, "binomial_tree", buildTreeReduce},
    {OpKind::Reduce, "direct", buildDirectReduce},
    {OpKind::AllGather, "ring", buildRingAllGather},
    {OpKind::AllGather, "bruck", buildBruckAllGather},
    {OpKind::AllGather, "direct", buildDirectAllGather},
    {OpKind::AllGather, "recursive_doubling", buildRecursiveDoublingAllGather},
    {OpKind::ReduceScatter, "ring", buildRingReduceScatter},
    {OpKind::ReduceScatter, "direct", buildDirectReduceScatter},
    {OpKind::ReduceScatter, "direct_multi", buildDirectMultiReduceScatter},
    {OpKind::ReduceScatter, "recursive_halving", buildRecursiveHalvingReduceScatter},
    {OpKind::AllToAll, "pairwise", buildPairwiseAllToAll},
    {OpKind::AllToAll, "direct", buildDirectAllToAll},
    {OpKind::AllToAll, "bruck", buildBruckAllToAll},
    {OpKind::AllToAllv, "pairwise", buildPairwiseAllToAllv},
    {OpKind::AllToAllv, "direct", buildDirectAllToAllv},
    {OpKind::AllToAllv, "blockwise", buildBlockwiseAllToAllv},
    {OpKind::Gather, "linear", buildLinearGather},
    {OpKind::Gather, "direct", buildDirectGather},
    {OpKind::Scatter, "linear", buildLinearScatter},
    {OpKind::Scatter, "direct", buildDirectScatter},
    {OpKind::Barrier, "dissemination", buildDisseminationBarrier},
};

// One rank: every operation is a local copy (or nothing).
void buildSingleRank(const CallRequest& req, Plan& plan) {
  plan.reset("local");
  size_t from = 0, to = 0, count = req.desc.count;
  if (req.desc.kind == OpKind::Barrier) return;
  if (req.desc.kind == OpKind::AllToAllv) {
    if (req.sendCounts[0] != req.recvCounts[0])
      throwError(gyreInvalidArgument, "alltoallv on one rank: sendcounts[0] (" + std::to_string(req.sendCounts[0]) +
                                          ") differs from recvcounts[0] (" + std::to_string(req.recvCounts[0]) + ")");
    from = req.sendDispls[0];
    to = req.recvDispls[0];
    count = req.sendCounts[0];
  }
  if (count == 0) return;
  Step& s = add(plan, Prim::Copy, BufId::Input, from, BufId::Output, to, count);
  s.finalReduce = true;  // an average over one rank divides by one
}

OpKind parseOp(const std::string& name) {
  for (int k = static_cast<int>(OpKind::AllReduce); k <= static_cast<int>(OpKind::SendRecv); ++k)
    if (name == opKindName(static_cast<OpKind>(k))) return static_cast<OpKind>(k);
  std::string valid;
  for (int k = static_cast<int>(OpKind::AllReduce); k < static_cast<int>(OpKind::SendRecv); ++k)
    valid += (valid.empty() ? "" : ", ") + std::string(opKindName(static_cast<OpKind>(k)));
  throwError(gyreInvalidArgument, "GYRE_ALGO names unknown operation '" + name + "' (valid: " + valid + ")");
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.push_back(trim(s.substr(start, at == std::string::npos ? std::string::npos : at - start)));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

}  // namespace

std::span<const Algorithm> algorithms() { return kAlgorithms; }

std::string algorithmNames(OpKind op) {
  std::string names;
  for (const Algorithm& a : kAlgorithms)
    if (a.op == op) names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

AlgoOverrides::AlgoOverrides(const std::string& spec) {
  for (const std::string& part : split(spec, ';')) {
    if (part.empty()) continue;
    std::string body = part;
    bool anyOp = true;
    OpKind op = OpKind::AllReduce;
    if (size_t colon = part.find(':'); colon != std::string::npos) {
      op = parseOp(trim(part.substr(0, colon)));
      anyOp = false;
      body = part.substr(colon + 1);
    }
    for (const std::string& item : split(body, ',')) {
      std::string name = item;
      size_t lo = 0, hi = SIZE_MAX;
      if (size_t at = item.find('@'); at != std::string::npos) {
        name = trim(item.substr(0, at));
        std::string range = item.substr(at + 1);
        size_t dash = range.find('-');
        if (dash == std::string::npos)
          throwError(gyreInvalidArgument, "GYRE_ALGO: size range '" + range + "' must look like 0-64K or 64K-");
        if (dash > 0) lo = parseSize(trim(range.substr(0, dash)), "GYRE_ALGO size");
        if (dash + 1 < range.size()) hi = parseSize(trim(range.substr(dash + 1)), "GYRE_ALGO size");
        // [lo, hi): a range that holds no size would be a rule that silently never applies.
        if (lo >= hi)
          throwError(gyreInvalidArgument, "GYRE_ALGO: size range '" + trim(range) +
                                              "' is empty (the lower bound must be below the upper; "
                                              "ranges include the lower bound, not the upper)");
      }
      bool matched = false;
      for (const Algorithm& a : kAlgorithms) {
        if (a.name != name || (!anyOp && a.op != op)) continue;
        rules_.push_back(Rule{a.op, &a, lo, hi});
        matched = true;
      }
      if (!matched) {
        std::string valid;
        if (!anyOp) {
          valid = algorithmNames(op);
        } else {
          for (const Algorithm& a : kAlgorithms)
            if (valid.find(a.name) == std::string::npos) valid += (valid.empty() ? "" : ", ") + std::string(a.name);
        }
        throwError(gyreInvalidArgument, "unknown algorithm '" + name + "' in GYRE_ALGO" +
                                            (anyOp ? "" : std::string(" for ") + opKindName(op)) +
                                            "; valid: " + valid);
      }
    }
  }
}

const Algorithm* AlgoOverrides::find(OpKind op, size_t bytes) const {
  for (const Rule& r : rules_)
    if (r.op == op && bytes >= r.lo && bytes < r.hi) return r.algo;
  return nullptr;
}

namespace {

// Rooted operations also pass an empty message to the left neighbour and
// take one from the right. Every message carries its call's tag, root
// included, but a rank that believes itself the root of a Broadcast only
// sends, and ranks that disagree on a Reduce's root can wait on each other
// in a cycle: neither would ever read a wrongly tagged message. Around the
// ring any disagreement has two neighbours that differ, so one of them
// fails this call, naming both roots, and tells the others.
// The send goes first (it never blocks: an empty message); the receive goes
// last, where it costs nothing (the neighbour sent it at its start), unless
// the plan also receives data from that neighbour: messages between two
// ranks arrive in order, so then it must come first.
void addRootCheck(PlanEnv& env, Plan& plan) {
  const int n = env.nranks(), me = env.rank();
  const int left = (me - 1 + n) % n, right = (me + 1) % n;
  bool dataFromRight = false;
  for (const Step& s : plan.steps) dataFromRight |= s.recvPeer == right;
  plan.addPeer(left);
  plan.addPeer(right);
  env.chunkBytes(plan.peers);  // connects them (left and right list each other)
  plan.closeLane();
  const size_t before = plan.steps.size();
  add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, left);
  if (dataFromRight) add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, right);
  const uint32_t front = static_cast<uint32_t>(plan.steps.size() - before);
  std::rotate(plan.steps.begin(), plan.steps.begin() + before, plan.steps.end());  // to the front
  for (Lane& l : plan.lanes) l.begin += front, l.end += front;
  if (dataFromRight) return;
  if (!plan.lanes.empty()) plan.beginLane();  // a lane of its own, beside the others
  add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, right);
  plan.closeLane();
}

bool rooted(OpKind k) {
  return k == OpKind::Broadcast || k == OpKind::Reduce || k == OpKind::Gather || k == OpKind::Scatter;
}

// The call's buffers, in elements, as the API defines them for this rank.
void setExtents(const CallRequest& req, int n, Plan& plan) {
  const size_t count = req.desc.count, all = count * static_cast<size_t>(n);
  size_t in = count, out = count;
  switch (req.desc.kind) {
    case OpKind::AllGather:
    case OpKind::Gather:
    case OpKind::CommSplit:
    case OpKind::CommGrow:
      out = all;
      break;
    case OpKind::ReduceScatter:
    case OpKind::Scatter:
      in = all;
      break;
    case OpKind::AllToAll:
      in = out = all;
      break;
    case OpKind::AllToAllv:
      in = out = 0;
      for (int p = 0; p < n; ++p) {
        in = std::max(in, req.sendDispls[p] + req.sendCounts[p]);
        out = std::max(out, req.recvDispls[p] + req.recvCounts[p]);
      }
      break;
    case OpKind::Barrier:
      in = out = 0;
      break;
    default:
      break;
  }
  plan.inputElems = in;
  plan.outputElems = out;
}

}  // namespace

const char* planCall(const CallRequest& req, PlanEnv& env, const AlgoOverrides& overrides, Plan& plan,
                     bool* forced, const Algorithm* measured) {
  if (forced) *forced = false;
  if (req.desc.kind == OpKind::PeerAverage) {  // one plan: its peers are the call's
    buildPeerAverage(req, env, plan);
    return plan.algorithm;
  }
  if (isSeqExchange(req.desc.kind)) {  // one plan, whatever the rank count (its extents its own)
    buildSeqExchange(req, env, plan);
    return plan.algorithm;
  }
  if (req.desc.codec) {  // one plan for each compressed operation
    buildCompressed(req, env, plan);  // (its extents in bytes)
    return plan.algorithm;
  }
  if (env.nranks() == 1) {
    buildSingleRank(req, plan);
    setExtents(req, 1, plan);
    return plan.algorithm;
  }
  const Algorithm* algo = overrides.find(req.desc.kind, req.bytes());
  if (algo && forced) *forced = true;
  if (!algo) algo = measured ? measured : chooseAlgorithm(req, env);
  // Chains pipeline in the piece size the model finds best.
  CallRequest withPiece = req;
  withPiece.pieceBytes = pipelinePieceBytes(callShape(req, env), env.tuning().model);
  algo->build(withPiece, env, plan);
  setExtents(req, env.nranks(), plan);
  if (rooted(req.desc.kind) && env.tuning().checkRoots) addRootCheck(env, plan);
  return algo->name;
}

}  // namespace gyre::collectives
