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
// Of a call of `bytes` (the count in bytes, as CallShape::bytes) over
// nranks ranks laid out as t says (hosts, ranks per host, cores, links):
// what a group that does not exist yet would see (gyreEstimate).
CallShape callShape(OpKind op, size_t bytes, int nranks, const TuningParams& t, bool readsAreLocal);
// "ring 12.1us, rabenseifner 9.8us" for the log: every candidate's estimate.
std::string describeEstimates(const CallRequest& req, const PlanEnv& env);

// An algorithm the tuner may pick and the model's estimate for the call.
struct Candidate {
  const Algorithm* algo;
  double us;
};
// The algorithm chooseAlgorithm takes for a call of this shape (the
// cheapest by the model, or GYRE_SMALL_MSG_BYTES's recursive doubling) and
// the model's estimate for it. Not for AllToAllv, whose choice the model
// does not make.
Candidate modelChoice(const CallShape& shape, const TuningParams& t);

// Every algorithm with a formula that applies to the call, cheapest first
// (ties: the first registered).
std::vector<Candidate> rankedCandidates(const CallRequest& req, const PlanEnv& env);

}  // namespace gyre::collectives
