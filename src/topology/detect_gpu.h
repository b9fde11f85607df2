// What the NVIDIA driver adds to GPUs found on the PCI bus: compute
// capability and NVLink links (to GPUs and NVSwitches) from NVML, and CUDA
// device numbers from the CUDA runtime. Both libraries are opened with
// dlopen: where they are missing, GPUs keep what PCI said, numbered in bus
// order (CUDA_DEVICE_ORDER=PCI_BUS_ID).
#pragma once

#include <string>

#include "topology/graph.h"

namespace gyre::topology {

void addNvmlInformation(Graph& g, const std::string& sysRoot);

}  // namespace gyre::topology

namespace gyre::topology {

// The PCI address of the calling thread's current CUDA device, when the
// process has already loaded the CUDA runtime (never loads it: a CPU
// program stays one); empty otherwise.
std::string currentCudaDeviceBusId();

}  // namespace gyre::topology
