// The tuner's cost model: what a call would take with each algorithm,
// from a few numbers about the machine (a message's latency and a link's
// bandwidth per link class, local reduction and cross-process read speed)
// and the call's shape (bytes, ranks, hosts). The numbers come from a short
// measurement at communicator creation, from a file, or from built-in
// defaults; every rank uses the same numbers, so every rank picks the same
// algorithm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/call.h"

namespace gyre::collectives {

struct LinkCost {
  double latencyUs;  // one message's fixed cost, end to end
  double gbps;       // payload bandwidth of one stream, GB/s (1e9 bytes)
  double usPerByte() const { return 1e-3 / gbps; }
};

// The built-in numbers are GYRE_TUNER=calibrate's medians on the 2-core
// development host (docs/collectives.md, "Tuner"): deterministic choices
// that fit small hosts; calibrate or load a file for others.
struct CostModel {
  // Within a host (the shared-memory FIFOs: a copy in and a copy out),
  // per stream while both directions are busy.
  LinkCost local{0.15, 3.5};
  // Across hosts (TCP over whatever network is there).
  LinkCost network{20.0, 1.0};
  double reduceGBps = 16.0;  // local element-wise reduction, bytes of one operand per us / 1e3
  double readGBps = 3.0;     // process_vm_readv from a peer while it reads us (single-copy algorithms)
  double readLatencyUs = 2.0;  // one such read's fixed cost (a system call that pins the pages)
  // A peer's gyreMemAlloc buffer, mapped: a plain copy from it (the mapping
  // is made once and cached, so no fixed cost per read).
  double mappedReadGBps = 6.0;
  // Reads through the kernel of data beyond the cache: when the distinct
  // bytes a call touches on the host exceed cacheMiB, that share of the
  // reads costs readColdSlowdown times as much (from DRAM, each page pinned
  // as it is copied). 4 ranks on the 2 cores, direct Broadcast: 3.8 GB/s a
  // reader at 2 MiB, 2.4 at 256 MiB (tuner-sweeps runs 7-9). Mapped reads
  // are plain streaming copies and keep their rate.
  double cacheMiB = 32;
  double readColdSlowdown = 1.6;
  std::string source = "built-in";  // "built-in", "calibrated", or the file it came from

  // The file format: "key = value" lines, '#' comments.
  std::string format() const;
  // Throws Error(gyreInvalidArgument) naming origin and line on anything wrong.
  static CostModel parse(const std::string& text, const std::string& origin);
  static CostModel load(const std::string& path);
  // Every number, for comparing ranks' models.
  uint64_t fingerprint() const;
  // All numbers positive and finite; throws naming origin otherwise.
  void validate(const std::string& origin) const;
};

// What a call looks like to the model.
struct CallShape {
  OpKind op = OpKind::AllReduce;
  size_t bytes = 0;   // the call's count in bytes (per rank block for AllGather/ReduceScatter/AllToAll)
  int nranks = 1;
  int hosts = 1;      // distinct hosts among the ranks
  int perHost = 1;    // the most ranks on one host
  bool canRead = false;  // single-copy reads possible (every rank on one host)
  bool mappedReads = false;  // and from peers' mapped buffers, not through the kernel
  int cores = 0;         // CPUs the busiest host's ranks share (0: unknown)
  size_t localChunk = 256 * 1024;    // largest message a shared-memory link carries
  size_t networkChunk = 256 * 1024;  // the same for TCP
  size_t pairwisePiece = SIZE_MAX;   // pairwise AllToAll(v)'s pieces, at most (pairwisePieceBytes)
  bool sockets = false;  // its messages cost system calls on each side (TuningParams::localSockets)
};

// Microseconds for a call of this shape, or kNotApplicable.
using CostFn = double (*)(const CallShape&, const CostModel&);
constexpr double kNotApplicable = 1e300;

double costRingAllReduce(const CallShape&, const CostModel&);
double costRecursiveDoublingAllReduce(const CallShape&, const CostModel&);
double costRabenseifnerAllReduce(const CallShape&, const CostModel&);
double costDirectAllReduce(const CallShape&, const CostModel&);
double costDoubleTreeAllReduce(const CallShape&, const CostModel&);
double costHierarchicalAllReduce(const CallShape&, const CostModel&);
double costChainBroadcast(const CallShape&, const CostModel&);
double costTreeBroadcast(const CallShape&, const CostModel&);
double costDirectBroadcast(const CallShape&, const CostModel&);
double costChainReduce(const CallShape&, const CostModel&);
double costTreeReduce(const CallShape&, const CostModel&);
double costRingAllGather(const CallShape&, const CostModel&);
double costBruckAllGather(const CallShape&, const CostModel&);
double costDirectAllGather(const CallShape&, const CostModel&);
double costDoublingAllGather(const CallShape&, const CostModel&);
double costRingReduceScatter(const CallShape&, const CostModel&);
double costHalvingReduceScatter(const CallShape&, const CostModel&);
double costDirectReduceScatter(const CallShape&, const CostModel&);
double costPairwiseAllToAll(const CallShape&, const CostModel&);
double costBruckAllToAll(const CallShape&, const CostModel&);
double costDirectAllToAll(const CallShape&, const CostModel&);
double costOnlyChoice(const CallShape&, const CostModel&);  // operations with one algorithm

// AllToAllv's blockwise algorithm: the block size (bytes) from which a block
// is read from its sender's buffer instead of passing through the
// connection. The smallest power of two from 64 B to 1 GiB at which
// costDirectAllToAll, for an AllToAll of blocks that size, is no more than
// costPairwiseAllToAll for this shape (s.bytes and s.op are ignored);
// SIZE_MAX where peers cannot be read or reads never pay. It depends only on
// what every rank shares (the model, ranks, hosts, cores, whether buffers
// are mapped), never on a call's counts, so both ends of every block decide
// alike.
size_t blockwiseReadThreshold(const CallShape& s, const CostModel& m);

// The largest piece of pairwise AllToAll(v) (and blockwise) within one host
// of perHost ranks whose FIFOs have `slots` slots; SIZE_MAX for no limit.
// Those algorithms run every exchange at once, so a call touches all
// perHost x (perHost - 1) FIFOs of the host, each as far as its slots times
// the piece, and beyond the cache every byte crossing is a copy through
// memory twice. The piece is the largest power of two (16 KiB at least)
// with perHost^2 x slots x piece within 16 MiB, the kernels' streaming
// footprint (half this host's L3): 2 ranks keep any piece, 3 and 4 get 128
// KiB, 8 get 32 KiB (with 8 slots). On the 2 cores, against 256 KiB pieces,
// they measured 1.1-1.8x (3 ranks, 768 KiB-48 MiB), 1.15-3x (4 ranks, 1-32
// MiB; level at 64 MiB) and 1.1-2.8x (8 ranks, 2-32 MiB) faster, where
// half those pieces lost again at the larger sizes (a FIFO holds less, so
// an exchange waits on its peer more often). Only for communicators on one
// host over shared memory: elsewhere the links' own pieces stand.
size_t pairwisePieceBytes(int perHost, int slots);

// The chain's best piece size (bytes): more pieces fill the pipeline sooner,
// each costs a message's latency.
size_t chainPieceBytes(const CallShape&, const CostModel&);
// The piece size for a call's pipelined chains: Broadcast and Reduce over
// all ranks, AllReduce's (hierarchical) chains within a host; 0 for others.
size_t pipelinePieceBytes(const CallShape&, const CostModel&);

}  // namespace gyre::collectives
