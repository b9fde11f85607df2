// The automatic choice of algorithm for a call: the cheapest by the cost
// model among the operation's algorithms that have a cost formula.
#pragma once

#include <string>
#include <vector>

#include "collectives/planner.h"

namespace gyre::collectives {

const Algorithm* chooseAlgorithm(const CallRequest& req, PlanEnv& env);
const Algorithm* findAlgorithm(OpKind op, const char* name);
// The model's view of a call.
CallShape callShape(const CallRequest& req, const PlanEnv& env);
// "ring 12.1us, rabenseifner 9.8us" for the log: every candidate's estimate.
std::string describeEstimates(const CallRequest& req, const PlanEnv& env);

// An algorithm the tuner may pick and the model's estimate for the call.
struct Candidate {
  const Algorithm* algo;
  double us;
};
// Every algorithm with a formula that applies to the call, cheapest first
// (ties: the first registered).
std::vector<Candidate> rankedCandidates(const CallRequest& req, const PlanEnv& env);

}  // namespace gyre::collectives
