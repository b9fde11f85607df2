// Runs every rank's plan (gyre's own, as planCall built it) on a simulated
// fabric: each lane's steps in order and the lanes side by side, messages as
// flows on the fabric's links, local copies and reductions at each rank's
// rates. The executor's semantics (collectives/plan.h), with time instead of
// bytes:
// - a Send (and the send of a chained step) starts a flow to its peer and is
//   done when the flow's last byte has crossed; the message arrives at the
//   peer the path's latency later (messages between two ranks arrive in the
//   order they were sent: one lane sends them all, one lane receives them);
// - a receive waits for its peer's next message, then pays its local work
//   (a copy out, or a reduction) before a chained send starts;
// - a single-copy read (ReadCopy, ReadReduce) is a flow from the peer;
//   a ReduceFromAll is flows from every peer at once, its reduction, then
//   (toAll) flows to every peer at once;
// - a step of local work (Copy, Reduce, the codecs' steps) takes its bytes
//   at the rank's copy or reduce rate;
// - where the fabric models CPU cores (Fabric::coreOf), every copy and
//   reduction a rank makes is a flow on its core, shared with its other
//   lanes' and the other ranks' on that core, and a message within a host
//   crosses both ranks' cores: its sender's copy in, and its receiver's
//   copy out or reduction of all but the last FIFO slot, that slot's then
//   paid by the receive (the receiver's step is known when the message
//   starts: one lane receives a pair's messages in order).
// What is not simulated is an error naming it: a plan resolved while it runs
// (Resolve, the pipelined MoE dispatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/plan.h"
#include "sim/event_loop.h"
#include "sim/flow_network.h"
#include "sim/huge_pages.h"

namespace gyre::sim {

// A plan as the runner reads it: each step's primitive, count and peers,
// not its buffers and offsets (which time does not depend on): 24 bytes a
// step instead of a Step's 100 or so, which is what lets 16,384 ranks'
// plans (tens of millions of steps) fit in memory and in cache.
struct SimStep {
  collectives::Prim prim = collectives::Prim::Copy;
  bool toAll = false;
  int32_t sendPeer = -1, recvPeer = -1;
  uint64_t count = 0;  // elements (Await: the step awaited)
};
struct SimPlan {
  const char* algorithm = "";
  std::vector<int> peers;
  // From an arena where the caller keeps one (simulate.cc: the ranks' steps
  // side by side in huge pages), else from the heap.
  std::vector<SimStep, ArenaAllocator<SimStep>> steps;
  std::vector<collectives::Lane> lanes;
  bool peersWriteOutput = false;
};
SimPlan compact(const collectives::Plan& plan, HugeArena* arena = nullptr);
// What the plan's messages carry to each peer it sends to, bytes, by peer
// (ascending); address messages are left out (a few bytes in a slot's
// header line).
std::vector<std::pair<int, double>> bytesSentByPeer(const SimPlan& plan, size_t elemSize);

// What the runner asks of the cluster.
class Fabric {
 public:
  // The links a message from rank `from` to rank `to` crosses, in order.
  virtual std::vector<int> path(int from, int to) const = 0;
  // Local work on `rank`: bytes per second of a copy, and of a reduction
  // (counting one operand's bytes), and a fixed cost per step (the
  // executor's and the transport's software per message).
  virtual double copyBytesPerSecond(int rank) const = 0;
  virtual double reduceBytesPerSecond(int rank) const = 0;
  virtual double stepOverhead(int rank) const = 0;
  // Whether two ranks share a host (a send between them goes through
  // shared memory, not a socket).
  virtual bool sameHost(int, int) const { return false; }
  // What a plain receive of `bytes` from `from` at `to` takes after the
  // message's last byte crossed the path: the receiver's copy of its last
  // FIFO slot (ClusterSpec::fifoSlotBytes), the copies before it having
  // run while the sender filled the next slots; 0 without FIFOs. A receive
  // that reduces reads the slot in place, its reduction charged instead.
  virtual double fifoFill(int, int, double) const { return 0; }
  // The FIFO slot's bytes between two ranks (0: no FIFO between them).
  virtual double fifoSlot(int, int) const { return 0; }
  // The link that stands for the CPU core `rank` runs on, where ranks are
  // processes whose cores are modelled (ClusterSpec::coresPerHost), else
  // -1. Its rate is a FIFO copy's; the rank's copies and reductions take
  // it at their own rates (copyBytesPerSecond, reduceBytesPerSecond), and
  // every byte of a message within a host is copied on the sender's core
  // and copied or reduced on the receiver's: all of it shared, max-min, with
  // whatever else the core runs.
  virtual int coreOf(int) const { return -1; }
  // What a byte copied out of a FIFO costs rank's core, against a byte
  // copied in (the core link's rate): reading what another core wrote.
  virtual double fifoReadCost(int) const { return 1.0; }
  // What a byte of a peer's memory read (or written) through the kernel
  // costs rank's core, against a FIFO copy's (the single-copy reads).
  virtual double peerReadCost(int) const { return 1.0; }
  // What rank's core pays to run it again after all its lanes waited for
  // messages, where the core runs other ranks too (0: it has its own).
  virtual double coreSwitchSeconds(int) const { return 0; }
  // What the second destination of a copy or reduction that writes two in
  // one pass (its output and the next rank's FIFO slot: the executor's
  // CopySend, RecvCopySend and RecvReduceCopySend within a host) costs
  // rank's core, against a FIFO copy's byte.
  virtual double secondWriteCost(int) const { return 0; }
  // For symmetries (sim/symmetry.h): a rank the link belongs to (its port,
  // its NIC's, its leaf's; -1: links are not mapped, no symmetry is used),
  // and the link of the same kind that belongs to `rank`.
  virtual int linkOwner(int) const { return -1; }
  virtual int sameLinkOf(int link, int) const { return link; }

 protected:
  ~Fabric() = default;
};

class LinkOrbits;  // sim/symmetry.h

// One step as it ran (runPlans with record): from the lane's first look at
// it (so a receive's wait is in it) to its end.
struct StepRecord {
  int rank = 0;
  uint32_t lane = 0;   // within its phase (the prologue and epilogue are lane 0)
  uint32_t index = 0;  // in the rank's plan
  collectives::Prim prim = collectives::Prim::Copy;
  int from = -1, to = -1;
  double bytes = 0;
  Time start = 0, end = 0;
};

struct RunResult {
  Time seconds = 0;                  // the last rank's end
  std::vector<Time> rankSeconds;     // each rank's end
  uint64_t messages = 0;             // messages sent
  double bytesSent = 0;              // their payload
  // [from * nranks + to]: the payload from each rank to each; up to
  // kSentToRanks ranks (empty above: 16,384 ranks' would be 2 GiB).
  std::vector<double> sentTo;
  std::vector<StepRecord> steps;     // with record: every step of every rank (simulated)
  uint64_t events = 0;               // callbacks the event loop ran
  // With a symmetry: how many ranks stood for all (Symmetry::describe);
  // empty: every rank was simulated.
  std::string aggregation;
};
constexpr int kSentToRanks = 4096;

// plans[r] is rank r's plan of one call whose elements are elemSize bytes.
// Throws Error (gyreInvalidArgument) for a plan the simulator cannot run,
// and (gyreInternalError) for one that deadlocks (a receive no send feeds).
// record: keep every step's times (RunResult::steps; a trace's events).
// orbits: a symmetry the plans keep (checked by the caller: planIsImage),
// with the fabric's links' orbits under it; only its representatives'
// plans are read (the others may be empty): one rank per orbit is
// simulated, standing for the whole orbit. The result (times, messages,
// sentTo) is the full run's; each link's counters are its orbit's
// canonical link's (LinkOrbits::all). Recorded steps are the
// representatives' only.
RunResult runPlans(const std::vector<SimPlan>& plans, size_t elemSize, const Fabric& fabric, FlowNetwork& net,
                   EventLoop& loop, bool record = false, LinkOrbits* orbits = nullptr);
// The same for whole plans (compacted first).
RunResult runPlans(const std::vector<collectives::Plan>& plans, size_t elemSize, const Fabric& fabric,
                   FlowNetwork& net, EventLoop& loop, bool record = false, LinkOrbits* orbits = nullptr);

// The steps as a Chrome trace (the Trace Event Format's JSON array, as
// GYRE_TRACE_FILE writes real runs): a process per rank, a row per lane,
// microseconds.
std::string chromeTrace(const RunResult& run, const std::string& title);

}  // namespace gyre::sim
