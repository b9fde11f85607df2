// Which processes share a host (and so can share memory). Two processes are
// on one host when they share the kernel (boot id), the host name and the
// network namespace: ranks in separate network namespaces are treated as
// separate hosts, which is how tests stand in for several machines.
#pragma once

#include <cstdint>
#include <string>

namespace gyre::topology {

struct HostIdentity {
  uint64_t hash = 0;
  std::string description;  // what went into it, for logs
};

// `override` (GYRE_HOSTID) replaces the detected identity when non-empty.
HostIdentity detectHostIdentity(const std::string& override);

// CPUs this process may run on (its affinity mask).
int availableCpus();

// The affinity mask as bits (CPU i at bit i % 64 of word i / 64; CPUs past
// 64 * kCpuMaskWords are left out). Ranks of a host pinned to different
// cores have one CPU each but are not crowded: the union of their masks
// says how many cores they share.
constexpr int kCpuMaskWords = 16;
void cpuMask(uint64_t (&mask)[kCpuMaskWords]);

std::string hostName();

}  // namespace gyre::topology
