// The communicator: rank, peers, transports, and the machinery every call
// shares: validation state, the waiting policy, failure detection (dead
// peers, aborts, timeouts) and its propagation to the other ranks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "collectives/executor.h"
#include "collectives/online_tuner.h"
#include "collectives/plan.h"
#include "collectives/planner.h"
#include "collectives/tuner.h"
#include "core/config.h"
#include "core/device_engine.h"
#include "core/join_handle.h"
#include "core/operation.h"
#include "core/stall_report.h"
#include "device/staging_pool.h"
#include "gyre/gyre.h"

namespace gyre::transport {
class ConnectionManager;
}  // namespace gyre::transport

namespace gyre::core {

class TraceSteps;

// A failure with the rank it started at, so every rank can name it.
class PeerFailure : public Error {
 public:
  PeerFailure(gyreResult_t code, int origin, std::string message)
      : Error(code, std::move(message)), origin_(origin) {}
  int origin() const { return origin_; }

 private:
  int origin_;
};

struct InitArgs {
  bootstrap::UniqueIdContents id;
  uint64_t round = 0;
  int rank = 0;
  int nranks = 1;
  Config config;
};

class Communicator final : public collectives::ExecContext, public collectives::PlanEnv {
 public:
  static std::unique_ptr<Communicator> create(const InitArgs& args);
  ~Communicator();

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const Config& config() const { return config_; }

  // Runs a call now and returns when it has completed; or, when
  // op.request is set, queues it to run in the background (in call order
  // with this communicator's other calls) and returns at once.
  void submit(Operation&& op);
  // A blocking host call with the same arguments as the last call, when
  // nothing else has run since: runs it again on that call's plan and
  // arguments, past the checks and the planning that call went through,
  // and returns true. False: not such a call; nothing was done (submit it).
  bool repeat(const CallKey& key);
  // Runs the calls of a group (gyreGroupEnd): collectives one after the
  // other, runs of point-to-point calls together (any order is safe).
  void runGroup(std::vector<Operation>& ops);

  // PreMulSum ops: a number from gyreNumOps up, valid until destroyed.
  int createPreMulSum(const void* scalar, gyreDataType_t dtype, gyreScalarResidence_t residence);
  void destroyRedOp(int op);
  bool isRedOp(int op) const;
  gyreDataType_t preMulSumType(int op) const { return premulOps_[static_cast<size_t>(op - gyreNumOps)].dtype; }

  // Collective over this communicator: the child of the ranks that gave
  // `color` (nullptr for GYRE_SPLIT_NOCOLOR).
  std::unique_ptr<Communicator> split(int color, int key, const gyreConfig_t* userConfig);
  // gyreCommShrink (shrink.cc): every rank not in `exclude` calls it; the
  // child holds them, in this communicator's order, less (afterFailure)
  // the ranks found dead. afterFailure revokes first. Not collective over
  // the excluded ranks.
  std::unique_ptr<Communicator> shrink(std::span<const int> exclude, bool afterFailure,
                                       const gyreConfig_t* userConfig);
  // gyreCommGetJoinHandle (grow.cc): a handle around `rendezvous` (a fresh
  // id whose root this process hosts), good for one grow of this
  // communicator.
  JoinHandle makeJoinHandle(const gyreUniqueId& rendezvous);
  // gyreCommGrow's part on this communicator's ranks, collective over them:
  // every rank's newNranks and handle bytes (`mine`, or nullptr) are compared,
  // the handle is checked to be this communicator's and unspent, and is
  // spent; returns it. A disagreement throws the same named error on every
  // rank.
  JoinHandle agreeOnGrow(int newNranks, const gyreJoinHandle* mine);

  // Waits until every call queued before it has completed (gyreCommFinalize).
  void finalize();

  // From any thread: ends the blocked call (if any) with an error, tells the
  // peers, and waits until no call is inside the communicator.
  void abort();
  // The same, keeping the communicator: every later call fails naming the
  // revoke, and asyncError() says gyreSuccess (quiescent, as NCCL 2.28's
  // revoke leaves a communicator).
  void revoke();
  // "rank 3 revoked the communicator (gyreCommRevoke)", or aborted it.
  std::string stoppedSentence() const;
  gyreResult_t asyncError() const { return revoked_.load() ? gyreSuccess : failedCode_.load(); }
  // gyreCommGetStats: every call that ran, and what its plans sent each peer.
  struct Stats {
    uint64_t calls = 0, failed = 0, bytes = 0;
    double seconds = 0;
    std::vector<uint64_t> sentToPeer;
  };
  Stats stats() const;
  // The transport reaching peer ("" while unconnected and for this rank).
  std::string peerTransport(int peer) const;
  int device() const { return device_; }

  // gyreEstimate: the tuner's choice for a call of `bytes` (CallShape::bytes)
  // over groupRanks ranks placed as this communicator's are (calibration.cc
  // says how; groupRanks == nranks() is this communicator itself), and its
  // microseconds: the call's plans simulated on hosts like ours
  // (sim/estimate.h), the model's own estimate where they cannot be.
  collectives::Candidate estimate(collectives::OpKind op, size_t bytes, int groupRanks) const;

  // Throws Error(gyreInvalidUsage) if an earlier failure broke the communicator.
  void checkUsable() const;

  // ExecContext
  transport::Connection& connection(int peer) override;
  void waitUntil(std::span<const WaitItem> items, FunctionRef<bool()> ready) override;

  // PlanEnv
  const collectives::TuningParams& tuning() const override { return tuning_; }
  const collectives::Group& world() const override { return world_; }
  bool sameHost(int peer) const override;
  int hostIndex(int rank) const override { return hostIndex_[static_cast<size_t>(rank)]; }
  size_t chunkBytes(std::span<const int> peers) override;
  bool canReadPeerMemory() const override { return canReadPeers_; }
  bool readsAreLocal() const override { return localReads_; }
  size_t inPlaceMessageBytes(int peer) override;

 private:
  Communicator() = default;
  // Everything but the network: settings, overrides, counters.
  static std::unique_ptr<Communicator> makeShell(int rank, int nranks, const Config& config);
  static bootstrap::Bootstrap::Params bootstrapParams(int rank, int nranks, const Config& config,
                                                      Deadline deadline);
  void setUpTransports(Deadline deadline);
  // A split's or shrink's child: its shell and bootstrap listener, with a
  // secret derived from this communicator's and secretLabel; then, given
  // every member's listener, its connections (reporting a failure to the
  // child's other members).
  std::unique_ptr<Communicator> prepareChild(int rank, int nranks, const gyreConfig_t* userConfig,
                                             Deadline deadline, const std::string& secretLabel);
  void connectChild(Communicator& child, std::vector<bootstrap::PeerInfo> table, Deadline deadline);
  // The tuner's model and topology summary (calibration.cc): inherited
  // (a split's child), loaded, fixed or measured now.
  void setUpTuner(Deadline deadline, const collectives::CostModel* inherited);
  collectives::CostModel calibrate(Deadline deadline);
  double timePlanUs(collectives::Plan& plan, collectives::CallArgs& args);
  void measureLink(int peer, bool first, double* latencyUs, double* gbps, std::vector<unsigned char>& in,
                   std::vector<unsigned char>& out);
  double measureRead(int peer, std::vector<unsigned char>& in, std::vector<unsigned char>& out, double* latencyUs);
  double measureReduce();
  // Execution of submitted calls, on whichever thread owns the executor.
  void execute(Operation& op);
  void runGroupMembers(std::vector<Operation>& ops);
  // Calls on CUDA streams (device_calls.cc): staged through pinned host
  // memory by copies on the streams, queued with the streams' events and
  // gates, run by the worker as host calls.
  void enqueueOnStreams(Operation op);
  void runOnDevice(Operation& op);
  void retireStaging(DeviceCall& call, bool streamsReachedIt) noexcept;
  void checkStreamWait(int64_t startNs, const char* what) const;
  static void releaseStreams(DeviceCall& call) noexcept;
  // The proxy's engine for a direct device call on `device` (made once).
  ProxyEngine& engineFor(int device);
  void executeCollective(Operation& op);
  void executePointToPoint(std::span<Operation> ops);
  // The mixture-of-experts exchanges (communicator_moe.cc).
  void executeMoe(Operation& op);
  // For PreMulSum: sendbuff scaled into a buffer of ours; returns it.
  const void* premultiplied(const Operation& op, size_t elems);

 public:
  // Copies a PreMulSum op's scalar (or its pointer) into the call; on the
  // caller's thread, when the call is made.
  void bindPreMulSum(Operation& op) const;

 private:
  // The background thread of nonblocking calls, and the queue's one way in
  // (queueMu_ held).
  void workerLoop();
  void pushToWorker(Operation op);
  void drainQueue();
  // Plans and runs one call, after beginCollective (which named it);
  // failures break the communicator (except invalid arguments found before
  // anything was sent).
  // prefer: the algorithm to use where GYRE_ALGO names none (a stream call's
  // single-copy plan, runsDirectOnDevice), instead of the tuner's choice.
  void runCall(const collectives::CallRequest& req, collectives::CallArgs& args,
               const collectives::Algorithm* prefer = nullptr);
  // A call on a stream, on a communicator whose ranks all share a host
  // (shared memory to every peer, which reads peers' memory) with
  // GYRE_DEVICE_DIRECT=1: its operation's single-copy ("direct") algorithm,
  // unless GYRE_ALGO names one or it is a PreMulSum; null otherwise. Every
  // rank decides alike from what they agree on (the call and the settings),
  // never from its own buffers: whether a rank then runs the plan on its
  // device buffers (ProxyEngine) or on staged host copies is its own affair.
  const collectives::Algorithm* directOnDevice(const Operation& op) const;
  // A call on a stream that has no single-copy plan here (point to point,
  // or a collective GYRE_ALGO sends to another algorithm), on a
  // communicator whose every peer takes device messages (shared memory)
  // with GYRE_DEVICE_DIRECT=1: its pieces may go device to device
  // (transport::kDeviceMessages). Whether this rank's do is its own affair
  // (its buffers); a peer adapts to whichever it gets.
  bool messagesOnDevice(const Operation& op) const;
  // Whether this rank runs the call (an operation on a stream) on its
  // device buffers: a single-copy plan on buffers peers can map, or device
  // messages on device buffers; else it is staged.
  bool runsOnDevice(device::Backend& b, const Operation& op) const;
  void logChoice(const collectives::CallRequest& req, const char* algo, bool forced);
  // GYRE_TUNER_ONLINE: after a size class's last trial, every rank's
  // medians become the slowest rank's (an internal AllReduce of maxima, a
  // collective call of its own that every rank makes at the same point).
  void settleOnline(const collectives::OnlineTuner::Pick& pick, const collectives::CallRequest& call);
  void* scratch(size_t bytes);
  bool progressAll(transport::ReadAhead whenBlocked = transport::ReadAhead::All);
  // Throws if this rank was aborted, a peer reported a failure, or a peer
  // we wait on has died.
  // inWait: called by a wait for `awaited` (which then joins a stall that
  // another rank reports); else looking into a broken connection.
  void checkHealth(std::span<const WaitItem> awaited, bool inWait = true);
  // Before a call starts: a failure a peer reported since the last call
  // fails this one (so a rank whose part of a mismatched call only sent
  // fails in its next call at the latest).
  void checkReports();
  // A collective call begins: the next collective sequence number into
  // req, the call's name and number for errors and stall reports (`kind`
  // names it), and checkReports.
  void beginCollective(collectives::CallRequest& req, collectives::OpKind kind);
  // GYRE_TRACE_FILE (trace.h): this communicator's row, 0 when off.
  int traceRow_ = 0;
  // GYRE_TRACE_STEPS=1 with a trace: the running plan's steps (trace_steps.h), else null.
  std::unique_ptr<TraceSteps> traceSteps_;
  void traceCall(const Operation& op, int64_t startNs, const char* result);
  // A call's start: to the kernel's tick (callStartNs_), exact only when
  // traced, and in cycles for its length in the statistics.
  struct CallClock {
    int64_t startNs;
    uint64_t startCycles;
  };
  CallClock startCall();
  // A call that ran (execute), from its start, failed when failure is set:
  // into the statistics and the trace.
  void noteCall(const Operation& op, const CallClock& clock, const Error* failure);
  // What a plan that ran sent each peer, into the statistics (a plan that
  // grew as it ran: the MoE exchanges'; runCall's are summed when made).
  void countSent(const collectives::Plan& plan, size_t elemSize);
  // Whether a step sends to another rank (what the statistics count).
  bool sendsToPeer(const collectives::Step& s) const {
    return s.sendPeer >= 0 && s.sendPeer < nranks_ && s.sendPeer != rank_;
  }
  // The statistics as the calls add to them: one writer at a time (calls
  // run one at a time, handed on under queueMu_), readers on any thread
  // (stats()). Plain loads and stores of atomics, no lock: two lock and
  // unlock pairs were a fifth of a small call's own time.
  struct StatCounters {
    std::atomic<uint64_t> calls{0}, failed{0}, bytes{0};
    std::atomic<uint64_t> cycles{0};  // the calls' time, in cycleCount() units (cycleRate_)
    std::unique_ptr<std::atomic<uint64_t>[]> sentToPeer;  // nranks_ of them
    // One writer: no read-modify-write instruction needed.
    static void add(std::atomic<uint64_t>& a, uint64_t v) {
      a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
    }
  };
  // A call that ran, of `bytes`, from its start (clock): its count, size
  // and time into the statistics (noteCall, and a repeat's).
  void countCall(uint64_t bytes, const CallClock& clock, bool failed);
  StatCounters stats_;
  CycleRate cycleRate_;
  // estimate()'s simulations, by (operation, bytes, ranks): a planner asks
  // the same question many times.
  mutable std::mutex estimatesMu_;
  mutable std::map<std::tuple<int, size_t, int>, double> simulatedUs_;
  // A wait that ran out (GYRE_TIMEOUT_MS), or another rank's report that
  // its own did (`report`) while this one waits too. Tells every rank what
  // this wait is stuck on, looks a moment for their reports, and follows
  // them from rank to rank to the one the wait is stuck behind (stall.cc).
  PeerFailure stalled(std::span<const WaitItem> items, const bootstrap::AbortNotice* report);
  PeerFailure stalledOn(int waitedOn, const std::string& waitText, const bootstrap::AbortNotice* report);
  // Another rank's stall report, found as a call starts: the same account,
  // followed from the reporter's wait.
  PeerFailure stallSeenFromOutside(const bootstrap::AbortNotice& report);
  // A peer's report as this rank's failure: its code, its origin, its sentence.
  PeerFailure reported(const bootstrap::AbortNotice& n) const {
    return PeerFailure(n.result(), n.origin, bootstrap_->explain(n));
  }
  PeerFailure explainStall(int start, int waitedOn, const std::string& sentence, gyreResult_t code,
                           bool startIsMe);
  // GYRE_STALL_REPORT_MS (stall_report.cc), null when 0: a wait that long
  // asks the others where they are and logs it (stallTick, from a wait's
  // health checks); questions are answered there and as calls start
  // (answerStallQuestions, at most every few ms, from callStartNs_, the
  // time execute() reads anyway).
  std::unique_ptr<StallReportState> stallReport_;
  int64_t callStartNs_ = 0;
  void stallTick(std::span<const WaitItem> items, int64_t now);
  void answerStallQuestions();
  std::vector<int> takeStallQuestions(int64_t now);
  void answerStall(const std::vector<int>& askers, int64_t now);
  void logStallReport(std::span<const WaitItem> items, int64_t now);
  RankWhere whereAmI(bool ask, int64_t now) const;
  std::string describeWhere(const RankWhere& w) const;
  // gyreCommSplit's exchanges: an AllGather through the transports, tagged
  // as the split's own call (bytesPerRank at data + rank * bytesPerRank).
  void exchangeForSplit(void* data, size_t bytesPerRank, collectives::OpKind as = collectives::OpKind::CommSplit);
  // Records a failure that breaks the communicator and tells the peers;
  // returns the error to throw, its message naming the origin. failedPeer:
  // the peer whose connection broke, if known. call: what failed, where it
  // is not the current call (opName_ #opSeq_, which only the thread running
  // calls may read).
  Error fail(const Error& cause, int failedPeer = -1, const char* call = nullptr);
  std::string describeWaits(std::span<const WaitItem> items) const;

  int rank_ = 0;
  int nranks_ = 1;
  Config config_;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  // The transports and the connection to each peer (null until made).
  std::unique_ptr<transport::ConnectionManager> connections_;
  collectives::Plan plan_;
  // The request plan_ was built for, to reuse it for the same call again.
  struct PlanCache {
    bool valid = false;
    collectives::CallDesc desc;
    size_t elemSize = 0;
    bool inPlace = false;
    const char* algorithm = "";
    const collectives::Algorithm* preferred = nullptr;  // runCall's prefer, when it was made
    // AllToAllv: its four arrays (sendcounts, sdispls, recvcounts, rdispls),
    // which its plan follows; a loop of calls with the same arrays (fixed
    // shapes, the Ulysses exchange) reuses it like any other call.
    std::vector<size_t> vcounts;  // 4 x nranks, or empty
    // A sequence exchange: its layout's tokens (the rest of it is desc.count).
    std::vector<size_t> seqTokens;
    bool matches(const collectives::CallRequest& r) const {
      if (!valid || desc.kind != r.desc.kind || desc.count != r.desc.count || desc.dtype != r.desc.dtype ||
          desc.redop != r.desc.redop || desc.root != r.desc.root || desc.codec != r.desc.codec ||
          elemSize != r.elemSize || inPlace != r.inPlace)
        return false;
      if (r.seq) return seqTokens == r.seq->tokens;
      if (!r.sendCounts) return vcounts.empty();
      if (vcounts.empty()) return false;
      const size_t n = vcounts.size() / 4, bytes = n * sizeof(size_t);
      const size_t* arrays[4] = {r.sendCounts, r.sendDispls, r.recvCounts, r.recvDispls};
      for (size_t a = 0; a < 4; ++a)
        if (std::memcmp(vcounts.data() + a * n, arrays[a], bytes) != 0) return false;
      return true;
    }
    void remember(const collectives::CallRequest& r, int n) {
      valid = true;
      desc = r.desc;
      elemSize = r.elemSize;
      inPlace = r.inPlace;
      vcounts.clear();
      seqTokens.clear();
      if (r.seq) seqTokens = r.seq->tokens;
      if (r.sendCounts)
        for (const size_t* a : {r.sendCounts, r.sendDispls, r.recvCounts, r.recvDispls})
          vcounts.insert(vcounts.end(), a, a + n);
    }
    void invalidate() { valid = false; }
    // What the plan sends each peer, in elements, for the statistics: the
    // steps summed once, when the plan is made, not after every call (no
    // plan runCall runs grows as it runs: Resolve steps are the MoE
    // exchanges', which executeMoe runs and countSent counts).
    std::vector<std::pair<int, size_t>> sends;
  } planCache_;
  // The last blocking host call's plan and arguments, for the same call
  // again (call_repeat.cc). valid: nothing else has run since, and nothing
  // of it needs more than its plan (no stream, device, codec, PreMulSum,
  // online tuner, trace); every other call clears it first.
  struct Repeat {
    bool valid = false;
    CallKey key;
    collectives::CallArgs args;
    const char* name = "";
    size_t statBytes = 0;
  } repeat_;
  // After a call that ran whole (executeCollective): keeps it for a repeat
  // if it may be one.
  void rememberRepeat(const Operation& op, const collectives::CallArgs& args);
  // The planned sends (planCache_.sends) into the statistics.
  void countPlannedSends(size_t elemSize);
  collectives::Group world_;
  collectives::TuningParams tuning_;
  std::vector<int> hostIndex_;  // by rank
  // Ceilings from the topology's graphs for a model not measured or loaded
  // (0: unknown): the slowest ring hop within a host, the slowest NIC.
  double topoLocalGBps_ = 0, topoNetworkGBps_ = 0;
  size_t commonChunk_ = SIZE_MAX;  // the smallest largest-message of the link classes in use
  collectives::AlgoOverrides overrides_;
  std::unique_ptr<collectives::OnlineTuner> online_;  // GYRE_TUNER_ONLINE=1, else null
  std::vector<unsigned char> scratch_;
  std::vector<unsigned char> premulBuffer_;
  std::vector<uint64_t> sendSeq_, recvSeq_;  // point-to-point calls per peer
  struct PreMulSum {
    bool used = false;
    gyreDataType_t dtype = gyreFloat32;
    gyreScalarResidence_t residence = gyreScalarHostImmediate;
    const void* pointer = nullptr;  // read at each call (gyreScalarDevice)
    unsigned char value[8] = {};    // copied at creation (host immediate)
  };
  std::vector<PreMulSum> premulOps_;
  uint64_t splits_ = 0;   // splits made from this communicator
  uint64_t shrinks_ = 0;  // and shrinks
  // Join handles this rank made and no grow has used yet, by serial.
  std::mutex joinMutex_;
  uint64_t joinHandlesMade_ = 0;
  std::unordered_set<uint64_t> liveJoinHandles_;

  // Nonblocking calls run, in order, on worker_; a blocking call made while
  // some are queued or running waits its turn. turn_: kBusy while the
  // executor is in use (by the worker or by a caller's thread), plus kOther
  // for each queued call and each thread waiting in waitForTurn (those
  // counts change under queueMu_ only). A blocking call with nobody ahead
  // takes the executor with one compare-and-swap of 0 and gives it back
  // with one of kBusy, without the mutex: a small call's two lock pairs
  // and wake-up were ~130 of its ~2,300 instructions. Whoever finds
  // others counted gives it back under queueMu_ and wakes them; they count
  // themselves before they look, under it, so none misses that.
  static constexpr uint32_t kBusy = 1, kOther = 2;
  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::deque<Operation> queue_;
  std::atomic<uint32_t> turn_{0};
  bool busy() const { return (turn_.load() & kBusy) != 0; }
  // Gives the executor back (the turn's holder only), waking whoever waits.
  void releaseTurn();
  // While a Turn lives, the calling thread has the executor to itself
  // (kBusy set); its end gives it back.
  struct Turn {
    Communicator& c;
    ~Turn() { c.releaseTurn(); }
  };
  // Waits until nothing is queued or running, then sets kBusy: the caller
  // then holds a Turn.
  void waitForTurn();
  bool stopping_ = false;
  std::thread worker_;

  // The current call, for error messages.
  const char* opName_ = "";
  uint64_t opSeq_ = 0;   // of the call in progress, for messages
  uint64_t collSeq_ = 0;  // collective calls made so far

  std::atomic<bool> abortRequested_{false};
  std::atomic<bool> revoked_{false};  // the abort is a revoke (gyreCommRevoke)
  // Threads inside the communicator: abort() waits until none is, because
  // gyreCommAbort frees the communicator as soon as abort() returns. A
  // caller's scope must outlive everything that touches *this (its Turn's
  // release of the executor included), so the API's entry points open one
  // before anything else.
  std::atomic<int> activeCalls_{0};
  class ActiveScope {
   public:
    explicit ActiveScope(std::atomic<int>& n) : n_(n) { n_.fetch_add(1); }
    ~ActiveScope() { n_.fetch_sub(1); }
    ActiveScope(const ActiveScope&) = delete;
    ActiveScope& operator=(const ActiveScope&) = delete;

   private:
    std::atomic<int>& n_;
  };
  std::atomic<gyreResult_t> failedCode_{gyreSuccess};
  mutable std::mutex failMu_;
  std::string failedMessage_;
  bool peersNotified_ = false;
  bool stallReported_ = false;  // stalled() told the peers already (with the rank it waited on)
  int64_t waitStartNs_ = 0;     // when the call's latest wait began (waitUntil)
  int waitPeer_ = -1;           // whom it waited for (-1: the call has not waited yet)
  bool waitForData_ = true;     // for data (else for room)
  bool networkReports_ = false;  // some peer reports failures through the network, not shared memory
  int64_t lastHealthCheckNs_ = 0;
  int64_t lastReportPollNs_ = INT64_MIN / 2;
  // The same look's time in cycles, and the poll interval in cycles (at
  // the rate measured when it last looked; 0: not known yet): a call that
  // comes sooner reads no clock.
  uint64_t lastReportPollCycles_ = 0;
  uint64_t reportPollCycles_ = 0;
  std::vector<char> moePacked_;  // an MoE call's packed rows, kept for the next call
  std::vector<std::vector<char>> moeStaging_;  // a counts-ahead dispatch's rows for too small an output  // checkReports' latest poll of the network
  int device_ = -1;      // the GPU current when it was made (-1: none; gyreCommDevice)
  std::unique_ptr<device::StagingPool> staging_;  // made by the first call on a stream
  // By GPU: the proxy's streams, scratch and bounce buffers of direct device
  // calls (the worker's).
  std::map<int, std::unique_ptr<ProxyEngine>> engines_;
  // After spinning, yield the core this long before sleeping, whatever the
  // transport (GYRE_YIELD_NS, or ranks that outnumber cores); -1: as long as
  // the transport waited on asks (Transport::yieldNs).
  int64_t yieldNs_ = -1;
  bool canReadPeers_ = false;  // every peer's connection reads its memory (kPeerRead)
  bool localReads_ = false;    // ... and every one is a kernel copy on this host (shm)
  bool deviceMessages_ = false;  // every peer's connection carries device messages
  std::unordered_set<unsigned> loggedChoices_;  // (operation, size class) already logged

};

}  // namespace gyre::core
