#include "transport/net/net_transport.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "transport/agreement.h"
#include "transport/net/net_connection.h"

namespace gyre::transport {

namespace {

// The smallest payload a plugin must carry in one message for gyre to use it.
constexpr size_t kMinPieceBytes = 4096;
constexpr uint32_t kHelloMagic = 0x47594e48;  // "GYNH"

// The first message on a send comm: who sent it.
struct Hello {
  uint32_t magic;
  int32_t rank;
};

}  // namespace

// An accepted comm whose first message has not said who it is from.
struct NetTransport::Arrival {
  void* comm = nullptr;
  Hello hello{};
  void* mhandle = nullptr;
  void* request = nullptr;
};

std::string NetTransport::open(bootstrap::Bootstrap& bs) {
  try {
    plugin_ = NetPlugin::load(options_.plugin);
  } catch (const Error& e) {
    return e.what();
  }
  const std::string who = "GYRE_NET_PLUGIN=" + options_.plugin + " (" + plugin_->describe() + ")";
  try {
    const int n = plugin_->devices();
    if (n <= 0) return who + " reports no network devices";
    if (options_.device >= n)
      return "GYRE_NET_DEVICE=" + std::to_string(options_.device) + ", but " + who + " has " + std::to_string(n) +
             " device(s)";
    if (options_.device >= 0) {
      device_ = options_.device;
    } else {
      // Ranks of one host spread over its devices.
      int local = 0;
      for (int r = 0; r < rank_; ++r) local += bs.peers()[r].hostHash == bs.peers()[rank_].hostHash;
      device_ = local % n;
    }
    const NetDeviceProperties p = plugin_->properties(device_);
    const std::string dev = "device " + std::to_string(device_) + " (" + p.name + ")";
    if (!(p.ptrSupport & netabi::kPtrHost))
      return who + ": " + dev + " cannot send from host memory (ptrSupport " + std::to_string(p.ptrSupport) + ")";
    const int needed = 2 * (nranks_ - 1);  // a send and a receive comm per peer
    if (p.maxComms > 0 && p.maxComms < needed)
      return who + ": " + dev + " allows " + std::to_string(p.maxComms) + " comms; this communicator of " +
             std::to_string(nranks_) + " ranks needs " + std::to_string(needed);
    size_t piece = options_.pieceBytes;
    if (p.maxTransferBytes > 0) {
      if (p.maxTransferBytes < sizeof(uint64_t) * 4 + kMinPieceBytes)
        return who + ": " + dev + " carries at most " + std::to_string(p.maxTransferBytes) +
               " bytes per message; gyre needs at least " + std::to_string(32 + kMinPieceBytes);
      piece = std::min(piece, (p.maxTransferBytes - 32) / kMinPieceBytes * kMinPieceBytes);
    }
    pieceBytes_ = piece;
    std::vector<uint8_t> handle(netabi::kHandleMaxBytes, 0);
    listenComm_ = plugin_->listen(device_, handle.data());
    handles_.assign(static_cast<size_t>(nranks_), {});
    handles_[static_cast<size_t>(rank_)] = handle;
    description_ = plugin_->describe() + " " + dev;
  } catch (const Error& e) {
    return who + ": " + e.what();
  }
  return "";
}

std::unique_ptr<NetTransport> NetTransport::create(bootstrap::Bootstrap& bs, const Options& options,
                                                   Deadline deadline) {
  std::unique_ptr<NetTransport> t(new NetTransport());
  t->options_ = options;
  t->rank_ = bs.rank();
  t->nranks_ = bs.nranks();
  t->bootstrap_ = &bs;
  const std::string why = t->open(bs);

  t->unusable_ = firstRankUnable(bs, why, deadline);
  if (!t->unusable_.empty()) {
    GYRE_WARN("rank %d: the net plugin is not used (%s)", bs.rank(), t->unusable_.c_str());
    return t;
  }
  std::vector<uint8_t> all(netabi::kHandleMaxBytes * static_cast<size_t>(bs.nranks()));
  std::memcpy(all.data() + netabi::kHandleMaxBytes * static_cast<size_t>(bs.rank()),
              t->handles_[static_cast<size_t>(bs.rank())].data(), netabi::kHandleMaxBytes);
  bs.allGather(all.data(), netabi::kHandleMaxBytes, deadline);
  for (int r = 0; r < bs.nranks(); ++r) {
    const uint8_t* h = all.data() + netabi::kHandleMaxBytes * static_cast<size_t>(r);
    t->handles_[static_cast<size_t>(r)].assign(h, h + netabi::kHandleMaxBytes);
  }
  t->connections_.resize(static_cast<size_t>(bs.nranks()));
  t->acceptedFrom_.assign(static_cast<size_t>(bs.nranks()), nullptr);
  t->sendTo_.assign(static_cast<size_t>(bs.nranks()), nullptr);
  GYRE_INFO("rank %d: net %s ready (%zu-byte messages)", bs.rank(), t->description_.c_str(), t->pieceBytes_);
  return t;
}

NetTransport::~NetTransport() {
  for (auto& c : connections_)
    if (c) c->close(/*flush=*/true);
  connections_.clear();
  if (!plugin_) return;
  for (auto& a : arrivals_) {
    if (a->mhandle) plugin_->deregisterMemory(a->comm, a->mhandle);
    plugin_->closeRecv(a->comm);
  }
  for (size_t p = 0; p < sendTo_.size(); ++p) {
    plugin_->closeSend(sendTo_[p]);
    plugin_->closeRecv(acceptedFrom_[p]);
  }
  plugin_->closeListen(listenComm_);
}

bool NetTransport::canConnect(int peer, std::string* whyNot) const {
  return reachable(unusable_, rank_, nranks_, peer, whyNot);
}

void NetTransport::connect(std::span<const int> peers, Deadline deadline) {
  std::vector<int> wanted;
  for (int p : peers)  // once each (a ring of two lists its one peer twice)
    if (p != rank_ && !connections_[static_cast<size_t>(p)] && std::find(wanted.begin(), wanted.end(), p) == wanted.end())
      wanted.push_back(p);
  if (wanted.empty()) return;
  if (!unusable_.empty()) throwError(gyreInternalError, "net: cannot connect: " + unusable_);
  const int64_t budgetMs = deadline.isNever() ? 0 : (deadline.remainingNs() + 999'999) / 1'000'000;

  // Per peer: this rank's send comm (connect, then the hello), and the
  // peer's comm to this rank (accepted, then identified by its hello).
  struct Outgoing {
    std::vector<uint8_t> handle;  // the peer's, which connect may keep state in
    Hello hello{};
    void* mhandle = nullptr;
    void* request = nullptr;
    bool done = false;
  };
  std::vector<Outgoing> out(wanted.size());
  for (size_t i = 0; i < wanted.size(); ++i) out[i].handle = handles_[static_cast<size_t>(wanted[i])];
  auto pending = [&] {
    for (size_t i = 0; i < wanted.size(); ++i)
      if (!out[i].done || !acceptedFrom_[static_cast<size_t>(wanted[i])]) return true;
    return false;
  };
  try {
    while (pending()) {
      for (size_t i = 0; i < wanted.size(); ++i) {
        Outgoing& o = out[i];
        const int p = wanted[i];
        void*& comm = sendTo_[static_cast<size_t>(p)];
        if (o.done) continue;
        if (!comm) comm = plugin_->connect(device_, o.handle.data());
        if (!comm) continue;
        if (!o.mhandle) {
          o.hello = Hello{kHelloMagic, rank_};
          o.mhandle = plugin_->registerMemory(comm, &o.hello, sizeof(o.hello));
        }
        if (!o.request) o.request = plugin_->isend(comm, &o.hello, sizeof(o.hello), 0, o.mhandle);
        if (o.request && plugin_->test(o.request, nullptr)) {
          plugin_->deregisterMemory(comm, o.mhandle);
          o.done = true;
        }
      }
      // Whoever connected: accept, then read its hello.
      while (void* comm = plugin_->accept(listenComm_)) {
        auto a = std::make_unique<Arrival>();
        a->comm = comm;
        a->mhandle = plugin_->registerMemory(comm, &a->hello, sizeof(a->hello));
        arrivals_.push_back(std::move(a));
      }
      for (size_t i = 0; i < arrivals_.size();) {
        Arrival& a = *arrivals_[i];
        size_t got = 0;
        if (!a.request) a.request = plugin_->irecv(a.comm, &a.hello, sizeof(a.hello), 0, a.mhandle);
        if (!a.request || !plugin_->test(a.request, &got)) {
          ++i;
          continue;
        }
        plugin_->deregisterMemory(a.comm, a.mhandle);
        const int from = a.hello.rank;
        if (got != sizeof(Hello) || a.hello.magic != kHelloMagic || from < 0 || from >= nranks_ || from == rank_ ||
            acceptedFrom_[static_cast<size_t>(from)])
          throwError(gyreRemoteError, "net: a connection sent a malformed hello (" + std::to_string(got) + " bytes)");
        acceptedFrom_[static_cast<size_t>(from)] = a.comm;
        arrivals_.erase(arrivals_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (!pending()) break;
      for (size_t i = 0; i < wanted.size(); ++i)
        if (!out[i].done || !acceptedFrom_[static_cast<size_t>(wanted[i])]) bootstrap_->checkPeers(wanted[i]);
      if (deadline.expired()) {
        std::string who;
        for (size_t i = 0; i < wanted.size(); ++i)
          if (!out[i].done || !acceptedFrom_[static_cast<size_t>(wanted[i])])
            who += (who.empty() ? "" : ", ") + bootstrap_->describe(wanted[i]);
        throwError(gyreTimeout, "net: no connection within " + std::to_string(budgetMs) + " ms through " +
                                    description_ + " to " + who + " (is it in this call?)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  } catch (const bootstrap::PeerFailed&) {
    throw;
  } catch (const Error& e) {
    if (e.code() == gyreTimeout) throw;
    throwError(e.code(), "net: connecting through " + description_ + ": " + e.what());
  }
  for (int p : wanted)
    connections_[static_cast<size_t>(p)] = std::make_unique<NetConnection>(
        *this, p, bootstrap_->describe(p), sendTo_[static_cast<size_t>(p)], acceptedFrom_[static_cast<size_t>(p)]);
  // The connections own their comms now.
  for (int p : wanted) sendTo_[static_cast<size_t>(p)] = acceptedFrom_[static_cast<size_t>(p)] = nullptr;
}

Connection* NetTransport::connection(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= connections_.size()) return nullptr;
  return connections_[static_cast<size_t>(peer)].get();
}

bool NetTransport::block(int64_t timeoutNs, FunctionRef<bool()> ready) {
  // A plugin offers nothing to sleep on: its progress is test(). Drive it,
  // then nap briefly, so ranks that outnumber the cores leave them to others.
  bool moved = false;
  for (auto& c : connections_)
    if (c) moved |= c->progress(ReadAhead::All).moved;
  if (ready()) return true;
  if (!moved && !interrupted_.load(std::memory_order_relaxed))
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(timeoutNs, 50'000)));
  return false;
}

bool NetTransport::hasPendingOutput() const {
  for (const auto& c : connections_)
    if (c && c->hasQueuedOutput()) return true;
  return false;
}

void NetTransport::shutdown() {
  for (auto& c : connections_)
    if (c) c->close(/*flush=*/false);
}

void NetTransport::interrupt() { interrupted_.store(true); }

}  // namespace gyre::transport
