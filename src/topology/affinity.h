// Placement near the device: each rank's background (progress) thread runs
// on the CPUs of the NUMA node nearest its GPU or NIC, and its shared-memory
// segments are allocated from that node's memory. The communicator sets the
// node once it knows it; GYRE_TOPO_AFFINITY=0 turns all of it off. With one
// NUMA node (or none known) everything here does nothing.
#pragma once

#include <string>
#include <vector>

namespace gyre::topology {

// CPU numbers of an affinity string in NCCL's format: 32-bit hex words,
// most significant first, separated by commas ("ffffffff,0000ffff").
std::vector<int> cpusOfAffinity(const std::string& hex);

bool affinityEnabled();  // GYRE_TOPO_AFFINITY (default on)

// For this process: the node and its CPUs (-1: no preference).
void setPreferredNuma(int numa, const std::vector<int>& cpus);
int preferredNuma();

// Binds the calling thread to the preferred node's CPUs that its current
// mask allows; returns false (and changes nothing) when there is no
// preference, no overlap, or the kernel refuses.
bool bindCurrentThreadToPreferredNuma();

// While alive, pages this thread allocates prefer the preferred node
// (set_mempolicy(MPOL_PREFERRED)); restores the default policy after.
// Failures are ignored: placement is an optimisation.
class ScopedNumaMemoryPolicy {
 public:
  ScopedNumaMemoryPolicy();
  ~ScopedNumaMemoryPolicy();
  ScopedNumaMemoryPolicy(const ScopedNumaMemoryPolicy&) = delete;
  ScopedNumaMemoryPolicy& operator=(const ScopedNumaMemoryPolicy&) = delete;

 private:
  bool active_ = false;
};

}  // namespace gyre::topology
