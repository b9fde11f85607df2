// The UCX transport: one UCP worker per communicator, tagged messages to
// every peer through UCX's own choice of wires (here tcp, posix/sysv shared
// memory and cma; on a cluster rc/dc/ud verbs, as UCX_TLS says). Workers
// exchange addresses through the bootstrap when the transport is created;
// endpoints are made on a peer's first use and need no handshake.
//
// Messages keep the connection's order through their UCP tag (the sender's
// rank and its sequence number toward this peer: the receiver asks for
// exactly the next one), and carry a 32-byte header (size and the opaque
// MessageTag) ahead of the payload in one iov send, so the receiver checks
// both and never lets a larger message past the end of its buffer.
// Waiting uses the worker's event descriptor (no busy spin when ranks
// outnumber cores).
#pragma once

#include <ucp/api/ucp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/memory_copy.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_wires.h"

namespace gyre::transport {

class UcxConnection;

class UcxTransport final : public Transport {
 public:
  // UCP tags hold a rank in 19 bits (ucx_connection.cc); a larger job does
  // not use UCX.
  static constexpr uint64_t kMaxRanks = uint64_t{1} << 19;

  struct Options {
    size_t maxMessageBytes = 4 << 20;  // a plan's pieces: UCX picks its own protocol per size
    int stagingSlots = 4;              // buffer-form sends in flight per connection
    // Up to this a message and its header go as one UCP message; larger
    // ones as the header, then the payload (ucx_connection.cc). Raised to
    // the eager limit where gyre sets UCX's rendezvous threshold (create).
    size_t onePartBytes = 8192;
    // The socket buffers UCX's tcp asks of the kernel (UCX_TCP_SNDBUF and
    // UCX_TCP_RCVBUF, where the user set neither); 0: UCX's default, the
    // kernel's autotuning. gyre's TCP asks for GYRE_TCP_BUFFER_BYTES.
    size_t socketBufferBytes = 0;
    int64_t spinNs = 20'000;
    // A large message over UCX's shared memory is a rendezvous the receiver
    // reads (cma) once its worker is looked at, and the sender's request
    // ends only when its own worker sees the receiver's answer: with a
    // waiter asleep, the pair's next piece waited for a wake-up (in this
    // VM a halted vCPU's, 0.1-1 ms). 2 ranks, AllToAll of 16-64 MiB
    // 1.3-2.6x the time of a waiter that keeps looking for 1 ms
    // (docs/PERFORMANCE-transports.md).
    int64_t yieldNs = 1'000'000;
    MemoryCopy memoryCopy;
    // Whether endpoints ask for peer failure handling (GYRE_UCX_ERROR_MODE;
    // ucx_wires.h).
    ucx_wires::ErrorMode errorMode = ucx_wires::ErrorMode::Auto;
  };

  // Collective over every rank of the bootstrap. A rank where UCX cannot
  // start still takes part; then no rank uses it, and canConnect says why.
  static std::unique_ptr<UcxTransport> create(bootstrap::Bootstrap& bootstrap, const Options& options,
                                              Deadline deadline);
  ~UcxTransport() override;

  const char* name() const override { return "ucx"; }
  Capabilities capabilities() const override {
    return kDirectIO | kNeedsProgress | kPeerRead | kPeerWrite |
           (overSockets_ ? Capabilities{kMessageSyscalls} : Capabilities{0}) |
           (largeInPlace_ ? Capabilities{kLargeInPlace} : Capabilities{0});
  }
  // A peer on this host over UCX's shared memory: its messages are no
  // system calls.
  Capabilities capabilitiesToward(int peer) const override;
  bool canConnect(int peer, std::string* whyNot) const override;
  void connect(std::span<const int> peers, Deadline deadline) override;
  Connection* connection(int peer) override;
  int64_t spinNs() const override { return options_.spinNs; }
  int64_t yieldNs() const override { return options_.yieldNs; }
  bool block(int64_t timeoutNs, FunctionRef<bool()> ready) override;
  bool hasPendingOutput() const override;
  void shutdown() override;
  void interrupt() override;

  ucp_worker_h worker() const { return worker_; }
  // One look at the worker, which every connection shares; counted, so that
  // a connection's progress() can tell whether anyone looked since it last
  // did (the connection manager asks each connection in turn: one look per
  // round is enough, each was an epoll_wait).
  unsigned progressWorker() {
    ++workerLooks_;
    const unsigned events = ucp_worker_progress(worker_);
    workerEvents_ += events;
    return events;
  }
  uint64_t workerLooks() const { return workerLooks_; }
  // What the worker's looks have taken in or sent on, counted, whoever
  // looked (a receive's own look, or progress()).
  uint64_t workerEvents() const { return workerEvents_; }
  ucp_context_h context() const { return context_; }
  // Frees what UCX may still write into (a buffer of a request that would
  // not end) only once the worker is destroyed.
  void deferFree(std::function<void()> f) { deferredFrees_.push_back(std::move(f)); }
  int rank() const { return rank_; }
  const Options& options() const { return options_; }
  // Whether this rank's endpoints ask UCX for peer failure handling.
  bool peerErrors() const { return peerErrors_; }
  // Whether the bootstrap has seen peer's process exit (its pidfd on this
  // host, the connection that watches it on another: connect() asks for it
  // where UCX reports nothing).
  bool peerExited(int peer) const { return bootstrap_ && bootstrap_->liveness().isDead(peer); }
  // Whether peerExited says so only after a grace of its own (a peer on
  // another host, seen through a connection that closed).
  bool peerExitHasGrace(int peer) const { return bootstrap_ && bootstrap_->liveness().deathHasGrace(peer); }
  // Where a receive posted before its message came puts what is past the
  // caller's buffer (a longer message, which is then refused): room for the
  // largest one-part message any rank sends. Made on first use; it lives
  // past the worker, so nothing UCX still writes can outlive it.
  uint8_t* overflow();

 private:
  UcxTransport() = default;

  Options options_;
  int rank_ = 0;
  int nranks_ = 0;
  std::string unusable_;  // why no rank uses UCX (empty: usable)
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int eventFd_ = -1;
  uint64_t workerLooks_ = 0;
  uint64_t workerEvents_ = 0;
  bool overSockets_ = false;  // UCX may not use RDMA here: its wire is tcp
  bool peerErrors_ = true;    // endpoints with UCP_ERR_HANDLING_MODE_PEER
  bool largeInPlace_ = false;  // every rank's large messages land in place (kLargeInPlace)
  bool localSharedMemory_ = false;  // every rank's UCX may reach its host's peers through shared memory
  std::vector<std::vector<uint8_t>> addresses_;             // every rank's worker address
  std::vector<std::unique_ptr<UcxConnection>> connections_;  // by peer; null until made
  std::function<std::string(int)> describe_;                 // a peer, for messages
  bootstrap::Bootstrap* bootstrap_ = nullptr;                // its watch of peers' processes
  std::vector<std::function<void()>> deferredFrees_;
  std::unique_ptr<uint8_t[]> overflow_;
};

}  // namespace gyre::transport
