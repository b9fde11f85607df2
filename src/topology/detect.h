// Discovery of this host's topology: CPUs and NUMA nodes (hwloc where gyre
// was built with it, sysfs otherwise), the PCI tree and NICs from sysfs,
// GPUs from their PCI class and, where the driver is installed, NVML and
// the CUDA runtime, both opened with dlopen so that nothing requires them.
#pragma once

#include <string>

#include "topology/graph.h"

namespace gyre::topology {

// Reads sysfs under `sysRoot` ("/sys" normally; tests may point elsewhere).
Graph detectTopology(const std::string& sysRoot = "/sys");

// The topology gyre uses: GYRE_TOPO_FILE if set, else detected; written to
// GYRE_TOPO_DUMP_FILE when that is set (`dump`: whether this caller writes
// it, so that one rank per host does). Throws TopologyError for a bad file.
Graph systemTopology(bool dump);

// The NUMA node whose CPUs this process's affinity mask lies in mostly (0
// when unknown).
int currentNuma(const Graph& g);

}  // namespace gyre::topology
