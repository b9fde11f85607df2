// One peer through a net plugin (net_transport.h): a send comm and a receive
// comm, each with staging slots registered once. A message is one plugin
// message from a slot: a 32-byte header (the payload's size and the
// MessageTag) and the payload. Receives stay posted in every free slot,
// oldest first, so the plugin matches them to the peer's sends in order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/net/net_plugin.h"
#include "transport/net/net_wire.h"
#include "transport/transport.h"

namespace gyre::transport {

class NetTransport;

class NetConnection final : public Connection {
 public:
  NetConnection(NetTransport& transport, int peer, std::string peerName, void* sendComm, void* recvComm);
  ~NetConnection() override;

  Transport& transport() override;
  int peer() const override { return peer_; }
  size_t maxMessageBytes() const override;

  void* trySendBuffer(size_t bytes) override;
  void sendCommit(size_t bytes, const MessageTag& tag) override;
  bool trySendFrom(const void* src, size_t bytes, const MessageTag& tag) override;
  const void* tryRecvBuffer(size_t bytes, const MessageTag& tag) override;
  void recvRelease(size_t bytes) override;
  bool tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) override;
  ProgressResult progress(ReadAhead readAhead) override;
  bool hasUnreadData() const override { return recvsArrived_ > recvsConsumed_; }

  bool hasQueuedOutput() const { return sendsDone_ < sendsCommitted_; }
  // Waits (bounded) for the sends in flight to be taken, then closes both
  // comms; at once when `flush` is false (after a failure).
  void close(bool flush) noexcept;

 private:
  using Header = net_wire::Header;
  struct Slot {
    std::unique_ptr<uint8_t[]> data;  // Header + payload
    void* mhandle = nullptr;
    void* request = nullptr;  // posted, not yet complete
    size_t arrived = 0;       // a receive's bytes, once complete
  };

  Slot& sendSlot(uint64_t n) { return sends_[n % sends_.size()]; }
  Slot& recvSlot(uint64_t n) { return recvs_[n % recvs_.size()]; }
  void throwIfClosed() const;
  // Runs a plugin call; its Error becomes a ConnectionError naming the peer.
  template <typename F>
  auto guarded(const char* what, F f) -> decltype(f());
  // Posts the committed sends (in order) the plugin has not taken yet, and
  // tests those in flight; true if any moved.
  bool pumpSends();
  // Posts receives into the free slots (in order) and tests the oldest.
  // A failure there is kept, not thrown: the peer may have sent all this
  // rank asks of it and exited; it is thrown when a message that did not
  // come is asked for.
  bool pumpRecvs() noexcept;

  NetTransport& transport_;
  NetPlugin& plugin_;
  int peer_;
  std::string peerName_;
  void* sendComm_;
  void* recvComm_;
  bool closed_ = false;
  std::unique_ptr<ConnectionError> recvFailure_;  // the receive side broke (pumpRecvs)
  std::vector<Slot> sends_, recvs_;
  // Sends: committed > posted > done; receives: posted > done (arrived and
  // checked) >= consumed (released).
  uint64_t sendsCommitted_ = 0, sendsPosted_ = 0, sendsDone_ = 0;
  uint64_t recvsPosted_ = 0, recvsArrived_ = 0, recvsConsumed_ = 0;
};

}  // namespace gyre::transport
