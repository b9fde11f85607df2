#include "core/communicator.h"
#include "core/trace.h"
#include "core/trace_steps.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/hash.h"
#include "base/log.h"
#include "device/backend.h"
#include "collectives/call.h"
#include "collectives/tuner.h"
#include "core/group.h"
#include "core/yield_wait.h"
#include "kernels/cpu/reduce.h"
#include "topology/host_identity.h"
#include "topology/rank_topology.h"
#include "transport/connection_manager.h"
#include "transport/shm/shm_transport.h"
#include "transport/net/net_transport.h"
#include "transport/tcp/tcp_transport.h"
#ifdef GYRE_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#ifdef GYRE_HAVE_VERBS
#include "transport/verbs/verbs_transport.h"
#endif

namespace gyre::core {

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kBlockSliceNs = 50 * kMs;   // longest sleep between health checks
constexpr int64_t kHealthEveryNs = 10 * kMs;  // how often a blocked waiter checks peers
// A dead peer's last messages: how long to look for them. On two cores
// shared by three spinning ranks a waiter may get the CPU for a few
// milliseconds of 20, and a peer's last TCP bytes (still in its orphaned
// socket, sent as we read) then arrived after a 20 ms grace had ended (CI:
// a 3-rank recursive doubling over tcp, rank 0 "exited while this rank
// waited for data from rank 0" in its last call). (A count of passes as
// well cost seconds: each pass yields, and under load a yield is a time
// slice.)
constexpr int64_t kExitGraceNs = 250 * kMs;
// A wait in which some lane waits for data reads ahead only what has
// arrived (transport::ReadAhead::Arrived) this long, then everything: the
// lane's receive is posted and a peer's rendezvous fills it in place, while
// one pulled in early lands in staging and is copied again (4-rank
// AllToAll over UCX, 16-64 MiB: 1.3-1.4x the time). A wait that goes on
// this long may be ranks waiting on each other's sends, which pulling
// everything in ends.
constexpr int64_t kHeldReadAheadAfterNs = 5 * kMs;
// How often a call's start looks for reports arriving through the network
// (a poll() of the bootstrap's listeners): every call made a small AllReduce
// over UCX or TCP one syscall dearer (8 B, 2 ranks: ~7%). A call that waits
// looks again in its wait, so a report is never missed, only seen there.
constexpr int64_t kReportPollEveryNs = kMs / 10;

// Settings every rank must agree on, compared at init.
struct SharedSettings {
  int32_t transport;
  int32_t transportsDisabled;  // GYRE_SHM_DISABLE | GYRE_TCP_DISABLE << 1
  int32_t shmSlots;
  uint64_t shmSlotBytes;
  uint64_t tcpChunkBytes;
  int32_t socketsPerPeer;
  int32_t checkRoots;
  uint64_t smallMessageBytes;
  uint64_t algoHash;
  int32_t calibrate;
  int32_t mappedBuffers;
  uint64_t modelFingerprint;  // of GYRE_TUNER_FILE's model, 0 without one
  int32_t tunerOnline;
  uint64_t retuneCalls;
  uint64_t netPluginHash;  // GYRE_NET_PLUGIN (0: none): its creation is collective
  int32_t ibQpsPerConnection;  // the verbs exchange's size depends on it
  int32_t deviceDirect;        // stream calls on one host choose the single-copy plans
  int32_t netTransport;        // GYRE_NET_TRANSPORT: which transports are created
};

uint64_t hashString(const std::string& s) { return fnv1a(s); }

const char* transportName(TransportChoice t) {
  switch (t) {
    case TransportChoice::Shm: return "shm";
    case TransportChoice::Tcp: return "tcp";
    case TransportChoice::Ucx: return "ucx";
    case TransportChoice::Net: return "net";
    case TransportChoice::Verbs: return "verbs";
    default: return "auto";
  }
}

}  // namespace


std::unique_ptr<Communicator> Communicator::makeShell(int rank, int nranks, const Config& config) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->rank_ = rank;
  c->nranks_ = nranks;
  c->config_ = config;
  // As NCCL's: the communicator belongs to the GPU current when it is made.
  if (device::Backend* b = device::backend()) c->device_ = b->currentDevice();
  log::setThreadRank(rank);
  // An unknown algorithm name is an error now, before any rendezvous.
  c->overrides_ = collectives::AlgoOverrides(c->config_.algo);
  if (c->config_.tunerOnline) c->online_ = std::make_unique<collectives::OnlineTuner>(c->config_.retuneCalls);
  c->world_ = collectives::Group::all(rank, nranks);
  if (c->config_.smallMessageBytes) c->tuning_.smallMessageBytes = c->config_.smallMessageBytes;
  c->tuning_.checkRoots = c->config_.checkRoots;
  c->tuning_.mappedBuffers = c->config_.mappedBuffers;
  // A bad tuner file is an error now too.
  if (!c->config_.tunerFile.empty()) c->tuning_.model = collectives::CostModel::load(c->config_.tunerFile);
  if (c->config_.stallReportMs > 0 && nranks > 1)
    c->stallReport_ = std::make_unique<StallReportState>(nranks, c->config_.stallReportMs * kMs);
  c->sendSeq_.assign(static_cast<size_t>(nranks), 0);
  c->recvSeq_.assign(static_cast<size_t>(nranks), 0);
  return c;
}

bootstrap::Bootstrap::Params Communicator::bootstrapParams(int rank, int nranks, const Config& config,
                                                           Deadline deadline) {
  bootstrap::Bootstrap::Params bp;
  bp.rank = rank;
  bp.nranks = nranks;
  bp.deadline = deadline;
  bp.timeoutMs = config.timeoutMs;
  bp.ifname = config.socketIfname;
  bp.family = config.socketFamily;
  bp.hostHash = topology::detectHostIdentity(config.hostId).hash;
  return bp;
}

std::unique_ptr<Communicator> Communicator::create(const InitArgs& args) {
  std::unique_ptr<Communicator> c = makeShell(args.rank, args.nranks, args.config);
  Deadline deadline = Deadline::afterMs(c->config_.timeoutMs);
  bootstrap::Bootstrap::Params bp = bootstrapParams(args.rank, args.nranks, c->config_, deadline);
  bp.id = args.id;
  bp.round = args.round;
  c->bootstrap_ = bootstrap::Bootstrap::create(bp);
  try {
    c->setUpTransports(deadline);
    c->setUpTuner(deadline, nullptr);
  } catch (const Error& e) {
    // The others may be waiting on this rank: tell them why it stops here
    // (or pass on what it saw of another), rather than leave them to time out.
    c->bootstrap_->reportFailure(e);
    throw;
  }
  GYRE_INFO("rank %d of %d ready", c->rank_, c->nranks_);
  return c;
}

Communicator::~Communicator() {
  group::forget(*this);
  drainQueue();  // nonblocking calls already made still run
  // Every gate is open now: the streams' copies out of staging follow soon.
  if (staging_) staging_->shutdown(config_.timeoutMs > 0 ? config_.timeoutMs : 10'000);
}

void Communicator::setUpTransports(Deadline deadline) {
  traceRow_ = trace::addCommunicator(rank_, nranks_, config_.commName);
  if (traceRow_ && config_.traceSteps) traceSteps_ = std::make_unique<TraceSteps>();
  stats_.sentToPeer = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(nranks_));
  // Ranks must agree on the transport settings, or their exchanges would
  // not line up: compare them first.
  std::vector<SharedSettings> all(static_cast<size_t>(nranks_));
  SharedSettings& mine = all[rank_];
  std::memset(&mine, 0, sizeof(mine));
  mine.transport = static_cast<int32_t>(config_.transport);
  mine.transportsDisabled = int32_t(config_.shmDisable) | int32_t(config_.tcpDisable) << 1;
  mine.shmSlots = config_.shmSlots;
  mine.shmSlotBytes = config_.shmSlotBytes;
  mine.tcpChunkBytes = config_.tcpChunkBytes;
  mine.socketsPerPeer = config_.socketsPerPeer;
  mine.smallMessageBytes = config_.smallMessageBytes;
  mine.checkRoots = config_.checkRoots;
  mine.algoHash = hashString(config_.algo);
  mine.calibrate = config_.calibrate;
  mine.mappedBuffers = config_.mappedBuffers;
  mine.modelFingerprint = config_.tunerFile.empty() ? 0 : tuning_.model.fingerprint();
  mine.tunerOnline = config_.tunerOnline;
  mine.retuneCalls = config_.tunerOnline ? config_.retuneCalls : 0;
  mine.netPluginHash = config_.netPlugin.empty() ? 0 : hashString(config_.netPlugin);
  mine.ibQpsPerConnection = config_.ibQpsPerConnection;
  mine.deviceDirect = config_.deviceDirect;
  mine.netTransport = static_cast<int32_t>(config_.netTransport);
  bootstrap_->allGather(all.data(), sizeof(SharedSettings), deadline);
  for (int r = 0; r < nranks_; ++r) {
    if (std::memcmp(&all[r], &all[0], sizeof(SharedSettings)) == 0) continue;
    std::string what =
        all[r].transport != all[0].transport
            ? std::string("GYRE_TRANSPORT=") + transportName(TransportChoice(all[r].transport)) +
                  " where rank 0 has " + transportName(TransportChoice(all[0].transport))
        : all[r].netTransport != all[0].netTransport
            ? std::string("GYRE_NET_TRANSPORT=") + transportName(TransportChoice(all[r].netTransport)) +
                  " where rank 0 has " + transportName(TransportChoice(all[0].netTransport))
        : all[r].transportsDisabled != all[0].transportsDisabled
            ? "different GYRE_SHM_DISABLE/GYRE_TCP_DISABLE settings than rank 0"
        : all[r].netPluginHash != all[0].netPluginHash
            ? "a different GYRE_NET_PLUGIN than rank 0"
        : all[r].ibQpsPerConnection != all[0].ibQpsPerConnection
            ? "GYRE_IB_QPS_PER_CONNECTION=" + std::to_string(all[r].ibQpsPerConnection) + " where rank 0 has " +
                  std::to_string(all[0].ibQpsPerConnection)
        : all[r].modelFingerprint != all[0].modelFingerprint || all[r].calibrate != all[0].calibrate
            ? "a different tuner model (GYRE_TUNER/GYRE_TUNER_FILE and its contents) than rank 0"
        : all[r].tunerOnline != all[0].tunerOnline || all[r].retuneCalls != all[0].retuneCalls
            ? "different GYRE_TUNER_ONLINE/GYRE_TUNER_RETUNE (or config.tunerOnline) settings than rank 0"
            : "different GYRE_ALGO/GYRE_SMALL_MSG_BYTES/GYRE_CHECK_ROOTS/GYRE_MAPPED_BUFFERS/GYRE_DEVICE_DIRECT/"
              "GYRE_SHM_*/GYRE_TCP_*/GYRE_NSOCKS_PERPEER settings than rank 0";
    // Every rank finds it; the first to tell the others gives them its code.
    throw bootstrap::SharedFinding(gyreInvalidUsage,
                                   "rank " + std::to_string(r) + " was started with " + what +
                                       "; every rank needs the same transport and algorithm settings");
  }

  const auto& peers = bootstrap_->peers();
  // Topology (src/topology): the ring order ring algorithms follow (each
  // host's ranks together, near devices next to each other) and the
  // transport per peer pair.
  std::vector<uint64_t> hostOf;
  for (const auto& p : peers) hostOf.push_back(p.hostHash);
  topology::RankTopology topo;
  try {
    topo = topology::arrangeRanks(rank_, hostOf, [&](void* data, size_t bytes) {
      bootstrap_->allGather(data, bytes, deadline);
    });
  } catch (const topology::TopologyError& e) {
    throwError(gyreInvalidArgument, std::string("GYRE_TOPO_FILE/GYRE_TOPO_DUMP_FILE: ") + e.what());
  }
  world_.ranks = topo.result.ring;
  world_.me = world_.indexOf(rank_);
  for (int t = 0; t < 2; ++t) world_.trees[t] = topo.result.trees[t];
  topoLocalGBps_ = topo.localGBps;
  topoNetworkGBps_ = topo.networkGBps;
  GYRE_INFO("rank %d: %s%s", rank_, topo.detail.c_str(), topo.boundNuma ? " (progress thread and shm bound there)" : "");
  if (rank_ == 0) {
    GYRE_INFO("ring %s (slowest hop within a host %s, %.1f GB/s)", topo.result.describeRing().c_str(),
              topology::pathClassName(topo.result.ringWorst), topo.result.ringGBps);
    for (int t = 0; t < 2; ++t) GYRE_INFO("tree %d: %s", t, topo.result.describeTree(t).c_str());
  }
  std::vector<int> local;
  for (int r = 0; r < nranks_; ++r)
    if (topo.result.transport(rank_, r) == topology::TransportKind::Shm) local.push_back(r);

  // More ranks than cores: spinning steals the CPU from the peer we wait on.
  // The CPUs this host's ranks may use between them: the union of their
  // affinity masks (ranks pinned one per core are not crowded).
  uint64_t shared[topology::kCpuMaskWords] = {};
  for (int r : local)
    for (int w = 0; w < topology::kCpuMaskWords; ++w) shared[w] |= peers[r].cpuMask[w];
  int cpus = 0;
  for (uint64_t w : shared) cpus += __builtin_popcountll(w);
  if (cpus == 0) cpus = topology::availableCpus();
  const bool oversubscribed = int(local.size()) > cpus;
  tuning_.cores = cpus;
  // Oversubscribed, a waiter yields at once instead of spinning first: the
  // rank it waits for is often on its own core, and every nanosecond spun
  // is one that rank does not run (a 2 us spin cost 4-rank calls on 2 cores
  // 1.2-1.8x their time from 8 B to 4 KiB; the yield loop still polls,
  // so a message from another core is seen as soon).
  auto spin = [&](int64_t normal) {
    return config_.spinNs >= 0 ? config_.spinNs : oversubscribed ? 0 : normal;
  };
  yieldNs_ = config_.yieldNs >= 0 ? config_.yieldNs : oversubscribed ? 1'000'000 : -1;

  // Shared memory and TCP are created on every rank (creation is
  // collective), and the connection manager picks one per peer: shared
  // memory on the same host, else TCP, unless GYRE_TRANSPORT names one or a
  // switch turns one off. Why a transport is off, if it is, is named when
  // that leaves a peer unreached.
  const std::string forced = std::string("GYRE_TRANSPORT=") + transportName(config_.transport);
  const bool anyOf = config_.transport == TransportChoice::Auto;
  // GYRE_NET_TRANSPORT names what reaches other hosts: it alone does (TCP
  // and a plugin stand aside), shared memory keeps each host.
  const TransportChoice net = config_.netTransport;
  const std::string netForced = std::string("GYRE_NET_TRANSPORT=") + transportName(net);
  if (!anyOf && net != TransportChoice::Auto)
    throwError(gyreInvalidArgument, netForced + " chooses what reaches other hosts under GYRE_TRANSPORT=auto; " +
                                        forced + " names one transport for every peer");
  const bool netNamed = net != TransportChoice::Auto;
  const std::string shmOff = !anyOf && config_.transport != TransportChoice::Shm ? forced
                             : config_.shmDisable                                 ? "GYRE_SHM_DISABLE=1"
                                                                                  : "";
  const std::string tcpOff = !anyOf && config_.transport != TransportChoice::Tcp ? forced
                             : config_.tcpDisable                                 ? "GYRE_TCP_DISABLE=1"
                             : netNamed && net != TransportChoice::Tcp            ? netForced
                                                                                  : "";
  const bool wantShm = shmOff.empty();
  // The transports copy with the kernels' routines (they sit below kernels).
  const transport::MemoryCopy kernelsCopy{kernels::copy, kernels::repMovsbCrawls};
  transport::ShmTransport::Options so;
  so.memoryCopy = kernelsCopy;
  so.slotBytes = config_.shmSlotBytes;
  so.slots = config_.shmSlots;
  so.spinNs = spin(50'000);
  // Collective: every rank calls it (those alone on a host contribute nothing).
  auto shm = transport::ShmTransport::create(*bootstrap_, wantShm ? local : std::vector<int>{rank_}, so,
                                             deadline);
  transport::TcpTransport::Options to;
  to.memoryCopy = kernelsCopy;
  to.chunkBytes = config_.tcpChunkBytes;
  to.lanes = config_.socketsPerPeer;
  to.socketBufferBytes = config_.tcpSocketBufferBytes;
  to.spinNs = spin(20'000);
  // TCP data over the NIC the topology gave this rank, not the bootstrap's;
  // the bootstrap decides whether it can (not with GYRE_SOCKET_IFNAME set).
  // Collective: every rank calls it.
  bootstrap_->openDataListener(topo.nicInterface, deadline);
  auto tcp = std::make_unique<transport::TcpTransport>(*bootstrap_, to);

  connections_ = std::make_unique<transport::ConnectionManager>(rank_, nranks_);
  connections_->add(std::move(shm), 20, shmOff);
  connections_->add(std::move(tcp), 10, tcpOff);
  // An NCCL net plugin when one is named: across hosts it goes before TCP
  // (as NCCL's NET before its sockets); a plugin that cannot be used says
  // why on every rank and the others carry on.
  if (config_.transport == TransportChoice::Net && config_.netPlugin.empty())
    throwError(gyreInvalidArgument, "GYRE_TRANSPORT=net needs GYRE_NET_PLUGIN (a plugin's path or name)");
  if (!config_.netPlugin.empty()) {
    transport::NetTransport::Options no;
    no.plugin = config_.netPlugin;
    no.device = config_.netDevice;
    no.memoryCopy = kernelsCopy;
    no.spinNs = spin(20'000);
    const bool netOff = !anyOf && config_.transport != TransportChoice::Net;
    connections_->add(transport::NetTransport::create(*bootstrap_, no, deadline), 15,
                      netOff ? forced : netNamed ? netForced : "");
  }
  // Priorities: as forced (GYRE_TRANSPORT), above shared memory, for every
  // peer; as the network (GYRE_NET_TRANSPORT), below it, for other hosts.
  const int ucxPriority = net == TransportChoice::Ucx ? 15 : 30;
  const int verbsPriority = net == TransportChoice::Verbs ? 15 : 30;
  // UCX only when asked for (GYRE_TRANSPORT=ucx, or GYRE_NET_TRANSPORT=ucx
  // between hosts): its creation is collective and costs a worker per
  // communicator; on this host's wires (tcp, shared memory) it does not beat
  // the built-in transports (PERFORMANCE-transports.md).
  if (config_.transport == TransportChoice::Ucx || net == TransportChoice::Ucx) {
#ifdef GYRE_HAVE_UCX
    transport::UcxTransport::Options uo;
    uo.memoryCopy = kernelsCopy;
    uo.socketBufferBytes = config_.tcpSocketBufferBytes;
    uo.spinNs = spin(20'000);
    uo.errorMode = config_.ucxErrorMode;
    connections_->add(transport::UcxTransport::create(*bootstrap_, uo, deadline), ucxPriority);
#else
    throwError(gyreInvalidArgument, (net == TransportChoice::Ucx ? netForced : forced) +
                                        ", but this gyre was built without UCX (libucx-dev)");
#endif
  }
  // Verbs likewise only when asked for (GYRE_TRANSPORT=verbs or
  // GYRE_NET_TRANSPORT=verbs): creation is
  // collective and brings up a queue pair to every peer. A rank where it
  // cannot start (no device, GYRE_IB_HCA matching none, a GID that does not
  // connect) says why, and the connection manager's error names it on every rank.
  if (config_.transport == TransportChoice::Verbs || net == TransportChoice::Verbs) {
#ifdef GYRE_HAVE_VERBS
    transport::VerbsTransport::Options vo;
    vo.memoryCopy = kernelsCopy;
    vo.spinNs = spin(20'000);
    vo.hca = config_.ibHca;
    vo.gidIndex = config_.ibGidIndex;
    vo.qpsPerPeer = config_.ibQpsPerConnection;
    connections_->add(transport::VerbsTransport::create(*bootstrap_, vo, deadline), verbsPriority);
#else
    throwError(gyreInvalidArgument, (net == TransportChoice::Verbs ? netForced : forced) +
                                        ", but this gyre was built without RDMA verbs (libibverbs-dev)");
#endif
  }
  connections_->choose([&](int peer) { return bootstrap_->describe(peer); });
  canReadPeers_ = connections_->everyPeerCan(transport::kPeerRead);
  localReads_ = canReadPeers_ && connections_->everyPeerCan(transport::kSameHostOnly);
  deviceMessages_ = connections_->everyPeerCan(transport::kDeviceMessages);
  // Some peer does not report failures through a transport: reports come
  // through the bootstrap's listener, which a call's start must then poll.
  networkReports_ = nranks_ > 1 && !connections_->everyPeerCan(transport::kReportsFailures);
  GYRE_INFO("rank %d: %zu rank(s) on this host, transport %s (%s)%s", rank_, local.size(),
            transportName(config_.transport), connections_->describeChoices().c_str(),
            oversubscribed ? ", oversubscribed: no spin, yield first" : "");
}

transport::Connection& Communicator::connection(int peer) { return *connections_->connection(peer); }

void Communicator::checkUsable() const {
  if (failedCode_.load() == gyreSuccess) return;
  std::lock_guard<std::mutex> lock(failMu_);
  throwError(gyreInvalidUsage,
             "the communicator failed earlier and can only be destroyed: " + failedMessage_);
}

bool Communicator::progressAll(transport::ReadAhead whenBlocked) { return connections_->progress(whenBlocked); }

void Communicator::checkHealth(std::span<const WaitItem> awaited, bool inWait) {
  if (abortRequested_.load()) throw PeerFailure(gyreInvalidUsage, rank_, stoppedSentence());
  // Reports from failed peers first: they name where the failure began. A
  // peer that reported and then exited must not be blamed for it. The
  // notices first: they say more than the shared-memory flag (a stall's
  // report names what its rank waited on).
  if (auto n = bootstrap_->pollAbortNotice()) {
    // Another rank's wait ran out while this one waits too: the same stall.
    // Its report names what it waited on; this rank's adds a link.
    if (n->waitingOn >= 0) {
      if (inWait && !awaited.empty()) throw stalled(awaited, &*n);
      // A connection broke under the call's wait (the stalled rank gave
      // up): the wait it was in is this rank's link in the chain.
      if (waitPeer_ >= 0)
        throw stalledOn(waitPeer_, (waitForData_ ? "data from " : "room at ") + bootstrap_->describe(waitPeer_), &*n);
      throw stallSeenFromOutside(*n);
    }
    throw reported(*n);
  }
  if (auto a = connections_->peerReport()) throw PeerFailure(gyreRemoteError, a->origin, a->message);
  // Only the peers we wait on: others may have finished this operation and
  // exited normally; a failure elsewhere reaches us as a report.
  // A dead peer whose messages still wait here unconsumed may have sent
  // all this call needs: the one awaited can queue behind one another lane
  // holds (seen with chain reduce over shared memory, its first rank done
  // and gone while the second waited for room further down the chain).
  for (const WaitItem& w : awaited) {
    const int peer = w.conn->peer();
    if (!bootstrap_->liveness().isDead(peer)) continue;
    if (w.what == Waiting::ForData && w.conn->hasUnreadData()) continue;
    if (auto n = bootstrap_->pollAbortNotice()) throw reported(*n);
    throw PeerFailure(gyreRemoteError, peer,
                      bootstrap_->describe(peer) + " exited while this rank waited for " + describeWaits(awaited));
  }
}

void Communicator::checkReports() {
  waitPeer_ = -1;  // a new call: it has waited for nobody yet
  // Local peers raise a flag in shared memory (a load each); others report
  // through the bootstrap listener (a poll(), only when some peer is not
  // local or GYRE_TRANSPORT=tcp).
  if (auto a = connections_->peerReport()) throw fail(PeerFailure(gyreRemoteError, a->origin, a->message));
  if (stallReport_ && callStartNs_ - stallReport_->lastPollNs >= StallReportState::kPollEveryNs)
    answerStallQuestions();
  if (!networkReports_) return;
  // The time itself, not the call's start (read to the tick): a call that
  // needs nothing from its peers (a send that fits in the buffers) fails
  // on a peer's report only here, and a report that came since the last
  // call's start must be seen even when both fell in one tick
  // (mismatch_test's CallMismatchGuarantee). The cycle counter first, a
  // few instructions where the clock is tens (a fifth of a repeated small
  // call's own bookkeeping): a call within the interval of the last look
  // by the counter reads no clock. (A counter that another CPU's trails
  // reads as long ago: the clock decides then.)
  const uint64_t cycles = cycleCount();
  if (cycles - lastReportPollCycles_ < reportPollCycles_) return;
  const int64_t now = nowNs();
  if (now - lastReportPollNs_ < kReportPollEveryNs) return;
  lastReportPollNs_ = now;
  lastReportPollCycles_ = cycles;
  reportPollCycles_ = static_cast<uint64_t>(static_cast<double>(kReportPollEveryNs) / cycleRate_.nsPerCycle());
  if (auto n = bootstrap_->pollAbortNotice()) {
    if (n->waitingOn >= 0) throw fail(stallSeenFromOutside(*n));
    throw fail(reported(*n));
  }
}

std::string Communicator::describeWaits(std::span<const WaitItem> items) const {
  std::string s;
  for (size_t i = 0; i < items.size() && i < 3; ++i) {
    if (i) s += i + 1 == items.size() ? " and " : ", ";
    s += (items[i].what == Waiting::ForData ? "data from " : "room at ") +
         bootstrap_->describe(items[i].conn->peer());
  }
  if (items.size() > 3) s += " and " + std::to_string(items.size() - 3) + " more";
  return s;
}

void Communicator::waitUntil(std::span<const WaitItem> items, FunctionRef<bool()> ready) {
  const int64_t start = nowNs();
  waitStartNs_ = start;
  waitPeer_ = items.front().conn->peer();
  waitForData_ = items.front().what == Waiting::ForData;
  // Block on the transport of what we wait for; when a wait spans both,
  // block on one in short slices so the other is looked at too.
  transport::Transport& t = items.front().conn->transport();
  bool mixed = false;
  int64_t spinNs = 0, transportYieldNs = 0;
  bool forData = false;
  for (const WaitItem& w : items) {
    mixed |= &w.conn->transport() != &t;
    spinNs = std::max(spinNs, w.conn->transport().spinNs());
    transportYieldNs = std::max(transportYieldNs, w.conn->transport().yieldNs());
    forData |= w.what == Waiting::ForData;
  }
  const int64_t yieldNs = yieldNs_ >= 0 ? yieldNs_ : transportYieldNs;
  auto holdingRendezvous = [&](int64_t now) { return forData && now - start < kHeldReadAheadAfterNs; };
  auto readAhead = [&](int64_t now) {
    return holdingRendezvous(now) ? transport::ReadAhead::Arrived : transport::ReadAhead::All;
  };
  // Busy-poll first: most waits end within microseconds.
  for (int64_t now = start; now - start < spinNs; now = nowNs()) {
    for (int i = 0; i < 8; ++i) {
      if (ready()) return;
      _mm_pause();
    }
    progressAll(readAhead(now));
    if (abortRequested_.load(std::memory_order_relaxed)) checkHealth(items);
  }
  // With more ranks than cores, hand the core to a rank that can use it
  // (likely the one we wait for, or one of its neighbours) before sleeping:
  // a yield costs no wake-up latency when we are needed again. Not while
  // bytes are coming in, though (yield_wait.h).
  int64_t lookedNs = start;  // goOn() reads the clock before every look
  auto goOn = [&] {
    lookedNs = nowNs();
    if (abortRequested_.load(std::memory_order_relaxed)) checkHealth(items);
    return lookedNs - start < spinNs + yieldNs;
  };
  if (yieldUntilReady(ready, [&] { return progressAll(readAhead(lookedNs)); }, [] { sched_yield(); }, goOn)) return;
  // Then sleep in slices, checking peers' health between them.
  for (;;) {
    if (ready()) return;
    const int64_t now = nowNs();
    if (now - lastHealthCheckNs_ >= kHealthEveryNs) {
      lastHealthCheckNs_ = now;
      try {
        checkHealth(items);
      } catch (const PeerFailure&) {
        // A peer may publish its last message and exit between our ready()
        // and this check: what it left behind still counts. Look for it a
        // while (only on this failure path) before giving up.
        const int64_t graceEnd = nowNs() + kExitGraceNs;
        do {
          progressAll();
          if (ready()) return;
          sched_yield();
        } while (nowNs() < graceEnd);
        throw;
      }
      if (stallReport_) stallTick(items, now);
    }
    int64_t slice = kBlockSliceNs;
    if (config_.timeoutMs > 0) {
      const int64_t left = config_.timeoutMs * kMs - (now - start);
      if (left <= 0) throw stalled(items, nullptr);
      slice = std::min(slice, left);
    }
    slice = std::min(slice, kHealthEveryNs);
    if (holdingRendezvous(now)) slice = std::min(slice, kHeldReadAheadAfterNs - (now - start));
    progressAll(readAhead(now));
    if (connections_->block(t, mixed, slice, ready)) return;
  }
}

Error Communicator::fail(const Error& cause, int failedPeer, const char* call) {
  // A call that broke because this rank aborted or revoked the communicator
  // (its connections shut under it) failed for that reason, whatever the
  // transport saw.
  if (abortRequested_.load() && !dynamic_cast<const PeerFailure*>(&cause))
    return fail(PeerFailure(gyreInvalidUsage, rank_, stoppedSentence()), failedPeer, call);
  int origin = rank_;
  std::string sentence = cause.what();
  gyreResult_t code = cause.code();
  if (auto* mm = dynamic_cast<const transport::MessageMismatch*>(&cause)) {
    // Name both sides: what the peer's message belongs to, and what this
    // rank's call expected.
    const auto got = collectives::fromTag(collectives::fromWire(mm->got)),
               want = collectives::fromTag(collectives::fromWire(mm->expected));
    sentence = bootstrap_->describe(mm->peer()) + " called " + collectives::describeCall(got, rank_) +
               " while rank " + std::to_string(rank_) + " called " + collectives::describeCall(want, rank_, true);
    if (mm->got == mm->expected)
      sentence += " with a different size (" + std::to_string(mm->gotBytes) + " bytes sent, " +
                  std::to_string(mm->expectedBytes) + " expected)";
    sentence += ": every rank must make the same calls in the same order";
  }
  if (auto* ce = dynamic_cast<const transport::ConnectionError*>(&cause)) {
    failedPeer = ce->peer();
    if (code == gyreRemoteError)
      origin = failedPeer;  // it closed on us, unless a report says otherwise
  }
  if (auto* pf = dynamic_cast<const PeerFailure*>(&cause)) {
    origin = pf->origin();
  } else if (code == gyreRemoteError) {
    // A connection broke. Prefer a precise account: a notice from the rank
    // where the failure began, or a local peer seen exiting.
    try {
      // A connection that broke as it was made is not there to wait on.
      transport::Connection* broken = failedPeer >= 0 ? connections_->connection(failedPeer) : nullptr;
      if (broken) {
        const WaitItem w{broken, Waiting::ForData};
        checkHealth(std::span<const WaitItem>(&w, 1), false);
      } else {
        checkHealth({});
      }
    } catch (const PeerFailure& better) {
      origin = better.origin();
      sentence = better.what();
    }
  }
  // A failure that began elsewhere names where, if its own account does
  // not (a rank's local failure, "the stream failed: ...", reported on).
  if (origin >= 0 && origin != rank_ && sentence.find("rank " + std::to_string(origin)) == std::string::npos)
    sentence = bootstrap_->describe(origin) + " failed: " + sentence;
  const std::string what = call ? std::string(call) : std::string(opName_) + " #" + std::to_string(opSeq_);
  std::string message = what + " failed on rank " + std::to_string(rank_) + ": " + sentence;
  {
    std::lock_guard<std::mutex> lock(failMu_);
    if (failedCode_.load() == gyreSuccess) {
      failedMessage_ = message;
      failedCode_.store(code);
    }
    if (!peersNotified_) {
      peersNotified_ = true;
      connections_->report(origin, sentence);
      if (!stallReported_) bootstrap_->notifyAbort(origin, sentence);  // a stall was told with its wait already
      connections_->shutdown();
    }
  }
  GYRE_WARN("%s", message.c_str());
  return Error(code, message);
}

void Communicator::abort() {
  abortRequested_.store(true);
  if (connections_) connections_->interrupt();  // a call blocked in a transport wakes up
  // The call in progress (if any) sees the flag within a block slice.
  while (activeCalls_.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  // Named apart from the current call: the worker may still be running a
  // device call (not an active call of this thread's), and its name and
  // number are the worker's to write and read (ThreadSanitizer saw the
  // race, DeviceStreams.AnAbortReleasesTheStreamOfAnEnqueuedCall).
  if (failedCode_.load() == gyreSuccess)
    (void)fail(PeerFailure(gyreInvalidUsage, rank_, stoppedSentence()), -1, "communicator");
}

void Communicator::revoke() {
  revoked_.store(true);  // before the flag that stops the calls, so they say why
  abort();
}

std::string Communicator::stoppedSentence() const {
  return "rank " + std::to_string(rank_) +
         (revoked_.load() ? " revoked the communicator (gyreCommRevoke)"
                          : " aborted the communicator (gyreCommAbort)");
}

bool Communicator::sameHost(int peer) const { return bootstrap_->sameHost(peer); }

size_t Communicator::chunkBytes(std::span<const int> peers) {
  bool missing = false;
  for (int p : peers) missing |= p != rank_ && !connections_->connection(p);
  if (missing) {
    try {
      connections_->connect(peers, Deadline::afterMs(config_.timeoutMs));
    } catch (const Error&) {
      // A peer that failed has closed its listener; the account it sent of
      // why (a mismatch, say) names where the failure began.
      checkHealth({});
      throw;
    }
  }
  // One size for the whole communicator, not the listed peers' own: ranks
  // whose neighbours sit behind different links (shared memory for some,
  // TCP for others, with GYRE_SHM_SLOT_BYTES != GYRE_TCP_CHUNK_BYTES) must
  // still cut a vector into the same pieces.
  size_t chunk = commonChunk_;
  for (int p : peers)
    if (p != rank_) chunk = std::min(chunk, connections_->connection(p)->maxMessageBytes());
  return chunk;
}

size_t Communicator::inPlaceMessageBytes(int peer) {
  transport::Connection* c = peer == rank_ ? nullptr : connections_->connection(peer);
  return c && c->can(transport::kLargeInPlace) ? c->maxMessageBytes() : 0;
}

void* Communicator::scratch(size_t bytes) {
  repeat_.valid = false;  // a repeat's arguments point into it
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

// GYRE_DEBUG=INFO: each choice once per (operation, power-of-two size
// class), from rank 0 (every rank makes the same choice).
void Communicator::logChoice(const collectives::CallRequest& req, const char* algo, bool forced) {
  if (rank_ != 0 || !log::enabled(log::Level::Info)) return;
  size_t bytes = req.bytes();
  if (req.sendCounts)  // AllToAllv: everything this rank sends
    bytes = collectives::CallRequest::totalCount(req.sendCounts, nranks_) * req.elemSize;
  if (req.seq) bytes = plan_.inputElems * req.elemSize;  // a sequence exchange: its input
  const int sizeClass = collectives::sizeClassOf(bytes);
  const unsigned key = static_cast<unsigned>(req.desc.kind) * 128 + static_cast<unsigned>(sizeClass);
  if (!loggedChoices_.insert(key).second) return;
  const std::string estimates = collectives::describeEstimates(req, *this);
  GYRE_INFO("%s of %zu bytes (size class %zu-%zu) on %d ranks: %s (%s; model: %s)", opName_, bytes,
            sizeClass ? size_t{1} << (sizeClass - 1) : size_t{0}, sizeClass ? (size_t{1} << sizeClass) - 1 : size_t{0},
            nranks_, algo, forced ? "GYRE_ALGO" : "automatic", estimates.c_str());
}

void Communicator::beginCollective(collectives::CallRequest& req, collectives::OpKind kind) {
  req.desc.seq = ++collSeq_;
  opName_ = collectives::opKindName(kind);
  opSeq_ = req.desc.seq;
  checkReports();
}

void Communicator::runCall(const collectives::CallRequest& req, collectives::CallArgs& args,
                           const collectives::Algorithm* prefer) {
  // (opName_ and opSeq_ are the call's already: beginCollective.)
  try {
    collectives::OnlineTuner::Pick pick;
    if (online_ && !prefer && !req.desc.codec && !req.seq && !overrides_.find(req.desc.kind, req.bytes()))
      pick = online_->pick(req, *this);
    if (prefer) pick.algo = prefer;  // (pick.candidate stays -1: not a trial)
    // A loop of identical calls (the common case) reuses the last plan: only
    // the call number in its tag changes.
    if (!planCache_.matches(req) || planCache_.preferred != prefer ||
        (pick.algo && std::strcmp(pick.algo->name, planCache_.algorithm) != 0)) {
      planCache_.invalidate();
      bool forced = false;
      planCache_.algorithm = collectives::planCall(req, *this, overrides_, plan_, &forced, pick.algo);
      planCache_.remember(req, nranks_);
      planCache_.preferred = prefer;
      planCache_.sends.clear();
      for (const collectives::Step& s : plan_.steps)
        if (sendsToPeer(s)) {
          auto to = std::find_if(planCache_.sends.begin(), planCache_.sends.end(),
                                 [&](const auto& e) { return e.first == s.sendPeer; });
          if (to == planCache_.sends.end()) to = planCache_.sends.insert(to, {s.sendPeer, 0});
          to->second += s.count;
        }
      if (!pick.algo) logChoice(req, planCache_.algorithm, forced);
    }
    const char* algo = planCache_.algorithm;
    plan_.tags.resize(1);  // (already one tag, for a plan reused: nothing to do)
    plan_.tags[0] = collectives::makeTag(req.desc);
    if (plan_.scratchElems) {
      const size_t bytes = plan_.scratchElems * req.elemSize;
      args.scratch = args.engine ? args.engine->scratch(bytes) : scratch(bytes);
    } else {
      args.scratch = nullptr;
    }
    if (traceSteps_) {
      traceSteps_->beginPlan(args.elemSize);
      args.stepObserver = traceSteps_.get();
    }
    GYRE_TRACE("%s #%llu: %s, %zu steps", opName_, static_cast<unsigned long long>(opSeq_), algo,
               plan_.steps.size());
    if (pick.candidate < 0) {
      collectives::execute(plan_, args, *this);
    } else {  // a trial: timed
      const int64_t t0 = nowNs();
      collectives::execute(plan_, args, *this);
      if (online_->record(pick, double(nowNs() - t0) / 1e3)) settleOnline(pick, req);
    }
    countPlannedSends(req.elemSize);
  } catch (const Error& e) {
    throw fail(e);
  }
}

void Communicator::settleOnline(const collectives::OnlineTuner::Pick& pick, const collectives::CallRequest& call) {
  std::vector<double> times = online_->localMedians(pick);
  collectives::CallRequest req;
  req.desc.kind = collectives::OpKind::AllReduce;
  req.desc.dtype = static_cast<uint8_t>(gyreFloat64);
  req.desc.redop = static_cast<uint8_t>(gyreMax);
  req.desc.count = times.size();
  req.desc.seq = ++collSeq_;  // a collective call like any other: every rank makes it here
  req.elemSize = sizeof(double);
  req.inPlace = true;
  collectives::CallArgs args;
  args.dtype = kernels::DType::Float64;
  args.elemSize = sizeof(double);
  args.op = kernels::Op::Max;
  args.input = args.output = times.data();
  collectives::Plan plan;  // plan_ stays the user's call's
  collectives::planCall(req, *this, collectives::AlgoOverrides(), plan);
  plan.tags.assign(1, collectives::makeTag(req.desc));
  args.scratch = plan.scratchElems ? scratch(plan.scratchElems * req.elemSize) : nullptr;
  collectives::execute(plan, args, *this);
  const std::string line = online_->settle(pick, times);
  // INFO the first time per class, TRACE when it is measured again.
  const bool first = loggedChoices_.insert(static_cast<unsigned>(pick.key) | 0x80000000u).second;
  const log::Level level = first ? log::Level::Info : log::Level::Trace;
  if (rank_ == 0 && log::enabled(level))
    log::write(level, "%s of %zu bytes on %d ranks%s: %s", opName_, call.bytes(),
             nranks_, call.inPlace ? " (in place)" : "", line.c_str());
}

}  // namespace gyre::core
