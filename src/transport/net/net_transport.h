// The net transport: peers reached through an external network plugin that
// speaks NCCL's net plugin interface (net_plugin.h), loaded from
// GYRE_NET_PLUGIN. Vendors ship their networks this way; gyre's own socket
// network is one too (libgyre-net-socket.so).
//
// Setting up, collectively through the bootstrap: every rank loads the
// plugin, picks a device, listens once and shares the listen handle; a
// connect makes a send comm to each peer and accepts the peer's, and the
// first message on each names its sender (plugins' accept does not say who
// connected). A rank where the plugin fails to load, has no known version,
// no device, or properties gyre cannot use says why in the same exchange,
// and then no rank uses it: the connection manager names the reason and
// falls back to the built-in transports.
//
// Messages go through staging slots registered with the plugin once
// (regMr is costly on real NICs): a 32-byte header (size and MessageTag)
// and the payload in one plugin message. Receives are posted ahead into
// every free slot, so a sender never waits for its peer to ask.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/memory_copy.h"
#include "transport/net/nccl_net_abi.h"
#include "transport/net/net_plugin.h"
#include "transport/transport.h"

namespace gyre::transport {

class NetConnection;

class NetTransport final : public Transport {
 public:
  struct Options {
    std::string plugin;            // GYRE_NET_PLUGIN: a path or a name
    int device = -1;               // GYRE_NET_DEVICE (-1: by the rank's place on its host)
    size_t pieceBytes = 1 << 20;   // a message's payload at most (less if the plugin says so)
    int slots = 4;                 // staging slots per direction and peer
    int64_t spinNs = 20'000;
    MemoryCopy memoryCopy;
  };

  // Collective over every rank of the bootstrap. Never throws for a plugin
  // that cannot be used: canConnect says why, on every rank.
  static std::unique_ptr<NetTransport> create(bootstrap::Bootstrap& bootstrap, const Options& options,
                                              Deadline deadline);
  ~NetTransport() override;

  const char* name() const override { return "net"; }
  Capabilities capabilities() const override { return kNeedsProgress; }
  bool canConnect(int peer, std::string* whyNot) const override;
  void connect(std::span<const int> peers, Deadline deadline) override;
  Connection* connection(int peer) override;
  int64_t spinNs() const override { return options_.spinNs; }
  bool block(int64_t timeoutNs, FunctionRef<bool()> ready) override;
  bool hasPendingOutput() const override;
  void shutdown() override;
  void interrupt() override;

  NetPlugin& plugin() { return *plugin_; }
  const Options& options() const { return options_; }
  size_t pieceBytes() const { return pieceBytes_; }
  // "plugin gyre-socket (v12, PATH) device eth0": for messages.
  const std::string& describePath() const { return description_; }

 private:
  NetTransport() = default;
  // Loads the plugin and checks the device; the reason it cannot be used,
  // or "" when it can.
  std::string open(bootstrap::Bootstrap& bs);

  Options options_;
  int rank_ = 0, nranks_ = 0;
  bootstrap::Bootstrap* bootstrap_ = nullptr;
  std::unique_ptr<NetPlugin> plugin_;
  int device_ = 0;
  size_t pieceBytes_ = 0;
  std::string unusable_;  // why no rank uses it (empty: usable)
  std::string description_;
  void* listenComm_ = nullptr;
  std::vector<std::vector<uint8_t>> handles_;  // every rank's listen handle
  std::vector<std::unique_ptr<NetConnection>> connections_;  // by peer
  // Accepted comms whose first message (the sender's rank) has not come yet.
  struct Arrival;
  std::vector<std::unique_ptr<Arrival>> arrivals_;
  std::vector<void*> acceptedFrom_;  // by peer: its comm to this rank, once known
  std::vector<void*> sendTo_;        // by peer: this rank's comm to it, once made
  std::atomic<bool> interrupted_{false};
};

}  // namespace gyre::transport
