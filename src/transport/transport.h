// The transport interface. A Connection carries ordered messages to and from
// one peer; it knows nothing of collectives. Every message carries a tag
// naming the call it belongs to; both ends agree on every message's size and
// tag (the plan says them), and the receiver checks both.
//
// All operations are non-blocking ("try"): waiting is the caller's loop,
// which spins briefly and then asks the transport to block the way that suits
// it (futex for shared memory, poll for sockets).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <optional>
#include <span>
#include <string>

#include "base/clock.h"
#include "base/error.h"
#include "base/function_ref.h"
#include "transport/capabilities.h"
#include "transport/memory.h"

namespace gyre::transport {

// 24 bytes that travel with every message, opaque to transports: the layer
// above writes them (the collectives layer: which call the message belongs
// to, collectives/call.h) and reads them back out of a MessageMismatch; a
// receiving transport only compares them, with the size, against what its
// caller expects.
struct MessageTag {
  uint64_t words[3] = {};
  bool operator==(const MessageTag&) const = default;
};
static_assert(sizeof(MessageTag) == 24);

// A failure on the connection to one peer (closed, reset, or a message of
// the wrong size), so the caller knows whom to ask what happened.
class ConnectionError : public Error {
 public:
  ConnectionError(gyreResult_t code, int peer, std::string message)
      : Error(code, std::move(message)), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

// A message arrived whose tag or size is not what this rank's caller expects
// (above: the ranks called different operations, counts, types, ops or
// roots). Both tags travel up for the layer that can read them.
class MessageMismatch : public ConnectionError {
 public:
  MessageMismatch(int peer, const MessageTag& gotTag, size_t gotSize, const MessageTag& expectedTag,
                  size_t expectedSize)
      : ConnectionError(gyreInvalidUsage, peer,
                        "message mismatch: got " + describe(gotTag, gotSize) + ", expected " +
                            describe(expectedTag, expectedSize)),
        got(gotTag),
        expected(expectedTag),
        gotBytes(gotSize),
        expectedBytes(expectedSize) {}
  MessageTag got, expected;
  size_t gotBytes, expectedBytes;

 private:
  // The raw words, for whoever reads the error below the layer that
  // knows what they mean (a transport's own tests).
  static std::string describe(const MessageTag& t, size_t bytes) {
    char b[96];
    std::snprintf(b, sizeof b, "%zu bytes tagged %llx/%llx/%llx", bytes,
                  static_cast<unsigned long long>(t.words[0]), static_cast<unsigned long long>(t.words[1]),
                  static_cast<unsigned long long>(t.words[2]));
    return b;
  }
};

// An asynchronous send or receive (Connection::isend, irecv): its
// direction and its place among that direction's requests.
struct Request {
  bool send = false;
  uint64_t seq = 0;
};

// How far a connection's progress() reads ahead of what its caller asked
// for, into staging, so that a sender stuck on this rank can go on.
enum class ReadAhead : uint8_t {
  None,
  // What the peer has already handed over and what holds up its sender
  // while it lies here: a socket's bytes, a ring's slots. Not a message its
  // sender keeps until the receive is posted (a rendezvous): taken now, it
  // would land in staging and be copied again, where the receive the plan
  // posts later has it land in place.
  Arrived,
  // Those too: a rank whose every lane waits on its own sends (a ring whose
  // pieces go by rendezvous) must pull them in, or the ranks wait on each
  // other.
  All,
};

struct ProgressResult {
  bool moved = false;        // some bytes moved
  bool sendBlocked = false;  // queued output could not be written (peer not reading)
};

class Transport;

class Connection {
 public:
  explicit Connection(Capabilities caps) : caps_(caps) {}
  virtual ~Connection() = default;

  virtual Transport& transport() = 0;
  virtual int peer() const = 0;
  // The largest message; the plans cut data into pieces of at most this.
  virtual size_t maxMessageBytes() const = 0;
  // What this connection can do (capabilities.h). Not virtual: the executor
  // asks per step.
  Capabilities capabilities() const { return caps_; }
  bool can(Capability c) const { return (caps_ & c) != 0; }

  // --- sending, in message order ---
  // Room for the next message, or nullptr while the peer has no space.
  // Idempotent until sendCommit.
  virtual void* trySendBuffer(size_t bytes) = 0;
  // Publishes the message written into the last trySendBuffer.
  virtual void sendCommit(size_t bytes, const MessageTag& tag) = 0;
  // Sends from caller memory. Resumable: call again with the same arguments
  // until it returns true; after that the caller may reuse src.
  virtual bool trySendFrom(const void* src, size_t bytes, const MessageTag& tag) = 0;

  // --- receiving, in message order ---
  // The next message once it has fully arrived, else nullptr; throws
  // MessageMismatch when its tag or size differ. Idempotent until release.
  // Host memory always: a message a peer's device wrote into our device
  // slot (kDeviceMessages) is copied out by the device first.
  virtual const void* tryRecvBuffer(size_t bytes, const MessageTag& tag) = 0;
  virtual void recvRelease(size_t bytes) = 0;
  // Receives the next message into dst. Resumable like trySendFrom.
  virtual bool tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) = 0;

  // --- messages whose payload lies in device memory (kDeviceMessages) ---
  // The receiver's side, before its device reads messages (idempotent):
  // makes device slots on GPU `device` for the messages from this peer and
  // tells the peer, whose device then writes its messages there. Messages
  // the peer sends before it sees them, or from host memory (a call of its
  // that was staged), still come through host memory. An Error when there
  // is no GPU, or it asks for another GPU than the first time. The default
  // refuses (a transport without the capability).
  virtual void acceptDeviceMessages(int device);
  // Room for the next message, for a sender whose device writes it: the
  // peer's device slot where the peer accepts device messages (a device
  // pointer), else the host room trySendBuffer gives; a null `data` while
  // the peer has no space. What the device enqueued there must have run
  // before sendCommit publishes it. Idempotent until sendCommit.
  struct Room {
    void* data = nullptr;
    MemoryType type = MemoryType::Host;
  };
  virtual Room trySendDeviceBuffer(size_t bytes) { return Room{trySendBuffer(bytes), MemoryType::Host}; }
  // The next message, wherever its payload lies: host memory (what
  // tryRecvBuffer gives) or our device slot (a device pointer, which only a
  // device may read; the reads must have run before recvRelease).
  struct Arrival {
    const void* data = nullptr;  // null: not arrived yet
    MemoryType type = MemoryType::Host;
  };
  virtual Arrival tryRecvMessage(size_t bytes, const MessageTag& tag) {
    return Arrival{tryRecvBuffer(bytes, tag), MemoryType::Host};
  }

  // --- messages in several runs of caller memory (a strided slice) ---
  // The message is the runs' concatenation (`bytes` in all). Resumable like
  // trySendFrom, with the same runs (the same array: a transport may keep
  // pointing at it) until it returns true. With kGatherIO the transport
  // moves the runs itself; the defaults copy them through the buffer form.
  virtual bool trySendRunsFrom(std::span<const iovec> runs, size_t bytes, const MessageTag& tag);
  virtual bool tryRecvRunsInto(std::span<const iovec> runs, size_t bytes, const MessageTag& tag);

  // --- memory (memory.h): one-sided access to registered ranges ---
  // Registers [p, p + bytes) of this process's memory for this peer; the
  // key goes to the peer in a message. Cheap where nothing is pinned
  // (shared memory registers by address); deregisterMemory releases what a
  // registration holds.
  // A registration lasts until deregisterMemory, which the owner calls once
  // the peer has said it is done with the range (a pinned region or a UCX
  // mapping is held until then).
  virtual RemoteKey registerMemory(const void* p, size_t bytes, MemoryType type = MemoryType::Host);
  virtual void deregisterMemory(const RemoteKey&) {}
  // The reader's side of the same end: done with a key the peer sent, it
  // frees what reading through the key held here (UCX: the unpacked rkey,
  // or the rkey's message still on its way). Never throws.
  virtual void releaseRemoteKey(const RemoteKey&) noexcept {}
  // Single copies between the peer's registered range and ours, at offset
  // within it (kPeerRead, kPeerWrite). Throw ConnectionError naming the peer
  // when the peer is gone, the access falls outside the key, or the
  // transport cannot.
  void get(void* dst, const RemoteKey& key, uint64_t offset, size_t bytes) {
    checkAccess(key, offset, bytes, "read");
    getImpl(dst, key, key.address + offset, bytes);
  }
  void put(const RemoteKey& key, uint64_t offset, const void* src, size_t bytes) {
    checkAccess(key, offset, bytes, "write");
    putImpl(key, key.address + offset, src, bytes);
  }
  // The peer's [offset, + bytes) of the range mapped into this process, to
  // read in place (kPeerMap), or nullptr when it cannot be (get still works).
  const void* map(const RemoteKey& key, uint64_t offset, size_t bytes) {
    checkAccess(key, offset, bytes, "map");
    return mapImpl(key, key.address + offset, bytes);
  }

  // Whether something the peer sent waits here unconsumed (a message, or
  // bytes of one). A peer that exited after sending it is not yet a
  // failure: the caller may be waiting for a later message that queues
  // behind one it has not consumed yet. Conservative default: no.
  virtual bool hasUnreadData() const { return false; }
  // Moves queued bytes between user space and the kernel (sockets); with
  // readAhead, also pulls in data nobody asked for yet, into staging, so a
  // peer blocked on a full pipe can go on.
  virtual ProgressResult progress(ReadAhead readAhead) = 0;

  // --- asynchronous messages: several outstanding per connection ---
  // Posts a send from (a receive into) caller memory, which must stay as it
  // is (unread) until the request completes. Requests complete in posting
  // order per direction, and take their place in the message order when
  // posted: do not use the try forms above while requests are outstanding.
  // test() moves what it can and says whether r has completed; it throws
  // what the try forms throw (MessageMismatch, ConnectionError). To wait,
  // block on the transport between tests (the connection manager's wait
  // handle). The defaults queue the requests over the try forms; a
  // transport with requests of its own (UCX, verbs, network plugins)
  // overrides all three.
  virtual Request isend(const void* src, size_t bytes, const MessageTag& tag);
  virtual Request irecv(void* dst, size_t bytes, const MessageTag& tag);
  virtual bool test(const Request& r);

 protected:
  // The one-sided accesses, at the peer's address, already checked to lie
  // within the key. The defaults refuse (a transport without the capability).
  virtual void getImpl(void* dst, const RemoteKey& key, uint64_t address, size_t bytes);
  virtual void putImpl(const RemoteKey& key, uint64_t address, const void* src, size_t bytes);
  virtual const void* mapImpl(const RemoteKey&, uint64_t, size_t) { return nullptr; }

 private:
  // Throws ConnectionError unless [offset, + bytes) lies within the key.
  void checkAccess(const RemoteKey& key, uint64_t offset, size_t bytes, const char* what) const;
  Capabilities caps_;
  struct Posted {
    void* data;
    size_t bytes;
    MessageTag tag;
  };
  std::deque<Posted> sends_, recvs_;  // posted, not yet completed, oldest first
  uint64_t sendsPosted_ = 0, sendsDone_ = 0, recvsPosted_ = 0, recvsDone_ = 0;
};

// A failure a peer reported through a transport (a local peer's flag in
// shared memory): the rank where it began and its sentence.
struct PeerReport {
  int origin = -1;
  std::string message;
};

// One way of reaching peers. The connection manager (connection_manager.h)
// asks each registered transport whether it can reach a peer, picks one per
// peer, and drives them all; nothing above it names a concrete transport.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // What its connections can do (the same for each of them).
  virtual Capabilities capabilities() const = 0;
  // What a message to `peer` costs, where that differs by peer: UCX's
  // messages are stores through its shared memory to a peer on this host
  // and system calls on its tcp to one on another (kMessageSyscalls).
  virtual Capabilities capabilitiesToward(int /*peer*/) const { return capabilities(); }
  // Whether it can connect this rank to peer (shared memory: the same host
  // and a segment mapped at creation), and if not, why, for the message that
  // names a peer no transport reaches.
  virtual bool canConnect(int peer, std::string* whyNot = nullptr) const = 0;
  // Makes connections to these peers (each of which it canConnect) that do
  // not exist yet. Collective: every listed peer calls it with this rank in
  // its list during the same operation.
  virtual void connect(std::span<const int> peers, Deadline deadline) = 0;
  // The connection to peer, or nullptr while there is none.
  virtual Connection* connection(int peer) = 0;
  // How long a waiter should busy-poll before blocking.
  virtual int64_t spinNs() const = 0;
  // Then, with a core of its own, how long it should keep looking (handing
  // the core to any other runnable thread between looks) before it sleeps:
  // where a message moves only in its receiver's looks (a rendezvous the
  // receiver reads), a waiter asleep holds its peer up until it wakes, and a
  // wake-up costs more than the wait (the communicator decides when ranks
  // outnumber cores).
  virtual int64_t yieldNs() const { return 0; }
  // Blocks until some connection of this transport may have changed state
  // or timeoutNs passes; spurious returns are allowed. It calls ready() once
  // it has armed its wake-up, and returns true if ready() did: a ready() that
  // completes an operation (trySendFrom) must not be called again.
  virtual bool block(int64_t timeoutNs, FunctionRef<bool()> ready) = 0;
  // True while queued output needs progress() calls to move.
  virtual bool hasPendingOutput() const = 0;
  // After a failure, first: tells the peers this transport reaches (those
  // with kReportsFailures can) where the failure began and its sentence.
  virtual void report(int /*origin*/, const std::string& /*sentence*/) {}
  // Then: stops all I/O, so that a peer waiting on this rank sees it at once.
  virtual void shutdown() = 0;
  // From any thread: wakes whoever is blocked in block() (gyreCommAbort).
  // It may stop I/O; a shutdown follows.
  virtual void interrupt() = 0;
  // A failure a peer reported through this transport, if any (kReportsFailures).
  virtual std::optional<PeerReport> peerReport() const { return std::nullopt; }
};

}  // namespace gyre::transport
