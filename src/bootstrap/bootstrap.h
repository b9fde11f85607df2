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
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace gyre::bootstrap {

// What each rank tells every other at rendezvous. Fixed size, plain bytes.
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;
  uint8_t listenAddr[SockAddr::kPackedBytes];
  int32_t cpus;  // CPUs the rank may run on
  uint32_t reserved;
  char hostName[64];
  uint64_t probeAddress;  // a known value in this process, to test reading its memory
  uint64_t cpuMask[16];   // topology::cpuMask: which CPUs it may run on
};

// The value at PeerInfo::probeAddress in every gyre process.
extern const uint64_t kMemoryProbe;

enum class ConnKind : uint32_t { Ring = 1, Data = 2, AbortNotice = 3 };

class Bootstrap {
 public:
  struct Params {
    UniqueIdContents id;
    uint64_t round = 0;
    int rank = 0;
    int nranks = 1;
    Deadline deadline;
    std::string ifname;
    int family = 0;
    uint64_t hostHash = 0;
  };

  // Rendezvous through the root named by params.id, then the ring.
  static std::unique_ptr<Bootstrap> create(const Params& params);
  // Without a root (a split): the listener and this rank's info first, then
  // complete() with a table the caller exchanged some other way.
  static std::unique_ptr<Bootstrap> prepare(const Params& params, int rootFamily);
  void complete(std::vector<PeerInfo> table, Deadline deadline);
  const PeerInfo& self() const { return self_; }
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
  // listener's address when it has one and is on another host (ranks of one
  // host meet on loopback), else the bootstrap listener's.
  SockAddr dataAddress(int peer) const;
  // The interface this rank's data connections arrive on: "eth1 10.2.0.1".
  std::string dataInterface() const;

  // Verified connections to a peer for a purpose (kind, tag). Both sides name
  // the same (kind, tag); the lower rank connects, the higher accepts.
  // Data connections go through the data listeners when there are some.
  Socket connectTo(int peer, ConnKind kind, uint32_t tag, Deadline deadline);
  Socket acceptFrom(int peer, ConnKind kind, uint32_t tag, Deadline deadline);

  // Best effort, bounded: tell every peer this communicator failed.
  void notifyAbort(int originRank, const std::string& message);
  // A notice received from a peer, if one is pending (non-blocking).
  std::optional<std::pair<int, std::string>> pollAbortNotice();

 private:
  Bootstrap() = default;
  SockAddr peerAddress(int peer) const;
  // Whether data connections between this rank and `peer` that `owner`
  // accepts go through owner's data listener.
  bool viaDataListener(int owner, int peer) const;
  // Accepts one pending connection on `listener` (the bootstrap's or the
  // data listener) and files it; returns false if none.
  bool acceptOne(const Socket& listener, Deadline handshakeDeadline);

  int rank_ = 0;
  int nranks_ = 1;
  Secret secret_{};
  Socket listener_;
  std::string ifnameSpec_;  // GYRE_SOCKET_IFNAME: when set, it chose every interface
  std::string interface_;   // the bootstrap listener's interface
  Socket dataListener_;     // invalid: data connections come to listener_
  std::string dataInterface_;
  std::vector<SockAddr> dataAddrs_;  // by rank; family 0: none (use the listener)
  Socket ringNext_, ringPrev_;
  PeerInfo self_{};
  std::vector<PeerInfo> peers_;
  std::map<std::tuple<int, uint32_t, uint32_t>, Socket> pending_;
  std::vector<std::pair<int, std::string>> notices_;
};

}  // namespace gyre::bootstrap
