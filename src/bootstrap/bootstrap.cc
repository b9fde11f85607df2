#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>

#include "base/log.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/rendezvous_protocol.h"
#include "topology/host_identity.h"

namespace gyre::bootstrap {

const uint64_t kMemoryProbe = 0x4779726550726f62ull;  // "GyreProb"

uint64_t pidNamespaceId() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return (static_cast<uint64_t>(st.st_dev) << 32) ^ static_cast<uint64_t>(st.st_ino);
}

namespace {

// The longest a wait goes without looking at its peers (notices, exits).
constexpr int kPollCapMs = 20;
// A ring connection closed or a local peer exited: how long to look for the
// notice it may have sent first (it names the real cause).
constexpr int64_t kNoticeGraceNs = 100'000'000;
// A report that arrives during an exchange: how long the exchange may still
// finish first (allGather).
constexpr int64_t kExchangeGraceNs = 1'000'000'000;

// What openDataListener exchanges: a rank's data listener (family 0: none).
struct DataListenerInfo {
  uint8_t addr[SockAddr::kPackedBytes];
};

const char* kindName(uint32_t kind) {
  switch (static_cast<ConnKind>(kind)) {
    case ConnKind::Ring:
      return "ring";
    case ConnKind::Data:
      return "data";
    case ConnKind::AbortNotice:
      return "abort notice";
    case ConnKind::Shrink:
      return "shrink";
    case ConnKind::Status:
      return "status";
    case ConnKind::Watch:
      return "watch";
  }
  return "unknown";
}

// Connects to the root, introduces this rank, waits for the full table.
std::vector<PeerInfo> rendezvous(const Bootstrap::Params& p, const PeerInfo& self) {
  const std::string who = "the rendezvous root at " + p.id.root.str() +
                          (p.id.rankZeroHostsRoot ? " (hosted by rank 0)" : "");
  int backoffMs = 1;
  // A hosted id's root listened before the id existed: a refusal means its
  // round is over (every rank it was made for came) or its host is gone,
  // and waiting for the timeout would tell nothing more. A root opened at
  // init (GYRE_COMM_ID, a launcher) may not be up yet.
  const bool refusedIsFinal = !p.id.fromEnvironment;
  for (;;) {
    Socket s = [&] {
      try {
        return Socket::connectTo(p.id.root, p.deadline, who, refusedIsFinal);
      } catch (const ConnectionRefused& e) {
        throwError(gyreRemoteError,
                   "rank " + std::to_string(p.rank) + ": " + e.what() +
                       ": its rendezvous is over (every rank it was made for has come) or the process that "
                       "made the id is gone");
      }
    }();
    Hello h{};
    h.magic = kHelloMagic;
    h.version = kProtocolVersion;
    std::memcpy(h.secret, p.id.secret.data(), sizeof(h.secret));
    h.round = p.round;
    h.nranks = p.nranks;
    h.rank = p.rank;
    h.infoBytes = sizeof(PeerInfo);
    const int64_t leftMs =
        p.deadline.isNever() ? 0 : std::max<int64_t>(1, p.deadline.remainingNs() / 1'000'000);
    h.timeoutMs = static_cast<uint32_t>(std::min<int64_t>(leftMs, UINT32_MAX));
    s.sendAll(&h, sizeof(h), p.deadline, who);
    s.sendAll(&self, sizeof(self), p.deadline, who);
    Reply r{};
    try {
      s.recvAll(&r, sizeof(r), p.deadline, who);
    } catch (const Error& e) {
      if (e.code() == gyreTimeout)
        throwError(gyreTimeout,
                   "rank " + std::to_string(p.rank) + ": the rendezvous at " + p.id.root.str() +
                       " did not complete before the timeout, and the root never said why");
      if (p.id.rankZeroHostsRoot && p.rank != 0)
        throw PeerFailed(gyreRemoteError, 0,
                         who + " closed the connection: rank 0, which hosts it, exited or failed",
                         false);
      throw;
    }
    if (r.magic != kReplyMagic) throwError(gyreRemoteError, who + " sent a malformed reply");
    std::string message(std::min<uint32_t>(r.messageBytes, 64 * 1024), '\0');
    if (!message.empty()) s.recvAll(message.data(), message.size(), p.deadline, who);
    switch (r.status) {
      case ReplyStatus::Ok:
        break;
      case ReplyStatus::Retry:
        if (p.deadline.expired())
          throwError(gyreTimeout, "rendezvous at " + p.id.root.str() + " timed out: " + message);
        std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
        backoffMs = std::min(backoffMs * 2, 100);
        continue;
      case ReplyStatus::PeerLeft:
        // The root told every rank of the round: nobody needs telling again.
        throw PeerFailed(gyreRemoteError, r.culprit, "rendezvous failed: " + message, true);
      case ReplyStatus::TimedOut:
        throwError(gyreTimeout, "rank " + std::to_string(p.rank) + ": " + message);
      case ReplyStatus::Refused:
        throwError(gyreInvalidUsage,
                   "rank " + std::to_string(p.rank) + ": " + who + " refused it: " + message);
      default:
        throwError(gyreInvalidUsage, "rendezvous failed: " + message);
    }
    if (r.nranks != p.nranks || r.infoBytes != sizeof(PeerInfo))
      throwError(gyreRemoteError, who + " sent a table of the wrong shape");
    std::vector<PeerInfo> table(static_cast<size_t>(p.nranks));
    s.recvAll(table.data(), table.size() * sizeof(PeerInfo), p.deadline, who);
    return table;
  }
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::prepare(const Params& p, const SockAddr& likeAddress) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = p.rank;
  b->nranks_ = p.nranks;
  b->secret_ = p.id.secret;

  // Bound to the interface's own address, not every interface: what reaches
  // the listener came the way the job's ranks come.
  NetInterface nic = p.ifname.empty() && likeAddress.isLoopback()
                         ? loopbackInterface(likeAddress.family())
                         : chooseInterface(p.ifname, p.family ? p.family : likeAddress.family());
  b->ifnameSpec_ = p.ifname;
  b->interface_ = nic.name;
  b->listener_ = Socket::listenOn(nic.addr);
  b->listener_.setNonBlocking(true);
  const SockAddr advertised = b->listener_.localAddr();
  // Ranks of one host meet on loopback, which only this host can reach.
  if (!nic.loopback) {
    b->localListener_ = Socket::listenOn(SockAddr::loopback(nic.addr.family(), 0));
    b->localListener_.setNonBlocking(true);
    b->self_.loopbackPort = b->localListener_.localAddr().port();
  }

  PeerInfo& self = b->self_;
  self.rank = p.rank;
  self.pid = getpid();
  self.hostHash = p.hostHash;
  advertised.pack(self.listenAddr);
  self.cpus = topology::availableCpus();
  topology::cpuMask(self.cpuMask);
  self.probeAddress = reinterpret_cast<uint64_t>(&kMemoryProbe);
  std::strncpy(self.hostName, topology::hostName().c_str(), sizeof(self.hostName) - 1);
  self.pidNamespace = pidNamespaceId();
  const Secret key = randomSecret();
  std::memcpy(self.sessionKey, key.data(), key.size());
  GYRE_INFO("rank %d: bootstrap on %s via %s", p.rank, advertised.str().c_str(), nic.name.c_str());
  return b;
}

std::unique_ptr<Bootstrap> Bootstrap::create(const Params& p) {
  std::unique_ptr<Bootstrap> b = prepare(p, p.id.root);
  std::vector<PeerInfo> table = rendezvous(p, b->self_);
  try {
    b->complete(std::move(table), p.deadline);
  } catch (const Error& e) {
    b->reportFailure(e);
    throw;
  }
  return b;
}

void Bootstrap::complete(std::vector<PeerInfo> table, Deadline deadline) {
  peers_ = std::move(table);
  for (int r = 0; r < nranks_; ++r)
    if (peers_[r].rank != r) throwError(gyreInternalError, "bootstrap table out of order");
  Secret session{};
  for (const PeerInfo& i : peers_)
    for (size_t k = 0; k < session.size(); ++k) session[k] ^= i.sessionKey[k];
  secret_ = session;
  // Local peers are watched from now on: one that exits is named at once,
  // wherever this rank waits. A pid means the same process here only within
  // one pid namespace.
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_ && sameHost(r) && self_.pidNamespace != 0 &&
        peers_[r].pidNamespace == self_.pidNamespace)
      liveness_.watch(r, peers_[r].pid);
  if (nranks_ > 1) {
    int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
    // Connect first (never blocks on the peer), then accept.
    ringNext_ = connectTo(next, ConnKind::Ring, 0, deadline);
    ringPrev_ = acceptFrom(prev, ConnKind::Ring, 0, deadline);
  }
}

Bootstrap::~Bootstrap() = default;

std::string Bootstrap::describe(int peer) const {
  return "rank " + std::to_string(peer) + " (" + describeProcess(peers_[peer]) + ")";
}

SockAddr Bootstrap::peerAddress(int peer) const {
  const SockAddr a = SockAddr::unpack(peers_[peer].listenAddr);
  if (sameHost(peer) && peers_[peer].loopbackPort)
    return SockAddr::loopback(a.family(), peers_[peer].loopbackPort);
  return a;
}

void Bootstrap::openDataListener(const std::string& ifname, Deadline deadline) {
  const SockAddr boot = SockAddr::unpack(self_.listenAddr);
  std::string why;  // why data connections stay on the bootstrap listener
  if (!ifnameSpec_.empty()) {
    why = "GYRE_SOCKET_IFNAME is set";
  } else if (ifname.empty()) {
    why = "no NIC from the topology";
  } else if (ifname == interface_) {
    why = "it is on the topology's NIC already";
  } else if (boot.isLoopback()) {
    why = "the job lives on loopback (its root is there)";
  } else {
    std::optional<NetInterface> nic;
    for (const NetInterface& i : listInterfaces(boot.family()))
      if (i.name == ifname) {
        nic = i;
        break;
      }
    if (!nic) {
      why = "the topology's NIC " + ifname + " is not up with an " +
            (boot.family() == AF_INET6 ? "IPv6" : "IPv4") + " address";
    } else {
      try {
        // Bound to the NIC's address (not "any"): what arrives here came over it.
        dataListener_ = Socket::listenOn(nic->addr);
        dataListener_.setNonBlocking(true);
        dataInterface_ = nic->name;
      } catch (const Error& e) {
        dataListener_.reset();
        GYRE_WARN("rank %d: cannot listen for data on %s: %s", rank_, ifname.c_str(), e.what());
        why = "listening on " + ifname + " failed";
      }
    }
  }
  std::vector<DataListenerInfo> all(static_cast<size_t>(nranks_));
  DataListenerInfo& mine = all[static_cast<size_t>(rank_)];
  std::memset(&mine, 0, sizeof(mine));
  if (dataListener_.valid()) dataListener_.localAddr().pack(mine.addr);
  allGather(all.data(), sizeof(DataListenerInfo), deadline);
  dataAddrs_.clear();
  for (const DataListenerInfo& i : all) dataAddrs_.push_back(SockAddr::unpack(i.addr));
  std::vector<IncomingConnections::Arrival> early = std::move(early_);
  early_.clear();
  for (IncomingConnections::Arrival& a : early) file(a);
  if (dataListener_.valid())
    GYRE_INFO("rank %d: tcp data on %s (port %u; the topology's NIC; bootstrap on %s)", rank_,
              dataInterface().c_str(), dataAddrs_[static_cast<size_t>(rank_)].port(),
              interface_.c_str());
  else
    GYRE_INFO("rank %d: tcp data on %s (the bootstrap listener: %s)", rank_,
              dataInterface().c_str(), why.c_str());
}

bool Bootstrap::viaDataListener(int owner, int peer) const {
  if (owner == peer || static_cast<size_t>(owner) >= dataAddrs_.size()) return false;
  if (peers_[owner].hostHash == peers_[peer].hostHash)
    return false;  // the bootstrap listener within a host
  return dataAddrs_[static_cast<size_t>(owner)].family() != 0;
}

SockAddr Bootstrap::dataAddress(int peer) const {
  return viaDataListener(peer, rank_) ? dataAddrs_[static_cast<size_t>(peer)] : peerAddress(peer);
}

std::string Bootstrap::dataInterface() const {
  const SockAddr a =
      dataListener_.valid() ? dataListener_.localAddr() : SockAddr::unpack(self_.listenAddr);
  return (dataListener_.valid() ? dataInterface_ : interface_) + " " + a.host();
}

Socket Bootstrap::connectTo(int peer, ConnKind kind, uint32_t tag, Deadline deadline) {
  const SockAddr addr = kind == ConnKind::Data ? dataAddress(peer) : peerAddress(peer);
  Socket s;
  try {
    // Its listener was up before it joined the table: a refusal means it is gone.
    s = Socket::connectTo(addr, deadline, describe(peer), true, [&] { checkPeers(peer); });
  } catch (const ConnectionRefused&) {
    peerGone(peer, " refuses connections at " + addr.str() +
                       ": its process is gone or its communicator was destroyed");
  } catch (const Error& e) {
    if (e.code() == gyreTimeout) throwError(gyreTimeout, std::string(e.what()) + timeoutSuffix());
    throw;
  }
  try {
    sendHello(s, peer, kind, tag, deadline);
  } catch (const Error& e) {
    if (e.code() == gyreTimeout) throw;
    peerGone(peer,
             " dropped the connection as it was made: its process is gone or its communicator was "
             "destroyed");
  }
  return s;
}

void Bootstrap::watchPeer(int peer, Deadline deadline) {
  if (peer == rank_ || liveness_.watches(peer)) return;
  Socket s = connectTo(peer, ConnKind::Watch, 0, deadline);
  s.setKeepAlive(kWatchKeepIdleSec, kWatchKeepIntervalSec, kWatchKeepProbes);
  liveness_.watchConnection(peer, std::move(s));
  GYRE_INFO("rank %d: watches %s through a connection to its listener", rank_, describe(peer).c_str());
}

void Bootstrap::sendHello(Socket& s, int peer, ConnKind kind, uint32_t tag, Deadline deadline) {
  ConnHello h{};
  h.magic = kConnMagic;
  h.kind = static_cast<uint32_t>(kind);
  h.fromRank = rank_;
  h.tag = tag;
  std::memcpy(h.secret, secret_.data(), sizeof(h.secret));
  s.sendAll(&h, sizeof(h), deadline, describe(peer));
}

std::optional<Socket> Bootstrap::connectToSurvivor(int peer, ConnKind kind, uint32_t tag,
                                                   Deadline deadline) {
  const SockAddr addr = peerAddress(peer);
  Socket s;
  try {
    s = Socket::connectTo(addr, deadline, describe(peer), true, [&] {
      pumpListeners();  // the survivors' connections to this rank, meanwhile
      if (liveness_.isDead(peer)) throw ConnectionRefused(gyreRemoteError, describe(peer) + " exited");
    });
  } catch (const ConnectionRefused&) {
    return std::nullopt;  // its listener is gone: so is its process (or its communicator)
  } catch (const Error& e) {
    if (e.code() == gyreTimeout) return std::nullopt;
    throw;
  }
  try {
    sendHello(s, peer, kind, tag, deadline);
  } catch (const Error&) {
    return std::nullopt;
  }
  return s;
}

std::optional<Socket> Bootstrap::takeArrived(int peer, ConnKind kind, uint32_t tag) {
  pumpListeners();
  auto it = pending_.find(std::make_tuple(peer, static_cast<uint32_t>(kind), tag));
  if (it == pending_.end()) return std::nullopt;
  Socket s = std::move(it->second);
  pending_.erase(it);
  return s;
}

void Bootstrap::waitForArrivals(std::vector<pollfd> extra, Deadline deadline, int capMs) {
  waitForEvents(std::move(extra), deadline, capMs);
}

void Bootstrap::pumpListeners() {
  if (listener_.valid()) incoming_.acceptFrom(listener_, false);
  if (localListener_.valid()) incoming_.acceptFrom(localListener_, false);
  if (dataListener_.valid()) incoming_.acceptFrom(dataListener_, true);
  if (!incoming_.open()) return;
  for (IncomingConnections::Arrival& a : incoming_.advance()) file(a);
}

void Bootstrap::file(IncomingConnections::Arrival& a) {
  const ConnHello& h = a.hello;
  Secret got;
  std::memcpy(got.data(), h.secret, got.size());
  if (h.magic != kConnMagic || !secretsEqual(got, secret_)) {
    ++refusals_.badSecret;
    refusals_.lastFrom = a.from;
    GYRE_WARN("rank %d: refused a connection from %s without this communicator's secret", rank_,
              a.from.c_str());
    return;
  }
  if (peers_.empty() || h.fromRank < 0 || h.fromRank >= nranks_ || h.fromRank == rank_) {
    ++refusals_.badClaim;
    refusals_.lastFrom = a.from;
    GYRE_WARN("rank %d: refused a connection from %s claiming rank %d", rank_, a.from.c_str(),
              h.fromRank);
    return;
  }
  // A data connection can arrive while this rank is still learning where
  // data connections belong (a faster peer is done with openDataListener):
  // it is judged once that is known.
  if (h.kind == static_cast<uint32_t>(ConnKind::Data) &&
      dataAddrs_.size() != static_cast<size_t>(nranks_)) {
    early_.push_back(std::move(a));
    return;
  }
  // Each connection only where its peer was told to make it: data from
  // another host on the data listener (when this rank has one), all else on
  // the bootstrap listener.
  if (a.onDataListener !=
      (h.kind == static_cast<uint32_t>(ConnKind::Data) && viaDataListener(rank_, h.fromRank))) {
    ++refusals_.badClaim;
    refusals_.lastFrom = a.from;
    GYRE_WARN("rank %d: refused a %s connection from %s on the %s listener", rank_,
              kindName(h.kind), describe(h.fromRank).c_str(),
              a.onDataListener ? "data" : "bootstrap");
    return;
  }
  if (h.kind == static_cast<uint32_t>(ConnKind::Status)) {
    if (a.hasNotice) statuses_.push_back(Status{h.fromRank, std::move(a.noticeText)});
    return;
  }
  if (h.kind == static_cast<uint32_t>(ConnKind::AbortNotice)) {
    AbortNotice n;
    n.reporter = h.fromRank;
    if (a.hasNotice) {
      const auto inRange = [&](int r) { return r >= 0 && r < nranks_; };
      n.origin = inRange(a.notice.originRank) ? a.notice.originRank : h.fromRank;
      n.waitingOn = inRange(a.notice.waitingOn) ? a.notice.waitingOn : -1;
      // Only a code that names a mistake of the job's: anything else from
      // the wire reads as the peer's failure.
      const auto shared = static_cast<gyreResult_t>(a.notice.sharedCode);
      if (shared == gyreInvalidUsage || shared == gyreInvalidArgument) n.sharedCode = shared;
      n.message = a.noticeText;
    } else {
      n.origin = h.fromRank;
      n.message = describe(h.fromRank) + " failed";
    }
    GYRE_INFO("rank %d: abort notice from rank %d (origin rank %d%s)", rank_, n.reporter, n.origin,
              n.waitingOn >= 0 ? (", its wait stuck on rank " + std::to_string(n.waitingOn)).c_str() : "");
    notices_.push_back(std::move(n));
    return;
  }
  pending_[{h.fromRank, h.kind, h.tag}] = std::move(a.sock);
}

void Bootstrap::waitForEvents(std::vector<pollfd> fds, Deadline deadline, int capMs) {
  if (listener_.valid()) fds.push_back({listener_.fd(), POLLIN, 0});
  if (localListener_.valid()) fds.push_back({localListener_.fd(), POLLIN, 0});
  if (dataListener_.valid()) fds.push_back({dataListener_.fd(), POLLIN, 0});
  incoming_.addPollFds(fds);
  ::poll(fds.data(), fds.size(), deadline.pollMs(capMs));
}

std::string Bootstrap::explain(const AbortNotice& n) const {
  return n.origin == n.reporter ? describe(n.origin) + " failed: " + n.message
                                : n.message + " (reported by rank " + std::to_string(n.reporter) + ")";
}

void Bootstrap::throwNotice(const AbortNotice& n) const { throw PeerFailed(n.result(), n.origin, explain(n), true); }

void Bootstrap::checkPeers(int onlyPeer) {
  pumpListeners();
  if (!notices_.empty()) throwNotice(notices_.front());
  auto deadNow = [&] {
    if (onlyPeer < 0) return liveness_.dead();
    return liveness_.isDead(onlyPeer) ? std::vector<int>{onlyPeer} : std::vector<int>{};
  };
  if (deadNow().empty()) return;
  // It may have reported why before it exited; or it failed because another
  // did, whose news is on its way.
  const int64_t graceEnd = nowNs() + kNoticeGraceNs;
  do {
    pumpListeners();
    if (!notices_.empty()) throwNotice(notices_.front());
    waitForEvents({}, Deadline::afterMs(1), 1);
  } while (nowNs() < graceEnd);
  // No word from anyone: name every rank seen gone (which went first, a
  // pidfd cannot tell).
  const std::vector<int> dead = deadNow();
  std::string who;
  for (size_t i = 0; i < dead.size(); ++i)
    who += (i == 0 ? "" : i + 1 == dead.size() ? " and " : ", ") + describe(dead[i]);
  throw PeerFailed(gyreRemoteError, dead.front(),
                   who + (dead.size() == 1 ? " exited" : " have exited"), false);
}

void Bootstrap::peerGone(int peer, const std::string& what) {
  // A peer that failed told everyone why before it closed; one that failed
  // because of another's news did not, but that news is on its way here.
  const int64_t graceEnd = nowNs() + kNoticeGraceNs;
  do {
    pumpListeners();
    if (!notices_.empty()) throwNotice(notices_.front());
    waitForEvents({}, Deadline::afterMs(1), 1);
  } while (nowNs() < graceEnd);
  throw PeerFailed(gyreRemoteError, peer,
                   describe(peer) + (liveness_.isDead(peer) ? " exited" : what), false);
}

void Bootstrap::ringPeerClosed(int peer) {
  peerGone(peer, " closed its bootstrap connection (it exited or failed)");
}

std::string Bootstrap::timeoutSuffix() const {
  std::string s;
  if (const std::string r = refusals_.describe(); !r.empty()) s += "; meanwhile this rank " + r;
  if (const size_t open = incoming_.open())
    s += "; " + std::to_string(open) + (open == 1 ? " connection" : " connections") +
         " to this rank had sent no complete hello yet";
  return s;
}

Socket Bootstrap::acceptFrom(int peer, ConnKind kind, uint32_t tag, Deadline deadline) {
  auto key = std::make_tuple(peer, static_cast<uint32_t>(kind), tag);
  for (;;) {
    pumpListeners();
    auto it = pending_.find(key);
    if (it != pending_.end()) {
      Socket s = std::move(it->second);
      pending_.erase(it);
      return s;
    }
    checkPeers(peer);
    if (deadline.expired())
      throwError(gyreTimeout, "rank " + std::to_string(rank_) + " timed out waiting for " +
                                  describe(peer) + " to connect" +
                                  (kind == ConnKind::Data && viaDataListener(rank_, peer)
                                       ? " to this rank's data listener on " + dataInterface()
                                       : std::string()) +
                                  timeoutSuffix());
    waitForEvents({}, deadline, kPollCapMs);
  }
}

void Bootstrap::allGather(void* data, size_t bytes, Deadline deadline) {
  auto* base = static_cast<uint8_t*>(data);
  const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  const std::string nextWho = describe(next), prevWho = describe(prev);
  int64_t noticeGraceEnd = 0;
  for (int step = 0; step < nranks_ - 1; ++step) {
    const int sendBlock = (rank_ - step + nranks_) % nranks_;
    const int recvBlock = (rank_ - step - 1 + nranks_) % nranks_;
    const uint8_t* out = base + size_t(sendBlock) * bytes;
    uint8_t* in = base + size_t(recvBlock) * bytes;
    size_t sent = 0, received = 0;
    while (sent < bytes || received < bytes) {
      // Sends to next and receives from prev, as far as each goes now; a
      // connection that fails is its peer gone.
      auto advance = [&](bool sending, size_t& done) {
        if (done == bytes) return false;
        size_t n = 0;
        try {
          n = sending ? ringNext_.sendSome(out + done, bytes - done, nextWho)
                      : ringPrev_.recvSome(in + done, bytes - done, prevWho);
        } catch (const Error&) {
          ringPeerClosed(sending ? next : prev);
        }
        done += n;
        return n > 0;
      };
      const bool movedOut = advance(true, sent);
      if (advance(false, received) || movedOut) continue;
      // Reports only, not deaths: a rank that exits may simply be done (its
      // last block sent, perhaps not yet read here). A death that matters
      // shows as a ring connection closed early, here or at a neighbour of
      // the dead rank, which then reports it to every rank.
      // A report gets the exchange a grace period first: ranks that finished
      // it may already have failed at what came next (a communicator split
      // off and used at once) while the last blocks are still on their way
      // here. Finished, this rank keeps the report for its next call.
      pumpListeners();
      if (!notices_.empty()) {
        if (noticeGraceEnd == 0) noticeGraceEnd = nowNs() + kExchangeGraceNs;
        if (nowNs() >= noticeGraceEnd) throwNotice(notices_.front());
      }
      // The next rank sends nothing back: readable means it closed. That is
      // a failure while it still needs something from us; after our last
      // send it may finish (and close) before we do.
      const bool nextNeedsMore = step < nranks_ - 2 || sent < bytes;
      if (nextNeedsMore && ringNext_.peerClosed()) ringPeerClosed(next);
      if (deadline.expired())
        throwError(gyreTimeout, "rank " + std::to_string(rank_) +
                                    " timed out in an exchange around the bootstrap ring" +
                                    (received < bytes ? ", waiting for " + prevWho
                                                      : ", waiting for room at " + nextWho) +
                                    timeoutSuffix());
      std::vector<pollfd> fds;
      if (nextNeedsMore)
        fds.push_back(
            {ringNext_.fd(), static_cast<short>(POLLIN | (sent < bytes ? POLLOUT : 0)), 0});
      if (received < bytes) fds.push_back({ringPrev_.fd(), POLLIN, 0});
      waitForEvents(std::move(fds), deadline, kPollCapMs);
    }
  }
}

void Bootstrap::barrier(Deadline deadline) {
  std::vector<uint8_t> token(static_cast<size_t>(nranks_));
  allGather(token.data(), 1, deadline);
}

void Bootstrap::notifyAbort(int originRank, const std::string& message, int waitingOn, gyreResult_t sharedCode) {
  // Short attempts: a dead peer must not delay the others long.
  Deadline deadline = Deadline::afterMs(1000);
  const std::string text = message.substr(0, kMaxNoticeBytes);
  for (int r = 0; r < nranks_ && r < static_cast<int>(peers_.size()); ++r) {
    if (r == rank_) continue;
    try {
      Socket s = Socket::connectTo(peerAddress(r), Deadline::afterMs(200), describe(r), true);
      ConnHello h{};
      h.magic = kConnMagic;
      h.kind = static_cast<uint32_t>(ConnKind::AbortNotice);
      h.fromRank = rank_;
      std::memcpy(h.secret, secret_.data(), sizeof(h.secret));
      AbortNoticeHeader n{originRank, static_cast<uint32_t>(text.size()), waitingOn,
                          static_cast<int32_t>(sharedCode)};
      s.sendAll(&h, sizeof(h), deadline, describe(r));
      s.sendAll(&n, sizeof(n), deadline, describe(r));
      s.sendAll(text.data(), text.size(), deadline, describe(r));
    } catch (const Error& e) {
      // The peer may be the dead one; nothing more to do.
      GYRE_INFO("rank %d: could not tell %s of the failure: %s", rank_, describe(r).c_str(), e.what());
    }
    if (deadline.expired()) break;
  }
}

void Bootstrap::reportFailure(const Error& e) {
  if (peers_.empty()) return;  // before the table: the root tells the round
  if (const auto* pf = dynamic_cast<const PeerFailed*>(&e)) {
    if (!pf->fromNotice()) notifyAbort(pf->origin(), e.what());
    return;
  }
  const bool shared = dynamic_cast<const SharedFinding*>(&e) != nullptr;
  notifyAbort(rank_, e.what(), -1, shared ? e.code() : gyreSuccess);
}

bool Bootstrap::anythingKnocking() {
  if (incoming_.open()) return true;
  pollfd fds[3];
  nfds_t n = 0;
  for (const Socket* l : {&listener_, &localListener_, &dataListener_})
    if (l->valid()) fds[n++] = {l->fd(), POLLIN, 0};
  return ::poll(fds, n, 0) > 0;
}

std::optional<AbortNotice> Bootstrap::pollAbortNotice() {
  if (notices_.empty() && !anythingKnocking()) return std::nullopt;
  pumpListeners();
  if (notices_.empty()) return std::nullopt;
  return notices_.front();
}

bool Bootstrap::sendStatus(int peer, const std::string& message) {
  if (peer < 0 || peer >= static_cast<int>(peers_.size()) || peer == rank_) return false;
  // Short: a peer that is gone or swamped must not hold up the sender's wait.
  const Deadline deadline = Deadline::afterMs(200);
  const std::string text = message.substr(0, kMaxNoticeBytes);
  try {
    Socket s = Socket::connectTo(peerAddress(peer), deadline, describe(peer), true);
    ConnHello h{};
    h.magic = kConnMagic;
    h.kind = static_cast<uint32_t>(ConnKind::Status);
    h.fromRank = rank_;
    std::memcpy(h.secret, secret_.data(), sizeof(h.secret));
    AbortNoticeHeader n{rank_, static_cast<uint32_t>(text.size()), -1, 0};
    s.sendAll(&h, sizeof(h), deadline, describe(peer));
    s.sendAll(&n, sizeof(n), deadline, describe(peer));
    s.sendAll(text.data(), text.size(), deadline, describe(peer));
    return true;
  } catch (const Error& e) {
    GYRE_INFO("rank %d: could not send a status to %s: %s", rank_, describe(peer).c_str(), e.what());
    return false;
  }
}

std::vector<Bootstrap::Status> Bootstrap::takeStatuses() {
  if (statuses_.empty() && !anythingKnocking()) return {};
  pumpListeners();
  return std::exchange(statuses_, {});
}

const std::vector<AbortNotice>& Bootstrap::notices() {
  pumpListeners();
  return notices_;
}

}  // namespace gyre::bootstrap
