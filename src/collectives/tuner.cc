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
      return findAlgorithm(OpKind::AllReduce, bytes <= small ? "recursive_doubling" : "ring");
    case OpKind::Broadcast:
      return findAlgorithm(OpKind::Broadcast, bytes <= 4 * small && n > 2 ? "binomial_tree" : "chain");
    case OpKind::Reduce:
      return findAlgorithm(OpKind::Reduce, bytes <= 4 * small && n > 2 ? "binomial_tree" : "chain");
    case OpKind::AllGather:
      return findAlgorithm(OpKind::AllGather, bytes * n <= 4 * small ? "bruck" : "ring");
    case OpKind::ReduceScatter: return findAlgorithm(OpKind::ReduceScatter, "ring");
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
