// The automatic choice of algorithm for a call.
#pragma once

#include "collectives/planner.h"

namespace gyre::collectives {

const Algorithm* chooseAlgorithm(const CallRequest& req, PlanEnv& env);
const Algorithm* findAlgorithm(OpKind op, const char* name);

}  // namespace gyre::collectives
