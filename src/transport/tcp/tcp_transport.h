// TCP transport: for ranks on different hosts, or every peer when forced
// (GYRE_TRANSPORT=tcp). Connections are made on first use through the
// bootstrap (verified by the communicator's secret; to a peer on another
// host at its data listener on its own NIC when it has one: the bootstrap
// decides, the transport only asks for a Data connection), TCP_NODELAY, with
// GYRE_NSOCKS_PERPEER sockets ("lanes") per peer; each message is split
// across the lanes.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/memory_copy.h"
#include "transport/transport.h"

namespace gyre::transport {

class TcpConnection;

class TcpTransport final : public Transport {
 public:
  struct Options {
    size_t chunkBytes = 256 << 10;
    int lanes = 1;
    size_t socketBufferBytes = 4 << 20;
    int stagingSlots = 4;
    int64_t spinNs = 20'000;
    MemoryCopy memoryCopy;
  };

  TcpTransport(bootstrap::Bootstrap& bootstrap, const Options& options);
  ~TcpTransport() override;

  const char* name() const override { return "tcp"; }
  // Sockets read and write the caller's memory; the send queue is user
  // space, moved by progress().
  Capabilities capabilities() const override { return kDirectIO | kGatherIO | kNeedsProgress | kMessageSyscalls; }
  // Any other rank: through the bootstrap's listeners, loopback on one host.
  bool canConnect(int peer, std::string* whyNot) const override;
  void connect(std::span<const int> peers, Deadline deadline) override;
  Connection* connection(int peer) override;
  int64_t spinNs() const override { return options_.spinNs; }
  bool block(int64_t timeoutNs, FunctionRef<bool()> ready) override;
  bool hasPendingOutput() const override;
  // Stops all I/O: peers see the connections close (a failure's account
  // reaches them through the bootstrap's notices).
  void shutdown() override { shutdownAll(); }
  // A call blocked in poll() wakes up as its sockets shut down.
  void interrupt() override { shutdownAll(); }

 private:
  void shutdownAll();

  bootstrap::Bootstrap& bootstrap_;
  Options options_;
  std::map<int, std::unique_ptr<TcpConnection>> connections_;
};

}  // namespace gyre::transport
