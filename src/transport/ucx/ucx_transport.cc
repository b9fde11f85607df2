#include "transport/ucx/ucx_transport.h"

#include <poll.h>
#include <ucm/api/ucm.h>

#include <cstdlib>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "base/log.h"
#include "transport/agreement.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_teardown_log.h"
#include "transport/ucx/ucx_wires.h"

namespace gyre::transport {

namespace {

// How long the end of a communicator waits for its sends to be taken.
constexpr int64_t kFlushMs = 10000;

// What every rank tells the others at creation: its worker address's length
// (0: UCX did not start here) and, if not, why.
struct Started {
  uint64_t addressBytes = 0;
  uint64_t overSockets = 0;  // no RDMA for UCX on this rank's host
  uint64_t largeInPlace = 0;  // its large messages land in place (ucx_wires::largeMessagesInPlace)
  uint64_t sharedMemory = 0;  // UCX may reach this host's peers through shared memory
  char why[120] = {};
};

// RDMA devices on this host, as the kernel lists them (none: UCX can only
// use tcp and shared memory here).
int rdmaDevices() {
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it("/sys/class/infiniband", ec), end; !ec && it != end; it.increment(ec))
    ++n;
  return n;
}

}  // namespace

std::unique_ptr<UcxTransport> UcxTransport::create(bootstrap::Bootstrap& bs, const Options& options,
                                                   Deadline deadline) {
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  t->options_ = options;
  t->rank_ = bs.rank();
  t->nranks_ = bs.nranks();
  // UCX's memory-event hooks (UCM) hung ucp_init here in its registration
  // cache's setup, every time; gyre registers no memory through UCX yet, so
  // they are off unless the user asks for them (UCX_MEM_EVENTS).
  if (!std::getenv("UCX_MEM_EVENTS")) {
    ucm_global_config_t o = ucm_global_opts;  // UCX 1.13 has no getter
    o.enable_events = 0;
    ucm_set_global_opts(&o);
  }
  std::string why;
  ucp_address_t* address = nullptr;
  size_t addressBytes = 0;
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  const bool noRdma = !ucx_wires::mayUseRdma(std::getenv("UCX_TLS"), rdmaDevices());
  t->peerErrors_ = ucx_wires::peerErrorHandling(options.errorMode, !noRdma);
  // Without RDMA, UCX's rendezvous costs a round trip per message and, with
  // peer error handling, saves no copy: pieces go eager unless the user
  // says otherwise (up to 512 KiB where it is zero-copy: ucx_wires.h).
  if (s == UCS_OK && !std::getenv("UCX_RNDV_THRESH") && noRdma) {
    const bool zeroCopy = !t->peerErrors_;
    s = ucp_config_modify(config, "RNDV_THRESH", ucx_wires::rendezvousThreshold(zeroCopy));
    if (s == UCS_OK) {
      GYRE_INFO("rank %d: ucx: no RDMA here, messages up to %s eager (UCX_RNDV_THRESH sets it)", bs.rank(),
                ucx_wires::rendezvousThreshold(zeroCopy));
      // All eager, then: a piece goes as one message with its header (two
      // parts were a message, a probe and a receive more per piece: 2 ranks,
      // 32-256 KiB 1.1-1.6x faster as one).
      t->options_.onePartBytes = ucx_wires::onePartBytes(zeroCopy);
    }
  }
  // UCX's tcp reads a socket into a 64 KiB segment per look: with both
  // ranks of a pair sending large messages at once, each drained the other
  // too slowly and the exchange ran one way at a time (2 ranks, AllToAll
  // 16 MiB 1.2-1.4x faster with 512 KiB, docs/PERFORMANCE-transports.md).
  // Segments come from a pool and go back once read; the send side's must
  // not be larger, so neither is touched when the user set one. A name UCP
  // does not know goes to every UCX transport's table without its prefix:
  // "RX_SEG_SIZE" is tcp's (UCX_TCP_RX_SEG_SIZE), and no other has it (set
  // where UCX opened no tcp, it made every worker's start warn).
  const bool tcp = ucx_wires::mayUseTcp(std::getenv("UCX_TLS"));
  if (s == UCS_OK && tcp && !std::getenv("UCX_TCP_RX_SEG_SIZE") && !std::getenv("UCX_TCP_TX_SEG_SIZE"))
    s = ucp_config_modify(config, "RX_SEG_SIZE", ucx_wires::kTcpReceiveSegment);
  // The kernel's autotuned socket buffers start small: a 256 KiB message
  // waited for its receiver to drain it several times over, and a 2-rank
  // AllToAll of 1 MiB took 1.4x the time it takes with the buffers gyre's
  // own TCP asks for (docs/PERFORMANCE-transports.md).
  const std::string buffer =
      ucx_wires::tcpSocketBuffer(options.socketBufferBytes, std::getenv("UCX_TCP_SNDBUF"), std::getenv("UCX_TCP_RCVBUF"));
  if (s == UCS_OK && tcp && !buffer.empty()) {
    s = ucp_config_modify(config, "SNDBUF", buffer.c_str());
    if (s == UCS_OK) s = ucp_config_modify(config, "RCVBUF", buffer.c_str());
  }
  if (s == UCS_OK) {
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
    s = ucp_init(&p, config, &t->context_);
    ucp_config_release(config);
  }
  if (s == UCS_OK) {
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // One thread at a time drives it; gyreCommAbort signals it from another.
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    s = ucp_worker_create(t->context_, &wp, &t->worker_);
  }
  if (s == UCS_OK) s = ucp_worker_get_efd(t->worker_, &t->eventFd_);
  if (s == UCS_OK) s = ucp_worker_get_address(t->worker_, &address, &addressBytes);
  if (s != UCS_OK) why = std::string("UCX did not start: ") + ucs_status_string(s);
  if (s == UCS_OK && static_cast<uint64_t>(bs.nranks()) > kMaxRanks)
    why = "gyre's UCX tags hold at most " + std::to_string(kMaxRanks) + " ranks";

  std::vector<Started> started(static_cast<size_t>(bs.nranks()));
  Started& mine = started[static_cast<size_t>(bs.rank())];
  mine.addressBytes = why.empty() ? addressBytes : 0;
  mine.overSockets = noRdma;
  mine.largeInPlace = ucx_wires::largeMessagesInPlace(options.errorMode, !noRdma);
  mine.sharedMemory = !t->peerErrors_ && ucx_wires::mayUseSharedMemory(std::getenv("UCX_TLS"));
  std::snprintf(mine.why, sizeof(mine.why), "%s", why.c_str());
  bs.allGather(started.data(), sizeof(Started), deadline);
  size_t longest = 0;
  // Over sockets (kMessageSyscalls, which the tuner reads) only where every
  // rank's UCX is: the ranks' plans must agree, and hosts may differ.
  t->overSockets_ = true;
  t->largeInPlace_ = true;
  t->localSharedMemory_ = true;
  for (int r = 0; r < bs.nranks(); ++r) {
    const Started& x = started[static_cast<size_t>(r)];
    t->overSockets_ = t->overSockets_ && x.overSockets;
    t->largeInPlace_ = t->largeInPlace_ && x.largeInPlace;
    t->localSharedMemory_ = t->localSharedMemory_ && x.sharedMemory;
    if (x.addressBytes == 0 && t->unusable_.empty())
      t->unusable_ = bs.describe(r) + ": " + std::string(x.why, strnlen(x.why, sizeof(x.why)));
    longest = std::max<size_t>(longest, x.addressBytes);
  }
  // Every rank takes part in the second exchange too (the bootstrap's
  // collectives must match), with an empty address where there is none.
  std::vector<uint8_t> all(longest * static_cast<size_t>(bs.nranks()), 0);
  if (address) std::memcpy(all.data() + longest * static_cast<size_t>(bs.rank()), address, addressBytes);
  if (address) ucp_worker_release_address(t->worker_, address);
  if (longest) bs.allGather(all.data(), longest, deadline);
  if (!t->unusable_.empty()) {
    GYRE_INFO("rank %d: ucx unusable (%s)", bs.rank(), t->unusable_.c_str());
    return t;
  }
  t->addresses_.resize(static_cast<size_t>(bs.nranks()));
  for (int r = 0; r < bs.nranks(); ++r) {
    const uint8_t* a = all.data() + longest * static_cast<size_t>(r);
    t->addresses_[static_cast<size_t>(r)].assign(a, a + started[static_cast<size_t>(r)].addressBytes);
  }
  t->connections_.resize(static_cast<size_t>(bs.nranks()));
  t->describe_ = [&bs](int peer) { return bs.describe(peer); };
  t->bootstrap_ = &bs;
  // Over UCX's shared memory an endpoint attaches the peer's segment as it
  // is made, which fails once the peer's worker is gone: a peer that sent
  // its last messages and left before this rank's first look at it (made
  // on first use) would leave those messages unreadable behind a failed
  // connection. The peers of this host are connected now, and nobody goes
  // on before all have been (over tcp and RDMA an endpoint connects later,
  // on its first send, and a gone peer's messages are still received).
  if (t->localSharedMemory_) {
    std::vector<int> local;
    for (int r = 0; r < bs.nranks(); ++r)
      if (r != bs.rank() && bs.sameHost(r)) local.push_back(r);
    t->connect(local, deadline);
    bs.barrier(deadline);
  }
  GYRE_INFO("rank %d: ucx worker ready (%zu-byte address; %s)", bs.rank(), addressBytes,
            t->peerErrors_ ? "UCX reports dead peers" : "no UCX error handling: gyre's own failure detection");
  return t;
}

UcxTransport::~UcxTransport() {
  // What was sent must reach the peers first: a rendezvous needs this side
  // until the peer has taken the data (a peer that went away ends it).
  const Deadline d = Deadline::afterMs(kFlushMs);
  for (bool inFlight = true; inFlight && !d.expired();) {
    if (worker_) ucp_worker_progress(worker_);
    inFlight = false;
    for (auto& c : connections_) inFlight |= c && c->sendsInFlight();
  }
  {
    UcxTeardownLog quiet;  // a flush toward a peer that already left is no error
    for (auto& c : connections_)
      if (c) c->close(/*force=*/d.expired());
    connections_.clear();  // the endpoints are closed while the worker lives
    if (worker_) ucp_worker_destroy(worker_);
    worker_ = nullptr;
    if (quiet.flushErrors() > 0)
      GYRE_INFO("rank %d: ucx: %d flush error(s) at close, as a flush toward a peer that has left ends",
                rank(), quiet.flushErrors());
  }
  for (auto& f : deferredFrees_) f();
  if (context_) ucp_cleanup(context_);
}

uint8_t* UcxTransport::overflow() {
  if (!overflow_) overflow_.reset(new uint8_t[ucx_wires::kTcpOnePartBytes]);
  return overflow_.get();
}

Capabilities UcxTransport::capabilitiesToward(int peer) const {
  Capabilities caps = capabilities();
  // (Ranks that only pretend to be on other hosts, GYRE_HOSTID or network
  // namespaces, are one machine to UCX: its shared memory joins them where
  // gyre counts system calls. The plans still agree, which is what matters.)
  if (localSharedMemory_ && bootstrap_ && bootstrap_->sameHost(peer)) caps &= ~Capabilities{kMessageSyscalls};
  return caps;
}

bool UcxTransport::canConnect(int peer, std::string* whyNot) const {
  return reachable(unusable_, rank_, nranks_, peer, whyNot);
}

void UcxTransport::connect(std::span<const int> peers, Deadline deadline) {
  for (int p : peers) {
    std::string why;
    if (p == rank_ || connections_[static_cast<size_t>(p)]) continue;
    if (!canConnect(p, &why)) throwError(gyreInternalError, "ucx: cannot connect rank " + std::to_string(p) + ": " + why);
    // Without UCX's error handling its endpoints say nothing of a dead peer:
    // the bootstrap watches it (its process on this host, a connection of
    // its own to a peer on another). An endpoint of UCX's that asked for
    // peer failure handling and carried one message each way, as the watch,
    // missed a peer killed on another host in 1 run of 5-8 (more under
    // load), also with UCX's keepalive every 200 ms.
    if (!peerErrors_) bootstrap_->watchPeer(p, deadline);
    connections_[static_cast<size_t>(p)] =
        std::make_unique<UcxConnection>(*this, p, describe_(p), addresses_[static_cast<size_t>(p)].data());
  }
}

Connection* UcxTransport::connection(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= connections_.size()) return nullptr;
  return connections_[static_cast<size_t>(peer)].get();
}

bool UcxTransport::block(int64_t timeoutNs, FunctionRef<bool()> ready) {
  if (!worker_) return ready();
  if (progressWorker()) return ready();
  // Armed, then the last look: an event after the arm wakes the poll.
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return ready();
  if (ready()) return true;
  pollfd fd{eventFd_, POLLIN, 0};
  ::poll(&fd, 1, static_cast<int>((timeoutNs + 999'999) / 1'000'000));
  return false;
}

bool UcxTransport::hasPendingOutput() const {
  for (const auto& c : connections_)
    if (c && c->hasQueuedOutput()) return true;
  return false;
}

void UcxTransport::shutdown() {
  for (auto& c : connections_)
    if (c) c->close();
}

void UcxTransport::interrupt() {
  if (worker_) ucp_worker_signal(worker_);
}

}  // namespace gyre::transport
