// The connection manager: the transports this rank has, which of them
// reaches each peer, and what is done to all of them at once (connect,
// progress, the wait handle, abort). The communicator keeps the policy
// (when to wait, for how long, how to name a failure) and names no concrete
// transport; a new transport is a new registration, not a new case in it.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/function_ref.h"
#include "transport/transport.h"

namespace gyre::transport {

class ConnectionManager {
 public:
  ConnectionManager(int rank, int nranks);
  ~ConnectionManager();

  // Registers a transport. Among those that can connect a peer, the highest
  // priority wins. A disabled one (disabledBy names the setting, e.g.
  // "GYRE_TRANSPORT=tcp") is never chosen, but is named when no transport
  // reaches a peer.
  void add(std::unique_ptr<Transport> transport, int priority, std::string disabledBy = {});
  // Picks the transport of every peer, and takes the connections that
  // exist already (shared memory connects at creation). Throws
  // Error(gyreInvalidArgument) naming the first peer that no transport
  // reaches, with each transport's reason.
  void choose(FunctionRef<std::string(int)> describePeer);

  Transport& transportOf(int peer) const { return *chosen_[static_cast<size_t>(peer)]; }
  // The connection to peer, or nullptr until connect() made it.
  Connection* connection(int peer) const { return connections_[static_cast<size_t>(peer)]; }
  // Makes the connections to these peers that do not exist yet, each through
  // its transport, transports in priority order. Collective: every listed
  // peer calls it with this rank in its list during the same operation.
  void connect(std::span<const int> peers, Deadline deadline);
  // True when the transport of every peer has c (false with no peers).
  bool everyPeerCan(Capability c) const;

  // Moves queued output on the connections that need it; when a send is
  // stuck (its peer is not reading), reads ahead on all of them as far as
  // whenBlocked says, so that a cycle of full pipes cannot stall every rank.
  // True when some connection moved bytes.
  bool progress(ReadAhead whenBlocked = ReadAhead::All);
  // The wait handle: blocks on `primary` (the transport of what the caller
  // waits for) up to sliceNs, cut to 1 ms when the wait spans transports or
  // another transport has output only progress() moves. Returns true when
  // ready() returned true (see Transport::block).
  bool block(Transport& primary, bool spansTransports, int64_t sliceNs, FunctionRef<bool()> ready);

  // After a failure: the transports that can tell their peers where it
  // began (report), then every transport stops its I/O (shutdown). The
  // caller reports through the bootstrap in between, so that a peer that
  // sees a connection close finds the account already sent.
  void report(int origin, const std::string& sentence);
  void shutdown();
  // From any thread: wakes a call blocked in any transport.
  void interrupt();
  // A failure a peer reported through a transport, if any.
  std::optional<PeerReport> peerReport() const;

  // For the log: "shm to 3 peers, tcp to 4 peers".
  std::string describeChoices() const;

 private:
  struct Registered {
    std::unique_ptr<Transport> transport;
    int priority = 0;
    std::string disabledBy;
  };
  // Rebuilds needProgress_ from the connections made so far.
  void listNeedProgress();

  int rank_;
  std::vector<Registered> transports_;  // highest priority first
  std::vector<Transport*> chosen_;      // by peer (null for this rank)
  std::vector<Connection*> connections_;  // by peer; null until made
  std::vector<Connection*> needProgress_;  // made connections with kNeedsProgress, by peer
  std::vector<Transport*> reporters_;     // transports with kReportsFailures
};

}  // namespace gyre::transport
