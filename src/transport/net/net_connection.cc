#include "transport/net/net_connection.h"

#include <cstring>

#include "base/log.h"
#include "transport/net/net_transport.h"
#include "transport/net/net_wire.h"

namespace gyre::transport {

namespace {

// How long the end of a communicator waits for its last sends to be taken.
constexpr int64_t kFlushMs = 10000;
// The tag every message carries in the plugin's own matching: gyre matches
// by order and checks its header instead.
constexpr int kPluginTag = 0x6779;

}  // namespace

NetConnection::NetConnection(NetTransport& transport, int peer, std::string peerName, void* sendComm, void* recvComm)
    : Connection(transport.capabilities()),
      transport_(transport),
      plugin_(transport.plugin()),
      peer_(peer),
      peerName_(std::move(peerName)),
      sendComm_(sendComm),
      recvComm_(recvComm) {
  const size_t slotBytes = sizeof(Header) + transport.pieceBytes();
  const size_t n = static_cast<size_t>(transport.options().slots);
  sends_.resize(n);
  recvs_.resize(n);
  for (auto* side : {&sends_, &recvs_}) {
    void* comm = side == &sends_ ? sendComm_ : recvComm_;
    for (Slot& s : *side) {
      s.data.reset(new uint8_t[slotBytes]);
      s.mhandle = guarded("registering staging", [&] { return plugin_.registerMemory(comm, s.data.get(), slotBytes); });
    }
  }
  pumpRecvs();  // the first receives go up at once
}

NetConnection::~NetConnection() { close(true); }

Transport& NetConnection::transport() { return transport_; }

size_t NetConnection::maxMessageBytes() const { return transport_.pieceBytes(); }

template <typename F>
auto NetConnection::guarded(const char* what, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const MessageMismatch&) {
    throw;
  } catch (const ConnectionError&) {
    throw;
  } catch (const Error& e) {
    throw ConnectionError(e.code(), peer_, "the connection to " + peerName_ + " (" + what + "): " + e.what());
  }
}

void NetConnection::throwIfClosed() const {
  if (closed_) throw ConnectionError(gyreRemoteError, peer_, "net: the connection to " + peerName_ + " is closed");
}

bool NetConnection::pumpSends() {
  bool moved = false;
  // In order: the plugin matches sends to the peer's receives by order.
  while (sendsPosted_ < sendsCommitted_) {
    Slot& s = sendSlot(sendsPosted_);
    const size_t bytes = sizeof(Header) + reinterpret_cast<const Header*>(s.data.get())->bytes;
    s.request = guarded("send", [&] { return plugin_.isend(sendComm_, s.data.get(), bytes, kPluginTag, s.mhandle); });
    if (!s.request) break;  // the plugin is full: again later
    ++sendsPosted_;
    moved = true;
  }
  while (sendsDone_ < sendsPosted_) {
    Slot& s = sendSlot(sendsDone_);
    if (!guarded("send", [&] { return plugin_.test(s.request, nullptr); })) break;
    s.request = nullptr;
    ++sendsDone_;
    moved = true;
  }
  return moved;
}

bool NetConnection::pumpRecvs() noexcept {
  // Tests what is posted, in order; a failure stops there (that receive
  // and those after it cannot complete) and is kept.
  auto testPosted = [&] {
    bool moved = false;
    try {
      while (recvsArrived_ < recvsPosted_) {
        Slot& s = recvSlot(recvsArrived_);
        size_t got = 0;
        if (!guarded("receive", [&] { return plugin_.test(s.request, &got); })) break;
        s.request = nullptr;
        s.arrived = got;
        ++recvsArrived_;
        moved = true;
      }
    } catch (const ConnectionError& e) {
      if (!recvFailure_) recvFailure_ = std::make_unique<ConnectionError>(e);
    }
    return moved;
  };
  // Completed receives count even after a failure: a peer that sent its
  // last message and closed fails the receives after it, not the one
  // holding that message (which a later post may have completed).
  bool moved = testPosted();
  if (recvFailure_) return moved;
  try {
    while (recvsPosted_ < recvsConsumed_ + recvs_.size()) {
      Slot& s = recvSlot(recvsPosted_);
      s.request = guarded("receive", [&] {
        return plugin_.irecv(recvComm_, s.data.get(), sizeof(Header) + transport_.pieceBytes(), kPluginTag,
                             s.mhandle);
      });
      if (!s.request) break;
      ++recvsPosted_;
    }
  } catch (const ConnectionError& e) {
    recvFailure_ = std::make_unique<ConnectionError>(e);
  }
  return testPosted() || moved;
}

void* NetConnection::trySendBuffer(size_t bytes) {
  throwIfClosed();
  if (bytes > transport_.pieceBytes())
    throw ConnectionError(gyreInternalError, peer_,
                          "net: a message of " + std::to_string(bytes) + " bytes is larger than the largest (" +
                              std::to_string(transport_.pieceBytes()) + ")");
  if (sendsCommitted_ - sendsDone_ >= sends_.size()) {
    pumpSends();
    if (sendsCommitted_ - sendsDone_ >= sends_.size()) return nullptr;
  }
  return sendSlot(sendsCommitted_).data.get() + sizeof(Header);
}

void NetConnection::sendCommit(size_t bytes, const MessageTag& tag) {
  Slot& s = sendSlot(sendsCommitted_);
  Header h{bytes, tag};
  std::memcpy(s.data.get(), &h, sizeof(h));
  ++sendsCommitted_;
  pumpSends();
}

bool NetConnection::trySendFrom(const void* src, size_t bytes, const MessageTag& tag) {
  void* room = trySendBuffer(bytes);
  if (!room) return false;
  transport_.options().memoryCopy.copy(room, src, bytes, false);
  sendCommit(bytes, tag);
  return true;
}

const void* NetConnection::tryRecvBuffer(size_t bytes, const MessageTag& tag) {
  throwIfClosed();
  if (recvsArrived_ == recvsConsumed_) {
    pumpRecvs();
    if (recvsArrived_ == recvsConsumed_) {
      if (recvFailure_) throw *recvFailure_;
      return nullptr;
    }
  }
  const Slot& s = recvSlot(recvsConsumed_);
  net_wire::checkArrived(s.data.get(), sizeof(Header) + transport_.pieceBytes(), s.arrived, bytes, tag, peer_,
                         peerName_, plugin_.describe());
  return s.data.get() + sizeof(Header);
}

void NetConnection::recvRelease(size_t) {
  ++recvsConsumed_;
  pumpRecvs();  // the slot goes back up for a later message
}

bool NetConnection::tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) {
  const void* p = tryRecvBuffer(bytes, tag);
  if (!p) return false;
  transport_.options().memoryCopy.copy(dst, p, bytes, false);
  recvRelease(bytes);
  return true;
}

ProgressResult NetConnection::progress(ReadAhead) {
  ProgressResult r;
  if (closed_) return r;
  // Receives are always posted ahead, so a peer's sends drain into staging
  // whether or not this rank asked for them yet (read-ahead comes free).
  r.moved = pumpSends();
  r.moved |= pumpRecvs();
  r.sendBlocked = hasQueuedOutput() && !r.moved;
  return r;
}

void NetConnection::close(bool flush) noexcept {
  if (closed_) return;
  closed_ = true;
  if (flush) {
    // What was committed must reach the peer before the comm goes.
    const Deadline d = Deadline::afterMs(kFlushMs);
    try {
      while (hasQueuedOutput() && !d.expired()) {
        pumpSends();
        pumpRecvs();  // a peer may need this side to drain before it can take more
      }
    } catch (const Error& e) {
      GYRE_INFO("net: closing the connection to %s: %s", peerName_.c_str(), e.what());
    }
  }
  for (Slot& s : sends_)
    if (s.mhandle) plugin_.deregisterMemory(sendComm_, s.mhandle);
  for (Slot& s : recvs_)
    if (s.mhandle) plugin_.deregisterMemory(recvComm_, s.mhandle);
  // The plugin frees the requests still posted with their comm.
  plugin_.closeSend(sendComm_);
  plugin_.closeRecv(recvComm_);
}

}  // namespace gyre::transport
