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
  switch (req.desc.kind) {
    case OpKind::AllReduce: {
      static const Algorithm* ring = findAlgorithm(OpKind::AllReduce, "ring");
      static const Algorithm* rd = findAlgorithm(OpKind::AllReduce, "recursive_doubling");
      return req.bytes() <= env.tuning().smallMessageBytes ? rd : ring;
    }
    default:
      throwError(gyreInternalError, std::string("no algorithm for ") + opKindName(req.desc.kind));
  }
}

}  // namespace gyre::collectives
