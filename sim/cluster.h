// A simulated cluster: hosts of ranks (GPUs or CPU processes), each rank's
// port into its host's fabric (NVLink to an NVSwitch, or shared memory), NICs
// (one per rank, rail-style, or shared by a host's ranks), and a two-level
// network: hosts under leaf switches, leaves joined through a spine whose
// uplinks may be oversubscribed. Every port is two links, one each way, so
// a rank sending and receiving at once uses both at full speed.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "sim/flow_network.h"
#include "sim/plan_runner.h"

namespace gyre::sim {

struct ClusterSpec {
  int hosts = 1;
  int ranksPerHost = 8;
  // Within a host: each rank's port into the host's switch.
  double intraBytesPerSecond = 450e9;  // NVLink 4 on an H100: 450 GB/s each way
  double intraLatency = 1e-6;          // each way through the switch, seconds
  // What all of a host's transfers share, bytes per second; 0: nothing
  // beyond the ports. Where ranks are processes, each transfer is copies by
  // CPUs through one memory (two ranks sending to each other at once get
  // half the rate one alone gets); ranks sharing one GPU share its HBM.
  double hostMemoryBytesPerSecond = 0;
  // NICs: nicsPerHost of them (ranksPerHost: one per rank; 1: shared).
  int nicsPerHost = 8;
  double nicBytesPerSecond = 50e9;  // 400 Gbit/s
  double nicLatency = 2e-6;         // the NIC and its cable, each end
  // The network: hostsPerLeaf hosts under each leaf switch; a leaf's uplinks
  // carry its NICs' bandwidth divided by the oversubscription.
  int hostsPerLeaf = 32;
  double oversubscription = 1.0;
  double switchLatency = 0.5e-6;
  // Local work on every rank.
  double copyBytesPerSecond = 1.5e12;
  double reduceBytesPerSecond = 1.5e12;
  double stepOverhead = 2e-6;  // the executor's and the transport's software per step
  // Ranks of one host read each other's memory (CUDA IPC, or the kernel's
  // cross-process reads): the single-copy algorithms can run there.
  bool peerReads = true;
  // A host's last-level cache, for ranks that are processes: a call whose
  // working set (every rank of the host's input and output, and the FIFO
  // slots its messages within the host write) fits in
  // cacheBytes copies, moves and reduces within the host cacheSpeedup times
  // faster than the rates above, which are out-of-cache rates; one that
  // does not gets that speed for the share of its bytes that fits
  // (inCache). 0: no cache modelled.
  double cacheBytes = 0;
  double cacheSpeedup = 1;
  // Where cores are modelled and a core runs more than one rank: the
  // speed-up they get instead (0: cacheSpeedup). Ranks that take turns on
  // a core share its own caches, and each hand-over leaves the next rank
  // less of its data there: a 2 MiB sendrecv against 64 MiB gains 3.6x on
  // two CPUs and 2.7x with both ranks on one (the dev VM).
  double sharedCoreCacheSpeedup = 0;
  // What each rank of a host keeps in the cache beside the buffers and
  // FIFOs a call touches (its process's stack, plans, connection state and
  // the library's own memory), added to a call's working set per rank of
  // the host (0: none).
  double cacheBytesPerRank = 0;
  // Where a host's ranks talk through FIFOs of slots (shared memory between
  // processes): the slot's bytes (0: no FIFOs; NVLink's stores land in the
  // receiver's memory) and the slots per FIFO. A message is copied into a
  // slot by its sender and out of it by its receiver (or reduced from it),
  // one after the other for each slot, so a plain receive ends one slot's
  // copy after the last byte went in (the pipeline's fill: a message of one
  // slot takes twice a copy's time, a long one its copies' rate). The slots
  // also cut the planner's pieces as the transport's do (the chunk, and
  // pairwise AllToAll's FIFO budget).
  double fifoSlotBytes = 0;
  int fifoSlots = 8;
  // Where ranks are processes, the CPUs that run them: coresPerHost cores a
  // host (0: not modelled, each rank's work is its own, as a GPU's is), rank
  // r on core r % coresPerHost of its host (gyrerun --bind core). A core is
  // one resource that all of its ranks' work shares: its ranks' copies into
  // FIFOs (coreBytesPerSecond, 0: the copy rate) and out of them
  // (coreReadBytesPerSecond, 0: the same; what another core wrote comes
  // slower than a rank's own memory), their own copies and their
  // reductions (copyBytesPerSecond, reduceBytesPerSecond), one lane's after
  // another's where a rank's lanes all want it. Each byte of a message
  // within the host is copied in on its sender's core and out (or reduced)
  // on its receiver's, so two ranks sending to each other at once each get
  // half of what one alone gets, and a reduction slows the copies beside it.
  int coresPerHost = 0;
  double coreBytesPerSecond = 0;
  double coreReadBytesPerSecond = 0;
  // Where a core runs more than one rank: what it costs the core to hand
  // itself to a rank that had to wait for a message (a yield and a context
  // switch), seconds; the kernel runs one rank at a time, not a share of
  // each.
  double coreSwitchSeconds = 0;
  // Where cores are modelled: the rate at which a rank's core reads a
  // peer's memory through the kernel (process_vm_readv, and writes it with
  // process_vm_writev: the single-copy algorithms' reads of buffers that
  // are not mapped), bytes per second; 0: the core's rate. The kernel's copy
  // pins each page and copies it with rep movsb, slower than a FIFO copy.
  double peerReadBytesPerSecond = 0;
  // Where cores are modelled: what a copy or reduction that writes two
  // destinations in one pass (its output and the next rank's FIFO slot: a
  // ring's first step, a chain's root, a ring AllReduce's reduce-and-pass
  // on) pays for the second, as a fraction of a FIFO copy's cost; 0: the
  // second is free. gyre's copy2 of a 256 KiB piece takes 1.6x a memcpy of
  // it on the dev VM (kernels_bench), so about 0.6 there.
  double secondWriteCost = 0;

  int nranks() const { return hosts * ranksPerHost; }
  // Where cores are modelled, whether a core runs more than one rank.
  bool ranksShareCores() const { return coresPerHost > 0 && coresPerHost < ranksPerHost; }
  double coreRate() const { return coreBytesPerSecond > 0 ? coreBytesPerSecond : copyBytesPerSecond; }
  double coreReadRate() const { return coreReadBytesPerSecond > 0 ? coreReadBytesPerSecond : coreRate(); }
  double peerReadRate() const { return peerReadBytesPerSecond > 0 ? peerReadBytesPerSecond : coreRate(); }
  // Throws Error (gyreInvalidArgument) naming the first field out of range.
  void validate() const;
};

// spec with its rates within a host as a call whose host working set is
// workingSetBytes gets them (ClusterSpec::cacheBytes): each byte's time is
// the cached share's at cacheSpeedup times the rate plus the rest's at the
// rate. NICs and the network are unchanged.
ClusterSpec inCache(const ClusterSpec& spec, double workingSetBytes);

class Cluster final : public Fabric {
 public:
  // Makes the links in net (which must outlive the cluster).
  Cluster(const ClusterSpec& spec, FlowNetwork& net);
  const ClusterSpec& spec() const { return spec_; }
  int hostOf(int rank) const { return rank / spec_.ranksPerHost; }

  std::vector<int> path(int from, int to) const override;
  double copyBytesPerSecond(int) const override { return spec_.copyBytesPerSecond; }
  double reduceBytesPerSecond(int) const override { return spec_.reduceBytesPerSecond; }
  double stepOverhead(int) const override { return spec_.stepOverhead; }
  bool sameHost(int a, int b) const override { return hostOf(a) == hostOf(b); }
  double fifoFill(int from, int to, double bytes) const override;
  double fifoSlot(int from, int to) const override;
  int coreOf(int rank) const override;
  double fifoReadCost(int) const override { return spec_.coreRate() / spec_.coreReadRate(); }
  double peerReadCost(int) const override { return spec_.coreRate() / spec_.peerReadRate(); }
  double secondWriteCost(int) const override { return spec_.secondWriteCost; }
  double coreSwitchSeconds(int) const override {
    return spec_.ranksShareCores() ? spec_.coreSwitchSeconds : 0;
  }
  int linkOwner(int link) const override { return owner_[static_cast<size_t>(link)]; }
  int sameLinkOf(int link, int rank) const override;

 private:
  // What each link is, for sameLinkOf.
  enum class LinkKind : unsigned char { IntraUp, IntraDown, HostMemory, Core, NicUp, NicDown, LeafUp, LeafDown };
  int nicOf(int rank) const;  // global NIC index
  int coresUsed() const { return std::min(spec_.coresPerHost, spec_.ranksPerHost); }
  int leafOf(int host) const { return host / spec_.hostsPerLeaf; }

  ClusterSpec spec_;
  std::vector<int> intraUp_, intraDown_;  // by rank
  std::vector<int> hostMemory_;           // by host, where the spec limits it
  std::vector<int> cores_;                // by host * coresPerHost + core, where modelled
  std::vector<int> nicUp_, nicDown_;      // by NIC
  std::vector<int> leafUp_, leafDown_;    // by leaf: to and from the spine
  std::vector<LinkKind> kind_;            // by link
  std::vector<int> owner_;                // by link: its rank's, its NIC's first, its leaf's first
};

}  // namespace gyre::sim
