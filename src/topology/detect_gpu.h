// What the NVIDIA driver adds to GPUs found on the PCI bus: compute
// capability and NVLink links (to GPUs and NVSwitches) from NVML, and CUDA
// device numbers from the CUDA runtime. Both libraries are opened with
// dlopen: where they are missing, GPUs keep what PCI said, numbered in bus
// order (CUDA_DEVICE_ORDER=PCI_BUS_ID).
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"

namespace gyre::topology {

// The shared libraries the driver's information comes from, each list tried
// in order (names as dlopen takes them: a soname, or a path). The defaults
// are the driver's and the runtime's sonames. They are a parameter only so
// that tests can name fake libraries (tests/topology/fake_nvml.c,
// fake_cudart.c): the real ones can only describe the machine a test runs
// on, and gyre never links either.
struct DriverLibraries {
  std::vector<std::string> nvml{"libnvidia-ml.so.1"};
  // A toolkit's development link first, then the runtimes by age, newest
  // first: numbering takes the first that answers (one too new for the
  // driver does not), the current device the first found loaded.
  std::vector<std::string> cudart{"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                  "libcudart.so.11.0"};

  static DriverLibraries none() { return {{}, {}}; }
};

// NVML's links and compute capabilities, and CUDA's numbering (bus order
// where no CUDA runtime answers for these GPUs), for the GPUs of `g`.
void addDriverInformation(Graph& g, const DriverLibraries& libs = {});

// Detection's use of it: the driver describes the real machine, so a sysfs
// copy under a test root (`sysRoot` other than "/sys") gets bus order only.
void addNvmlInformation(Graph& g, const std::string& sysRoot);

// The PCI address of the calling thread's current CUDA device, when the
// process has already loaded the CUDA runtime (under one of
// DriverLibraries' default names; never loads it: a CPU program stays one);
// empty otherwise.
std::string currentCudaDeviceBusId();

}  // namespace gyre::topology
