// The RDMA verbs transport (rdma-core's libibverbs): one reliable-connected
// queue pair per peer pair, on the device and port GYRE_IB_HCA allows
// (verbs_device.h). Made collectively through the bootstrap when the
// transport is created: every rank opens its device, makes a queue pair and
// a receive ring per peer, and all-gathers their numbers, ring addresses and
// keys with its LID/GID; then each brings its queue pairs up and all ranks
// agree, in a second exchange, that every one did, and in a third that each
// heard every peer's hello over its queue pair. A rank where any step
// fails says why, and then no rank uses verbs (canConnect names the rank
// and the reason), so a bad GYRE_IB_HCA or an unreachable GID is an error
// on every rank, never a hang.
//
// One completion queue serves every queue pair, with a completion channel
// to sleep on. Messages and their protocol: verbs_connection.h.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/memory_copy.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_device.h"

namespace gyre::transport {

class VerbsConnection;

class VerbsTransport final : public Transport {
 public:
  struct Options {
    std::string hca;                   // GYRE_IB_HCA (NCCL_IB_HCA's syntax)
    int gidIndex = -1;                 // GYRE_IB_GID_INDEX; -1: automatic
    int qpsPerPeer = 1;                // GYRE_IB_QPS_PER_CONNECTION: reads are split across them
    int slots = 16;                    // eager slots per direction and peer
    size_t slotBytes = 8192;           // each: a 64-byte header and up to 8128 bytes of payload
    size_t maxMessageBytes = 4 << 20;  // a plan's pieces
    int64_t spinNs = 20'000;
    MemoryCopy memoryCopy;
    // The GID this rank tells its peers, in place of its port's: a test's
    // way to make it unreachable (nothing in gyre sets it).
    std::optional<std::array<uint8_t, 16>> advertisedGid;
  };

  // Collective over every rank of the bootstrap, which must outlive the
  // transport. Throws only for a malformed GYRE_IB_HCA (the same on every
  // rank when the environment is); every other failure makes it unusable.
  static std::unique_ptr<VerbsTransport> create(bootstrap::Bootstrap& bootstrap,
                                                const Options& options, Deadline deadline);
  ~VerbsTransport() override;

  const char* name() const override { return "verbs"; }
  Capabilities capabilities() const override {
    return kDirectIO | kNeedsProgress | kPeerRead | kPeerWrite;
  }
  bool canConnect(int peer, std::string* whyNot) const override;
  void connect(std::span<const int> peers, Deadline deadline) override;
  Connection* connection(int peer) override;
  int64_t spinNs() const override { return options_.spinNs; }
  bool block(int64_t timeoutNs, FunctionRef<bool()> ready) override;
  bool hasPendingOutput() const override;
  void shutdown() override;
  void interrupt() override;

  // Takes the completions that have arrived to their connections; true if any.
  bool poll();
  const Options& options() const { return options_; }
  const VerbsDevice& device() const { return *device_; }
  ibv_cq* cq() const { return cq_; }
  bool peerExited(int peer) const { return bootstrap_->liveness().isDead(peer); }
  std::string describePeer(int peer) const { return bootstrap_->describe(peer); }

 private:
  VerbsTransport() = default;
  // The first stage: device, completion queue, a queue pair and ring per peer.
  std::string open();
  // The second: every queue pair up, toward the peers' (their QpInfo for us).
  std::string bringUp(const std::vector<uint8_t>& table, size_t stride);
  // The third: a hello over every queue pair, each heard from its peer.
  std::string hello(Deadline deadline);

  Options options_;
  bootstrap::Bootstrap* bootstrap_ = nullptr;
  int rank_ = 0;
  int nranks_ = 0;
  std::string unusable_;  // why no rank uses verbs (empty: usable)
  std::unique_ptr<VerbsDevice> device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int wakeFd_ = -1;  // an eventfd: interrupt() from another thread
  std::vector<std::unique_ptr<VerbsConnection>> peers_;  // by rank; made at creation
  std::vector<bool> handedOut_;                          // connect() made it visible
  std::unordered_map<uint32_t, VerbsConnection*> byQp_;  // completions to their connection
};

}  // namespace gyre::transport
