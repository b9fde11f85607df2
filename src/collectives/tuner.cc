#include "collectives/tuner.h"

#include <cstring>

#include "core/error.h"

namespace gyre::collectives {

const Algorithm* findAlgorithm(OpKind op, const char* name) {
  for (const Algorithm& a : algorithms())
    if (a.op == op && std::strcmp(a.name, name) == 0) return &a;
  throwError(gyreInternalError, std::string("no algorithm ") + name + " for " + opKindName(op));
}

const Algorithm* chooseAlgorithm(const CallRequest& req, PlanEnv& env) {
  const size_t bytes = req.bytes();
  const size_t small = env.tuning().smallMessageBytes;
  const int n = env.nranks();
  switch (req.desc.kind) {
    case OpKind::AllReduce:
      // Halving-doubling moves the ring's bytes in log2(n) steps instead of
      // 2(n-1): the better trade until the ring's pipelining wins.
      if (bytes <= small) return findAlgorithm(OpKind::AllReduce, "recursive_doubling");
      return findAlgorithm(OpKind::AllReduce, n > 2 && bytes <= 16 * small ? "rabenseifner" : "ring");
    case OpKind::Broadcast:
      return findAlgorithm(OpKind::Broadcast, bytes <= 4 * small && n > 2 ? "binomial_tree" : "chain");
    case OpKind::Reduce:
      return findAlgorithm(OpKind::Reduce, bytes <= 4 * small && n > 2 ? "binomial_tree" : "chain");
    case OpKind::AllGather:
      // bytes is one rank's block; the result is n times that. (Recursive
      // doubling beat the ring up to 1 MiB on a 16-core host, not on this
      // 2-core one: it stays a GYRE_ALGO choice until a calibrated model.)
      return findAlgorithm(OpKind::AllGather, bytes * n <= 4 * small ? "bruck" : "ring");
    case OpKind::ReduceScatter:
      return findAlgorithm(OpKind::ReduceScatter, bytes * n <= 4 * small ? "recursive_halving" : "ring");
    case OpKind::AllToAll: return findAlgorithm(OpKind::AllToAll, "pairwise");
    case OpKind::AllToAllv: return findAlgorithm(OpKind::AllToAllv, "pairwise");
    case OpKind::Gather: return findAlgorithm(OpKind::Gather, "linear");
    case OpKind::Scatter: return findAlgorithm(OpKind::Scatter, "linear");
    case OpKind::Barrier: return findAlgorithm(OpKind::Barrier, "dissemination");
    case OpKind::SendRecv: break;
  }
  throwError(gyreInternalError, std::string("no algorithm for ") + opKindName(req.desc.kind));
}

}  // namespace gyre::collectives
