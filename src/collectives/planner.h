// From a call to a plan: which algorithm (an override from GYRE_ALGO or the
// config, else the tuner's choice), then that algorithm's builder.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "collectives/call.h"
#include "collectives/cost_model.h"
#include "collectives/group.h"
#include "collectives/plan.h"

namespace gyre::collectives {

// The tuner's knobs (from the configuration).
struct TuningParams {
  size_t smallMessageBytes = 0;  // non-zero: AllReduce up to this size uses recursive doubling
  bool checkRoots = true;        // rooted operations confirm every rank's root
  bool mappedBuffers = false;    // buffers from gyreMemAlloc: single-copy reads at memory speed
  CostModel model;               // the same on every rank
  int hosts = 1;                 // distinct hosts among the ranks
  int perHost = 1;               // the most ranks on one host
  int cores = 0;                 // CPUs this host's ranks share (0: unknown)
  size_t localChunk = 256 * 1024;    // largest message of a shared-memory link
  // A host's peers talk through shared-memory FIFOs of this many slots of
  // localChunk bytes (0: they do not: TCP, UCX, a plugin, verbs), decided
  // from the transports chosen, not from GYRE_TRANSPORT (auto with
  // GYRE_SHM_DISABLE=1 has none).
  int localFifoSlots = 0;
  size_t networkChunk = 256 * 1024;  // and of a TCP link
  // AllToAllv blockwise: blocks of this many bytes or more are read from
  // their sender's buffer (SIZE_MAX: none); blockwiseThresholdOf, set with
  // the model.
  size_t blockwiseReadBytes = SIZE_MAX;
  // Whether a message within a host, and between hosts, costs system calls
  // on each side (transport::kMessageSyscalls: TCP, UCX over tcp); the same
  // on every rank.
  bool localSockets = false;
  bool networkSockets = false;

  // Pairwise AllToAll(v)'s and blockwise's pieces, at most (SIZE_MAX: the
  // links' own): on one host whose ranks talk through FIFOs, what keeps
  // every FIFO in cache (pairwisePieceBytes in cost_model.h). Without FIFOs
  // the pieces are the chunk (over UCX 256 KiB, not 128: a 4-rank AllToAll
  // of 1-16 MiB 0.87-0.91x the time).
  size_t pairwisePiece() const {
    return hosts == 1 && localFifoSlots > 0 ? pairwisePieceBytes(perHost, localFifoSlots) : SIZE_MAX;
  }
};

// What planning needs from the communicator.
class PlanEnv {
 public:
  virtual const TuningParams& tuning() const = 0;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual const Group& world() const = 0;  // every rank, in the topology's ring order (src/topology/search.h)
  virtual bool sameHost(int peer) const = 0;
  // Hosts numbered 0, 1, ... in order of their first rank.
  virtual int hostIndex(int rank) const = 0;
  // The largest message every listed peer's connection carries; connects to
  // them first if needed (every rank plans the same call, so each listed
  // peer connects back in the same call).
  virtual size_t chunkBytes(std::span<const int> peers) = 0;
  // Every peer's memory can be read directly (every connection offers
  // kPeerRead): the single-copy algorithms can run, and GYRE_ALGO may ask
  // for them.
  virtual bool canReadPeerMemory() const = 0;
  // And those reads are the kernel's copies within this host, the price the
  // cost model knows: only then does the tuner choose single-copy
  // algorithms. A read over the network (UCX, verbs) is priced by nothing
  // measured yet, so it is used only when asked for.
  virtual bool readsAreLocal() const { return canReadPeerMemory(); }
  // The largest message to or from a connected peer that lands in its
  // receiver's buffer straight from the wire (transport::kLargeInPlace), 0
  // where none does: one-way exchanges cut larger pieces for it
  // (pairwisePieceElemsFor in steps.h).
  virtual size_t inPlaceMessageBytes(int /*peer*/) { return 0; }

 protected:
  ~PlanEnv() = default;
};

struct SeqLayout;  // seq_layout.h

// One call, as the planner sees it.
struct CallRequest {
  CallDesc desc;
  size_t elemSize = 4;
  bool inPlace = false;
  // AllToAllv: per-peer element counts and displacements (nranks each).
  const size_t* sendCounts = nullptr;
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
  // A sequence exchange (seq_exchange.h): its layout, tokens included.
  const SeqLayout* seq = nullptr;
  // Pipelined chains: the piece size the tuner chose (0: the link's largest
  // message). Set by the planner.
  size_t pieceBytes = 0;
  // A compressed call (desc.codec set; compressed.h): the values' type.
  kernels::DType values = kernels::DType::Float32;
  size_t bytes() const { return desc.count * elemSize; }
  // AllToAllv: the elements of all of one side's blocks (sendCounts or recvCounts).
  static size_t totalCount(const size_t* counts, int nranks) {
    size_t total = 0;
    for (int r = 0; r < nranks; ++r) total += counts[r];
    return total;
  }
};

using BuildFn = void (*)(const CallRequest&, PlanEnv&, Plan&);

struct Algorithm {
  OpKind op;
  const char* name;
  BuildFn build;
};

// Every algorithm of every operation.
std::span<const Algorithm> algorithms();
// "ring, recursive_doubling" for one operation.
std::string algorithmNames(OpKind op);

// Overrides: "ring" (every operation that has it), "allreduce:ring",
// size ranges "allreduce:ring@0-64K,rabenseifner@64K-", several operations
// separated by ';'. Throws Error(gyreInvalidArgument) naming an unknown
// operation or algorithm and listing the valid ones.
class AlgoOverrides {
 public:
  AlgoOverrides() = default;
  explicit AlgoOverrides(const std::string& spec);
  // The forced algorithm for this operation and size, or nullptr.
  const Algorithm* find(OpKind op, size_t bytes) const;
  bool empty() const { return rules_.empty(); }

 private:
  struct Rule {
    OpKind op;
    const Algorithm* algo;
    size_t lo, hi;  // [lo, hi)
  };
  std::vector<Rule> rules_;
};

// Chooses the algorithm and builds this rank's plan; returns its name.
// forced: set to whether GYRE_ALGO (or the config's algo) made the choice.
// measured: the online tuner's pick (online_tuner.h), used where GYRE_ALGO
// names none; nullptr: the cost model's.
const char* planCall(const CallRequest& req, PlanEnv& env, const AlgoOverrides& overrides, Plan& plan,
                     bool* forced = nullptr, const Algorithm* measured = nullptr);

}  // namespace gyre::collectives
