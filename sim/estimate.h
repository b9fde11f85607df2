// What gyreEstimate and gyreGroupSimulateEnd answer (docs/simulator.md, "One
// model, three callers"): the call's own plans, with the algorithm the tuner
// chose, simulated on hosts like the communicator's. gyre-sim runs the same
// simulation; FlexSP's planner reaches it through gyreEstimate.
#pragma once

#include <cstddef>

#include "collectives/planner.h"
#include "sim/cluster.h"

namespace gyre::sim {

// Hosts for `ranks` ranks placed as a communicator with tuning t places its
// own: consecutive, as many to a host as its busiest host has, or the
// largest divisor of `ranks` below that (simulated hosts are alike); each
// host's links and rates those of t's cost model (useCostModel). peerReads:
// ranks of one host read each other's memory (the single-copy algorithms).
ClusterSpec clusterLike(const collectives::TuningParams& t, int ranks, bool peerReads);

// Seconds of a call of `count` elements of elemSize bytes (count as the
// API takes it; rooted calls at rank 0) over those hosts, with `algo`
// (an algorithm of op, by name). Throws Error where it cannot be simulated.
double estimateSeconds(const collectives::TuningParams& t, collectives::OpKind op, size_t count, size_t elemSize,
                       int ranks, bool peerReads, const char* algo);

}  // namespace gyre::sim
