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
  RunResult run;          // run.aggregation: how many ranks stood for all, if a symmetry was used
  std::vector<double> linkBytes;  // by the cluster's link index: the bytes each carried
};

// The tuner's numbers for a cluster: its links as the cost model's local and
// network links, its reduction rate, its hosts.
collectives::TuningParams tuningFor(const ClusterSpec& spec);

// Hosts like the one a cost model was measured on (GYRE_TUNER_DUMP_FILE's
// format): its local link as each rank's port, its network link as a NIC
// per rank (a TCP stream each), its reduction rate for copies and
// reductions, its latencies as the paths' (no step overhead beside them).
void useCostModel(const collectives::CostModel& model, ClusterSpec& spec);

// req: the call as every rank makes it (AllToAllv's counts are not
// simulated here). algo: a GYRE_ALGO-style override ("" for the tuner's
// choice). model: the tuner's cost model, as a communicator would have it
// (a file's, the built-in one); null: tuningFor(spec)'s. Throws Error
// naming what cannot be simulated.
// record: keep every step's times (CallResult::run.steps, chromeTrace); a
// trace wants every rank, so it is a full simulation.
// aggregate: where the cluster has a symmetry (clusterSymmetries) that every
// plan keeps (planIsImage: checked on every rank up to 512 ranks, on a
// sample of ranks and elements above), simulate one representative per
// orbit (sim/symmetry.h); the times, messages and link bytes are the full
// run's. Otherwise, or with aggregate false, every rank is simulated.
CallResult simulateCall(const ClusterSpec& spec, const collectives::CallRequest& req, const std::string& algo = "",
                        const collectives::CostModel* model = nullptr, bool record = false, bool aggregate = true);

}  // namespace gyre::sim
