// The rank side of the rendezvous, and the out-of-band network a
// communicator keeps for its lifetime: a listener per rank, a ring of
// connections for small collective exchanges (allgather, barrier), verified
// point-to-point connections for transports, and abort notices.
//
// Data connections (ConnKind::Data, the TCP transport's) may use a second
// listener of their own, on the NIC the topology search gave the rank (as
// NCCL picks a net device per GPU): the bootstrap listener's interface is
// chosen before the topology is known. openDataListener() opens it and
// exchanges every rank's data address; connectTo/acceptFrom then route Data
// connections between hosts through it, with the same verification. The
// transport above keeps asking for (peer, Data, lane) and never knows.
//
// Every wait here watches the other ranks while it waits: connections are
// accepted and read side by side (a silent one delays nobody), an abort
// notice from a peer ends the wait naming the rank where the failure began,
// and so does a local peer's exit (pidfd), a closed ring connection, or a
// peer whose listener refuses connections (it was listening when it joined:
// refusal means its process is gone).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "bootstrap/conn_protocol.h"
#include "bootstrap/incoming.h"
#include "bootstrap/peer_info.h"
#include "bootstrap/peer_liveness.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace gyre::bootstrap {

// A failure that began at another rank (it exited, closed on us, or told us
// it failed): `origin` names it. fromNotice: the news came as that rank's (or
// a witness's) notice, which every rank was sent already.
class PeerFailed : public Error {
 public:
  PeerFailed(gyreResult_t code, int origin, std::string message, bool fromNotice)
      : Error(code, std::move(message)), origin_(origin), fromNotice_(fromNotice) {}
  int origin() const { return origin_; }
  bool fromNotice() const { return fromNotice_; }

 private:
  int origin_;
  bool fromNotice_;
};

// A finding that is every rank's, not only the one that made it: the ranks'
// settings differ. Peers told of it fail with the same code (usually
// gyreInvalidUsage), not with gyreRemoteError: whichever rank saw it first,
// every rank's call was wrong in the same way.
class SharedFinding : public Error {
 public:
  using Error::Error;
};

// A peer's report that this communicator failed.
struct AbortNotice {
  int origin = -1;     // where the failure began
  int reporter = -1;   // who sent it
  int waitingOn = -1;  // a timeout: the rank the reporter's wait was stuck on
  gyreResult_t sharedCode = gyreSuccess;  // a SharedFinding's code (else gyreSuccess)
  std::string message;
  // The code this rank fails with on hearing it.
  gyreResult_t result() const { return sharedCode != gyreSuccess ? sharedCode : gyreRemoteError; }
};

class Bootstrap {
 public:
  struct Params {
    UniqueIdContents id;
    uint64_t round = 0;
    int rank = 0;
    int nranks = 1;
    Deadline deadline;
    int64_t timeoutMs = 0;  // the deadline's length, told to the root (0: none)
    std::string ifname;
    int family = 0;
    uint64_t hostHash = 0;
  };

  // Rendezvous through the root named by params.id, then the ring.
  static std::unique_ptr<Bootstrap> create(const Params& params);
  // Without a root (a split): the listener and this rank's info first, then
  // complete() with a table the caller exchanged some other way. The
  // listener goes on `likeAddress`'s interface when it is loopback (a job
  // whose root is on loopback lives on one host), else on the chosen NIC.
  static std::unique_ptr<Bootstrap> prepare(const Params& params, const SockAddr& likeAddress);
  void complete(std::vector<PeerInfo> table, Deadline deadline);
  const PeerInfo& self() const { return self_; }
  // The secret connections between ranks present: the rendezvous secret
  // until complete(), then every rank's session key combined.
  const Secret& secret() const { return secret_; }
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }
  bool sameHost(int peer) const { return peers_[peer].hostHash == peers_[rank_].hostHash; }
  // "rank 3 (pid 1234 on host1)"
  std::string describe(int peer) const;

  // data holds nranks blocks of bytesPerRank; this rank's block is filled in.
  void allGather(void* data, size_t bytesPerRank, Deadline deadline);
  void barrier(Deadline deadline);

  // Collective (every rank calls it, once, after the rendezvous): when
  // GYRE_SOCKET_IFNAME was not set and `ifname` names an interface that is
  // up with an address of the bootstrap's family, other than the bootstrap
  // listener's interface, listen for data connections on that address; then
  // every rank learns every other's data address ("none" without one). An
  // empty or unusable `ifname` contributes "none": data connections to this
  // rank keep using the bootstrap listener.
  void openDataListener(const std::string& ifname, Deadline deadline);
  // Where `peer` is reached for data connections from this rank: its data
  // listener's address when it has one and is on another host, else the
  // bootstrap listener's.
  SockAddr dataAddress(int peer) const;
  // The interface this rank's data connections arrive on: "eth1 10.2.0.1".
  std::string dataInterface() const;

  // Verified connections to a peer for a purpose (kind, tag). Both sides name
  // the same (kind, tag); the lower rank connects, the higher accepts.
  // Data connections go through the data listeners when there are some.
  Socket connectTo(int peer, ConnKind kind, uint32_t tag, Deadline deadline);
  Socket acceptFrom(int peer, ConnKind kind, uint32_t tag, Deadline deadline);

  // For a shrink after failures, where other ranks' notices are expected
  // and not errors: a verified connection to `peer` (bootstrap listener),
  // or nullopt when it refuses (its process or communicator is gone), has
  // exited, or does not answer by the deadline.
  std::optional<Socket> connectToSurvivor(int peer, ConnKind kind, uint32_t tag, Deadline deadline);
  // Non-blocking: the connection `peer` made to this rank for (kind, tag),
  // if it has arrived (taken in from the listeners now).
  std::optional<Socket> takeArrived(int peer, ConnKind kind, uint32_t tag);
  // Waits at most capMs (or the deadline) for the listeners or `extra`.
  void waitForArrivals(std::vector<pollfd> extra, Deadline deadline, int capMs);
  // Whether a peer is known to have exited (liveness(): a pidfd on this host,
  // a watchPeer connection on another).
  bool knownDead(int peer) const { return liveness_.isDead(peer); }
  // For a transport that cannot see a peer die (UCX without its error
  // handling): lets liveness() watch `peer` where it does not yet, through a
  // connection to the peer's listener that nothing is sent on (the peer
  // files it and holds it; it ends with the peer's process or communicator).
  // TCP keepalive on it notices a host that went down without closing it.
  void watchPeer(int peer, Deadline deadline);
  static constexpr int kWatchKeepIdleSec = 10, kWatchKeepIntervalSec = 5, kWatchKeepProbes = 6;

  // Best effort, bounded: tell every peer this communicator failed.
  // waitingOn: for a timeout, the rank this rank's wait was stuck on.
  // sharedCode: a SharedFinding's code, which the peers fail with too.
  void notifyAbort(int originRank, const std::string& message, int waitingOn = -1,
                   gyreResult_t sharedCode = gyreSuccess);
  // After a failure of this rank's own making (or seen first here): tells
  // the peers, unless the news came from them already.
  void reportFailure(const Error& e);
  // A notice received from a peer, if one is pending (non-blocking; one
  // poll() when nothing is: cheap enough to ask before every call).
  std::optional<AbortNotice> pollAbortNotice();
  // Every notice received so far (after taking in what is pending).
  const std::vector<AbortNotice>& notices();

  // Statuses: short messages between ranks that are no failure (a stall
  // report's query and answers), opaque here. Best effort and bounded (a
  // fifth of a second): false when the peer could not be reached.
  bool sendStatus(int peer, const std::string& message);
  struct Status {
    int from = -1;
    std::string message;
  };
  // The statuses received since the last call (non-blocking; one poll()
  // when nothing is knocking).
  std::vector<Status> takeStatuses();
  // A notice as a sentence that names where the failure began.
  std::string explain(const AbortNotice& n) const;
  // Throws PeerFailed if a peer reported a failure or a local peer exited
  // (onlyPeer >= 0: only that peer's exit counts; the others may have
  // finished and left). Non-blocking; what every wait here calls.
  void checkPeers(int onlyPeer = -1);
  const PeerLiveness& liveness() const { return liveness_; }
  // What this rank's listeners turned away so far (for timeout messages).
  const Refusals& refusals() const { return refusals_; }

 private:
  Bootstrap() : incoming_(refusals_) {}
  SockAddr peerAddress(int peer) const;
  // A new connection's introduction: kind, tag, this rank and the secret.
  void sendHello(Socket& s, int peer, ConnKind kind, uint32_t tag, Deadline deadline);
  // Whether data connections between this rank and `peer` that `owner`
  // accepts go through owner's data listener.
  bool viaDataListener(int owner, int peer) const;
  // Accepts and reads whatever is pending on the listeners; files the
  // connections that introduced themselves properly, refuses the rest.
  void pumpListeners();
  // Whether a connection is waiting on a listener or half read (one poll()).
  bool anythingKnocking();
  void file(IncomingConnections::Arrival& a);
  // poll() on the listeners, the open handshakes, the ring and `extra` for
  // at most capMs (or the deadline).
  void waitForEvents(std::vector<pollfd> extra, Deadline deadline, int capMs);
  [[noreturn]] void throwNotice(const AbortNotice& n) const;
  // A peer is gone (`what` says how it showed): names it, after a moment's
  // look for a notice that names the real cause.
  [[noreturn]] void peerGone(int peer, const std::string& what);
  [[noreturn]] void ringPeerClosed(int peer);
  std::string timeoutSuffix() const;  // what was refused, for timeout messages

  int rank_ = 0;
  int nranks_ = 1;
  Secret secret_{};
  Socket listener_;       // on the chosen interface's address
  Socket localListener_;  // on loopback, for ranks of this host (unless listener_ is there already)
  std::string ifnameSpec_;  // GYRE_SOCKET_IFNAME: when set, it chose every interface
  std::string interface_;   // the bootstrap listener's interface
  Socket dataListener_;     // invalid: data connections come to listener_
  std::string dataInterface_;
  std::vector<SockAddr> dataAddrs_;  // by rank; family 0: none (use the listener)
  Socket ringNext_, ringPrev_;
  PeerInfo self_{};
  std::vector<PeerInfo> peers_;
  Refusals refusals_;
  IncomingConnections incoming_;
  std::map<std::tuple<int, uint32_t, uint32_t>, Socket> pending_;
  std::vector<IncomingConnections::Arrival>
      early_;  // data connections before openDataListener is done
  std::vector<AbortNotice> notices_;
  std::vector<Status> statuses_;
  PeerLiveness liveness_;
};

}  // namespace gyre::bootstrap
