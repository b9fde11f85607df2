// One collective call on a simulated cluster: gyre's planner chooses the
// algorithm and builds every rank's plan as it would on that cluster (the
// tuner priced with the cluster's own links), and the plans run on it.
#pragma once

#include <string>

#include "collectives/planner.h"
#include "sim/cluster.h"
#include "sim/plan_runner.h"

namespace gyre::sim {

struct CallResult {
  std::string algorithm;  // rank 0's plan's
  RunResult run;
};

// The tuner's numbers for a cluster: its links as the cost model's local and
// network links, its reduction rate, its hosts.
collectives::TuningParams tuningFor(const ClusterSpec& spec);

// req: the call as every rank makes it (AllToAllv's counts are not
// simulated here). algo: a GYRE_ALGO-style override ("" for the tuner's
// choice). Throws Error naming what cannot be simulated.
CallResult simulateCall(const ClusterSpec& spec, const collectives::CallRequest& req, const std::string& algo = "");

}  // namespace gyre::sim
