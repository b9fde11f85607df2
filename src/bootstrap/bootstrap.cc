#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "bootstrap/interfaces.h"
#include "bootstrap/rendezvous_protocol.h"
#include "core/error.h"
#include "core/log.h"
#include "topology/host_identity.h"

namespace gyre::bootstrap {

const uint64_t kMemoryProbe = 0x4779726550726f62ull;  // "GyreProb"

namespace {

constexpr uint32_t kConnMagic = 0x4759434e;  // "GYCN"

struct ConnHello {
  uint32_t magic;
  uint32_t kind;
  int32_t fromRank;
  uint32_t tag;
  uint8_t secret[32];
};

struct AbortNoticeHeader {
  int32_t originRank;
  uint32_t messageBytes;
};

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
  }
  return "unknown";
}

// Connects to the root, introduces this rank, waits for the full table.
std::vector<PeerInfo> rendezvous(const Bootstrap::Params& p, const PeerInfo& self) {
  int backoffMs = 1;
  for (;;) {
    Socket s = Socket::connectTo(p.id.root, p.deadline, "the rendezvous root");
    Hello h{};
    h.magic = kHelloMagic;
    h.version = kProtocolVersion;
    std::memcpy(h.secret, p.id.secret.data(), sizeof(h.secret));
    h.round = p.round;
    h.nranks = p.nranks;
    h.rank = p.rank;
    h.infoBytes = sizeof(PeerInfo);
    const std::string who = "the rendezvous root at " + p.id.root.str();
    s.sendAll(&h, sizeof(h), p.deadline, who);
    s.sendAll(&self, sizeof(self), p.deadline, who);
    Reply r{};
    try {
      s.recvAll(&r, sizeof(r), p.deadline, who);
    } catch (const Error& e) {
      if (e.code() == gyreTimeout)
        throwError(gyreTimeout, "rank " + std::to_string(p.rank) +
                                    ": not every rank reached the rendezvous at " +
                                    p.id.root.str() + " before the timeout");
      throw;
    }
    if (r.magic != kReplyMagic) throwError(gyreRemoteError, who + " sent a malformed reply");
    std::string message(r.messageBytes, '\0');
    if (r.messageBytes) s.recvAll(message.data(), message.size(), p.deadline, who);
    if (r.status == ReplyStatus::Retry) {
      if (p.deadline.expired())
        throwError(gyreTimeout, "rendezvous at " + p.id.root.str() + " timed out: " + message);
      std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
      backoffMs = std::min(backoffMs * 2, 100);
      continue;
    }
    if (r.status != ReplyStatus::Ok) throwError(gyreInvalidUsage, "rendezvous failed: " + message);
    if (r.nranks != p.nranks || r.infoBytes != sizeof(PeerInfo))
      throwError(gyreRemoteError, who + " sent a table of the wrong shape");
    std::vector<PeerInfo> table(static_cast<size_t>(p.nranks));
    s.recvAll(table.data(), table.size() * sizeof(PeerInfo), p.deadline, who);
    return table;
  }
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::prepare(const Params& p, int rootFamily) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = p.rank;
  b->nranks_ = p.nranks;
  b->secret_ = p.id.secret;

  NetInterface nic = chooseInterface(p.ifname, p.family ? p.family : rootFamily);
  b->ifnameSpec_ = p.ifname;
  b->interface_ = nic.name;
  b->listener_ = Socket::listenOn(SockAddr::any(nic.addr.family(), 0));
  b->listener_.setNonBlocking(true);
  SockAddr advertised = nic.addr;
  advertised.setPort(b->listener_.localAddr().port());

  PeerInfo& self = b->self_;
  self.rank = p.rank;
  self.pid = getpid();
  self.hostHash = p.hostHash;
  advertised.pack(self.listenAddr);
  self.cpus = topology::availableCpus();
  topology::cpuMask(self.cpuMask);
  self.probeAddress = reinterpret_cast<uint64_t>(&kMemoryProbe);
  std::strncpy(self.hostName, topology::hostName().c_str(), sizeof(self.hostName) - 1);
  GYRE_INFO("rank %d: bootstrap on %s via %s", p.rank, advertised.str().c_str(), nic.name.c_str());
  return b;
}

std::unique_ptr<Bootstrap> Bootstrap::create(const Params& p) {
  std::unique_ptr<Bootstrap> b = prepare(p, p.id.root.family());
  b->complete(rendezvous(p, b->self_), p.deadline);
  return b;
}

void Bootstrap::complete(std::vector<PeerInfo> table, Deadline deadline) {
  peers_ = std::move(table);
  for (int r = 0; r < nranks_; ++r)
    if (peers_[r].rank != r) throwError(gyreInternalError, "bootstrap table out of order");
  if (nranks_ > 1) {
    int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
    // Connect first (never blocks on the peer), then accept.
    ringNext_ = connectTo(next, ConnKind::Ring, 0, deadline);
    ringPrev_ = acceptFrom(prev, ConnKind::Ring, 0, deadline);
  }
}

Bootstrap::~Bootstrap() = default;

std::string Bootstrap::describe(int peer) const {
  const PeerInfo& i = peers_[peer];
  return "rank " + std::to_string(peer) + " (pid " + std::to_string(i.pid) + " on " +
         std::string(i.hostName, strnlen(i.hostName, sizeof(i.hostName))) + ")";
}

SockAddr Bootstrap::peerAddress(int peer) const {
  SockAddr a = SockAddr::unpack(peers_[peer].listenAddr);
  if (sameHost(peer)) return SockAddr::loopback(a.family(), a.port());  // loopback within a host
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
  if (dataListener_.valid())
    GYRE_INFO("rank %d: tcp data on %s (port %u; the topology's NIC; bootstrap on %s)", rank_,
              dataInterface().c_str(), dataAddrs_[static_cast<size_t>(rank_)].port(), interface_.c_str());
  else
    GYRE_INFO("rank %d: tcp data on %s (the bootstrap listener: %s)", rank_, dataInterface().c_str(), why.c_str());
}

bool Bootstrap::viaDataListener(int owner, int peer) const {
  if (owner == peer || static_cast<size_t>(owner) >= dataAddrs_.size()) return false;
  if (peers_[owner].hostHash == peers_[peer].hostHash) return false;  // loopback within a host
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
  Socket s = Socket::connectTo(addr, deadline, describe(peer));
  ConnHello h{};
  h.magic = kConnMagic;
  h.kind = static_cast<uint32_t>(kind);
  h.fromRank = rank_;
  h.tag = tag;
  std::memcpy(h.secret, secret_.data(), sizeof(h.secret));
  s.sendAll(&h, sizeof(h), deadline, describe(peer));
  return s;
}

bool Bootstrap::acceptOne(const Socket& listener, Deadline handshakeDeadline) {
  Socket s = listener.tryAccept();
  if (!s.valid()) return false;
  ConnHello h{};
  try {
    s.recvAll(&h, sizeof(h), handshakeDeadline, "a connecting process");
  } catch (const Error& e) {
    GYRE_WARN("rank %d: dropped a connection that did not introduce itself: %s", rank_, e.what());
    return true;
  }
  Secret got;
  std::memcpy(got.data(), h.secret, got.size());
  if (h.magic != kConnMagic || !secretsEqual(got, secret_) || h.fromRank < 0 ||
      h.fromRank >= nranks_) {
    GYRE_WARN("rank %d: refused a connection without this communicator's secret", rank_);
    return true;
  }
  // Each connection only where its peer was told to make it: data from
  // another host on the data listener (when this rank has one), all else on
  // the bootstrap listener.
  const bool onData = &listener == &dataListener_;
  if (onData !=
      (h.kind == static_cast<uint32_t>(ConnKind::Data) && viaDataListener(rank_, h.fromRank))) {
    GYRE_WARN("rank %d: refused a %s connection from %s on the %s listener", rank_,
              kindName(h.kind), describe(h.fromRank).c_str(), onData ? "data" : "bootstrap");
    return true;
  }
  if (h.kind == static_cast<uint32_t>(ConnKind::AbortNotice)) {
    AbortNoticeHeader n{};
    try {
      s.recvAll(&n, sizeof(n), handshakeDeadline, describe(h.fromRank));
      std::string msg(std::min<uint32_t>(n.messageBytes, 4096), '\0');
      s.recvAll(msg.data(), msg.size(), handshakeDeadline, describe(h.fromRank));
      notices_.emplace_back(n.originRank, msg);
    } catch (const Error&) {
      notices_.emplace_back(h.fromRank, describe(h.fromRank) + " failed");
    }
    return true;
  }
  pending_[{h.fromRank, h.kind, h.tag}] = std::move(s);
  return true;
}

Socket Bootstrap::acceptFrom(int peer, ConnKind kind, uint32_t tag, Deadline deadline) {
  auto key = std::make_tuple(peer, static_cast<uint32_t>(kind), tag);
  for (;;) {
    auto it = pending_.find(key);
    if (it != pending_.end()) {
      Socket s = std::move(it->second);
      pending_.erase(it);
      return s;
    }
    if (!notices_.empty())
      throwError(gyreRemoteError, "rank " + std::to_string(notices_.front().first) +
                                      " failed while connecting: " + notices_.front().second);
    if (acceptOne(listener_, Deadline::afterMs(5000))) continue;
    if (dataListener_.valid() && acceptOne(dataListener_, Deadline::afterMs(5000))) continue;
    if (deadline.expired())
      throwError(gyreTimeout, "rank " + std::to_string(rank_) + " timed out waiting for " +
                                  describe(peer) + " to connect" +
                                  (kind == ConnKind::Data && viaDataListener(rank_, peer)
                                       ? " to this rank's data listener on " + dataInterface()
                                       : std::string()));
    pollfd p[2] = {{listener_.fd(), POLLIN, 0}, {dataListener_.fd(), POLLIN, 0}};
    ::poll(p, dataListener_.valid() ? 2 : 1, deadline.pollMs(100));
  }
}

void Bootstrap::allGather(void* data, size_t bytes, Deadline deadline) {
  auto* base = static_cast<uint8_t*>(data);
  for (int step = 0; step < nranks_ - 1; ++step) {
    int sendBlock = (rank_ - step + nranks_) % nranks_;
    int recvBlock = (rank_ - step - 1 + nranks_) % nranks_;
    sendRecv(ringNext_, base + size_t(sendBlock) * bytes, bytes, ringPrev_,
             base + size_t(recvBlock) * bytes, bytes, deadline, "the bootstrap ring");
  }
}

void Bootstrap::barrier(Deadline deadline) {
  std::vector<uint8_t> token(static_cast<size_t>(nranks_));
  allGather(token.data(), 1, deadline);
}

void Bootstrap::notifyAbort(int originRank, const std::string& message) {
  // Short, parallel-ish attempts: a dead peer must not delay the others long.
  Deadline deadline = Deadline::afterMs(1000);
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    try {
      Socket s = connectTo(r, ConnKind::AbortNotice, 0, Deadline::afterMs(200));
      AbortNoticeHeader n{originRank, static_cast<uint32_t>(message.size())};
      s.sendAll(&n, sizeof(n), deadline, describe(r));
      s.sendAll(message.data(), message.size(), deadline, describe(r));
    } catch (const Error&) {
      // The peer may be the dead one; nothing more to do.
    }
    if (deadline.expired()) break;
  }
}

std::optional<std::pair<int, std::string>> Bootstrap::pollAbortNotice() {
  while (acceptOne(listener_, Deadline::afterMs(1000))) {
  }
  if (notices_.empty()) return std::nullopt;
  return notices_.front();
}

}  // namespace gyre::bootstrap
