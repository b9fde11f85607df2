#include "transport/verbs/verbs_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "transport/agreement.h"
#include "transport/verbs/verbs_connection.h"

namespace gyre::transport {

namespace {

using verbs_wire::PortAddress;
using verbs_wire::QpInfo;

// How long the end of a communicator waits for its last sends to be taken.
constexpr int64_t kFlushMs = 10000;
// How long a rank waits to hear each peer's hello over its queue pair
// (emulated RDMA answers in milliseconds).
constexpr int64_t kHelloMs = 10'000;

// A rank's part of the first exchange: why verbs did not start there (empty:
// it did) and how its port is addressed; a QpInfo per rank follows it.
struct Opened {
  char why[232] = {};
  PortAddress port;
};
// The second: why a queue pair did not come up (empty: all did).
template <size_t N>
void setWhy(char (&dst)[N], const std::string& why) {
  std::snprintf(dst, N, "%s", why.c_str());
}

}  // namespace

std::string VerbsTransport::open() {
  HcaFilter filter;
  try {
    filter = parseHcaFilter(options_.hca);
  } catch (const Error& e) {
    return e.what();
  }
  std::string why;
  device_ = VerbsDevice::open(filter, options_.gidIndex, &why);
  if (!device_) return why;
  channel_ = ibv_create_comp_channel(device_->context());
  if (!channel_) return "ibv_create_comp_channel failed: " + std::string(std::strerror(errno));
  const int flags = fcntl(channel_->fd, F_GETFL);
  fcntl(channel_->fd, F_SETFL,
        flags | O_NONBLOCK);  // a wake-up that was taken already must not block
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) return "eventfd failed: " + std::string(std::strerror(errno));
  // Every queue pair's sends and receives can be outstanding at once.
  // (The queue pairs that only read: their reads, and a receive.)
  const size_t perPeer = 3 * static_cast<size_t>(options_.slots) + 40 +
                         (VerbsConnection::kReadQueueDepth + 1) * static_cast<size_t>(options_.qpsPerPeer - 1);
  const int entries =
      static_cast<int>(std::min<size_t>(perPeer * static_cast<size_t>(std::max(nranks_ - 1, 1)),
                                        static_cast<size_t>(device_->maxCqEntries())));
  cq_ = ibv_create_cq(device_->context(), entries, nullptr, channel_, 0);
  if (!cq_)
    return "ibv_create_cq of " + std::to_string(entries) +
           " entries failed: " + std::strerror(errno);
  peers_.resize(static_cast<size_t>(nranks_));
  try {
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_) peers_[static_cast<size_t>(p)] = std::make_unique<VerbsConnection>(*this, p);
  } catch (const Error& e) {
    return device_->describe() + ": " + e.what();
  }
  return {};
}

std::string VerbsTransport::bringUp(const std::vector<uint8_t>& table, size_t stride) {
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const uint8_t* theirs = table.data() + stride * static_cast<size_t>(p);
    Opened o;
    std::memcpy(&o, theirs, sizeof o);
    const size_t qps = static_cast<size_t>(options_.qpsPerPeer);
    std::vector<QpInfo> q(qps);  // the peer's queue pairs for this rank
    std::memcpy(q.data(), theirs + sizeof(Opened) + sizeof(QpInfo) * qps * static_cast<size_t>(rank_),
                sizeof(QpInfo) * qps);
    try {
      peers_[static_cast<size_t>(p)]->bringUp(q, o.port);
    } catch (const Error& e) {
      return device_->describe() + ": " + e.what();
    }
  }
  return {};
}

std::string VerbsTransport::hello(Deadline deadline) {
  for (auto& c : peers_)
    if (c) c->sayHello();
  const Deadline d = deadline.remainingNs() < kHelloMs * 1'000'000 ? deadline : Deadline::afterMs(kHelloMs);
  auto unheard = [&]() -> VerbsConnection* {
    for (auto& c : peers_)
      if (c && !c->heard()) return c.get();
    return nullptr;
  };
  while (VerbsConnection* c = unheard()) {
    if (c->failed())
      return device_->describe() + ": the hello to " + describePeer(c->peer()) + " failed: " + c->failure();
    if (d.expired())
      return device_->describe() + " heard nothing from " + describePeer(c->peer()) +
             " over its queue pair to " + c->peerAddress() + " in " + std::to_string(kHelloMs / 1000) +
             " s: is that address reachable from here? (GYRE_IB_GID_INDEX picks another GID, "
             "GYRE_IB_HCA another device)";
    block(1'000'000, [&] { return unheard() == nullptr; });
  }
  return {};
}

std::unique_ptr<VerbsTransport> VerbsTransport::create(bootstrap::Bootstrap& bs,
                                                       const Options& options, Deadline deadline) {
  std::unique_ptr<VerbsTransport> t(new VerbsTransport());
  t->options_ = options;
  t->options_.qpsPerPeer = std::clamp(options.qpsPerPeer, 1, 16);
  t->bootstrap_ = &bs;
  t->rank_ = bs.rank();
  t->nranks_ = bs.nranks();
  const size_t n = static_cast<size_t>(bs.nranks());
  const size_t me = static_cast<size_t>(bs.rank());

  // First exchange: every rank's port address and, for each peer, the queue
  // pair and ring it made for that peer.
  const std::string why = t->open();
  // The ranks' settings agree (the communicator compared them), so every
  // rank's part has the same size.
  const size_t qps = static_cast<size_t>(t->options_.qpsPerPeer);
  const size_t stride = sizeof(Opened) + sizeof(QpInfo) * n * qps;
  std::vector<uint8_t> table(stride * n, 0);
  {
    Opened o;
    setWhy(o.why, why);
    if (why.empty()) {
      const VerbsDevice& d = *t->device_;
      std::memcpy(o.port.gid, options.advertisedGid ? options.advertisedGid->data() : d.gid().raw, 16);
      o.port.lid = d.lid();
      o.port.mtu = static_cast<uint8_t>(d.mtu());
      o.port.ethernet = d.ethernet();
      for (size_t p = 0; p < n; ++p)
        for (size_t k = 0; p != me && k < qps; ++k) {
          const QpInfo q = t->peers_[p]->localInfo(static_cast<int>(k));
          std::memcpy(table.data() + stride * me + sizeof(Opened) + sizeof(QpInfo) * (p * qps + k), &q,
                      sizeof q);
        }
    }
    std::memcpy(table.data() + stride * me, &o, sizeof o);
  }
  bs.allGather(table.data(), stride, deadline);
  auto firstWhy = [&](const uint8_t* base, size_t step, size_t whyBytes) {
    for (size_t r = 0; r < n; ++r) {
      const char* w = reinterpret_cast<const char*>(base + step * r);
      if (w[0])
        return bs.describe(static_cast<int>(r)) + ": " + std::string(w, strnlen(w, whyBytes));
    }
    return std::string();
  };
  // Each stage's outcome, the same on every rank: true (and logged) when it
  // leaves verbs unusable.
  auto unusable = [&](std::string reason) {
    t->unusable_ = std::move(reason);
    if (!t->unusable_.empty()) GYRE_INFO("rank %d: verbs unusable (%s)", bs.rank(), t->unusable_.c_str());
    return !t->unusable_.empty();
  };
  if (unusable(firstWhy(table.data(), stride, sizeof(Opened::why)))) return t;

  // Second: every queue pair up, and every rank knows it before anyone
  // sends (a message to a queue pair not yet ready to receive is dropped).
  if (unusable(firstRankUnable(bs, t->bringUp(table, stride), deadline))) return t;
  // Third: every peer heard over its queue pair, or no rank uses verbs.
  for (auto& c : t->peers_)
    if (c)
      for (uint32_t qpn : c->qpNumbers()) t->byQp_[qpn] = c.get();
  if (unusable(firstRankUnable(bs, t->hello(deadline), deadline))) return t;
  t->handedOut_.assign(n, false);
  GYRE_INFO("rank %d: verbs ready on %s, %zu peers x %zu queue pairs", bs.rank(),
            t->device_->describe().c_str(), n - 1, qps);
  return t;
}

VerbsTransport::~VerbsTransport() {
  // What was sent must reach the peers first: an eager send is complete for
  // its caller once copied, and a peer still reads our rendezvous buffers
  // and waits for our FINs and credits.
  if (unusable_.empty() && cq_) {
    const Deadline d = Deadline::afterMs(kFlushMs);
    for (bool busy = true; busy && !d.expired();) {
      poll();
      busy = false;
      for (auto& c : peers_)
        if (c && c->flushing()) busy = true;
    }
  }
  peers_.clear();  // queue pairs before the completion queue
  if (cq_) ibv_destroy_cq(cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (wakeFd_ >= 0) ::close(wakeFd_);
  device_.reset();
}

bool VerbsTransport::canConnect(int peer, std::string* whyNot) const {
  return reachable(unusable_.empty() ? "" : "unusable: " + unusable_, rank_, nranks_, peer, whyNot);
}

void VerbsTransport::connect(std::span<const int> peers, Deadline) {
  for (int p : peers) {
    std::string why;
    if (p == rank_) continue;
    if (!canConnect(p, &why))
      throwError(gyreInternalError, "verbs: cannot connect rank " + std::to_string(p) + ": " + why);
    handedOut_[static_cast<size_t>(p)] = true;  // its queue pair has been up since creation
  }
}

Connection* VerbsTransport::connection(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= handedOut_.size() ||
      !handedOut_[static_cast<size_t>(peer)])
    return nullptr;
  return peers_[static_cast<size_t>(peer)].get();
}

bool VerbsTransport::poll() {
  if (!cq_) return false;
  bool any = false;
  ibv_wc wc[32];
  for (;;) {
    const int got = ibv_poll_cq(cq_, 32, wc);
    if (got <= 0) break;
    any = true;
    for (int i = 0; i < got; ++i) {
      auto it = byQp_.find(wc[i].qp_num);
      if (it != byQp_.end()) it->second->onCompletion(wc[i]);
    }
  }
  return any;
}

bool VerbsTransport::block(int64_t timeoutNs, FunctionRef<bool()> ready) {
  if (!cq_) return ready();
  if (poll()) return ready();
  // Armed, then the last look: a completion after the arm wakes the poll.
  ibv_req_notify_cq(cq_, 0);
  if (poll()) return ready();
  // ready() once only: one that returns true has completed its operation
  // (a receive took its message), and a second call would start the next
  // (calling it again here lost the message a waiting receive had just
  // taken: the conformance case of a receive that waits ahead hung).
  if (ready()) return true;
  pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
  ::poll(fds, 2, static_cast<int>((timeoutNs + 999'999) / 1'000'000));
  if (fds[0].revents & POLLIN) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
  }
  if (fds[1].revents & POLLIN) {
    uint64_t v;
    if (::read(wakeFd_, &v, sizeof v) < 0) { /* taken by another waiter: the wake happened */
    }
  }
  return false;
}

bool VerbsTransport::hasPendingOutput() const {
  for (const auto& c : peers_)
    if (c && c->hasQueuedOutput()) return true;
  return false;
}

void VerbsTransport::shutdown() {
  for (auto& c : peers_)
    if (c) c->close("the connection was shut down");
}

void VerbsTransport::interrupt() {
  if (wakeFd_ < 0) return;
  const uint64_t one = 1;
  if (::write(wakeFd_, &one, sizeof one) < 0) { /* the counter is full: a wake is pending anyway */
  }
}

}  // namespace gyre::transport
