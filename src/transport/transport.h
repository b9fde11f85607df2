// The transport interface. A Connection carries ordered messages to and from
// one peer; it knows nothing of collectives. Every message carries a tag
// naming the call it belongs to; both ends agree on every message's size and
// tag (the plan says them), and the receiver checks both.
//
// All operations are non-blocking ("try"): waiting is the caller's loop,
// which spins briefly and then asks the transport to block the way that suits
// it (futex for shared memory, poll for sockets).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "base/function_ref.h"

namespace gyre::transport {

// Opaque to transports: which call a message belongs to. The collectives
// layer fills it in and decodes it for error messages.
struct MessageTag {
  uint64_t call = 0;
  uint64_t count = 0;
  int32_t root = 0;
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  uint8_t flags = 0;
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

// A message arrived whose tag or size is not what this rank's call expects:
// the ranks called different operations, counts, types, ops or roots.
class MessageMismatch : public ConnectionError {
 public:
  MessageMismatch(int peer, const MessageTag& gotTag, size_t gotSize, const MessageTag& expectedTag,
                  size_t expectedSize)
      : ConnectionError(gyreInvalidUsage, peer, "message mismatch"),
        got(gotTag),
        expected(expectedTag),
        gotBytes(gotSize),
        expectedBytes(expectedSize) {}
  MessageTag got, expected;
  size_t gotBytes, expectedBytes;
};

struct ProgressResult {
  bool moved = false;        // some bytes moved
  bool sendBlocked = false;  // queued output could not be written (peer not reading)
};

// Names memory a local peer may map instead of reading it through the
// kernel: the owner's allocation (an id unique to it, its address range in
// the owner, and the descriptor to open it by). id 0: none.
struct SharedMemoryKey {
  uint64_t id = 0;
  uint64_t base = 0;
  uint64_t bytes = 0;
  int64_t fd = -1;
};
static_assert(sizeof(SharedMemoryKey) == 32);

class Transport;

class Connection {
 public:
  virtual ~Connection() = default;

  virtual Transport& transport() = 0;
  virtual int peer() const = 0;
  // The largest message; the plans cut data into pieces of at most this.
  virtual size_t maxMessageBytes() const = 0;
  // True when sending from / receiving into the caller's memory saves a copy
  // compared with the buffer interface (sockets); false for shared memory,
  // where writing straight into the peer-visible buffer is cheapest.
  virtual bool prefersDirect() const = 0;

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
  virtual const void* tryRecvBuffer(size_t bytes, const MessageTag& tag) = 0;
  virtual void recvRelease(size_t bytes) = 0;
  // Receives the next message into dst. Resumable like trySendFrom.
  virtual bool tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) = 0;

  // Copies bytes straight from the peer process's memory (single copy: the
  // peer's buffer to ours). Only where the transport can (shared memory with
  // cross-process reads); throws ConnectionError when the peer is gone or
  // the range is not its memory.
  virtual void readPeerMemory(void* dst, uint64_t remoteAddress, size_t bytes);
  // The key this side offers the peer for memory at p (empty if the peer
  // cannot map it), and on the other side, the peer's memory
  // [remoteAddress, +bytes) mapped into this process, or nullptr when it
  // cannot be (then readPeerMemory still works).
  virtual SharedMemoryKey shareKey(const void*) { return {}; }
  virtual const void* mapPeerMemory(uint64_t, size_t, const SharedMemoryKey&) { return nullptr; }

  // Moves queued bytes between user space and the kernel (sockets); with
  // readAhead, also pulls in data nobody asked for yet, into staging, so a
  // peer blocked on a full pipe can go on.
  virtual ProgressResult progress(bool readAhead) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // How long a waiter should busy-poll before blocking.
  virtual int64_t spinNs() const = 0;
  // Blocks until some connection of this transport may have changed state
  // or timeoutNs passes; spurious returns are allowed. It calls ready() once
  // it has armed its wake-up, and returns true if ready() did: a ready() that
  // completes an operation (trySendFrom) must not be called again.
  virtual bool block(int64_t timeoutNs, FunctionRef<bool()> ready) = 0;
  // True while queued output needs progress() calls to move.
  virtual bool hasPendingOutput() const = 0;
};

inline void Connection::readPeerMemory(void*, uint64_t, size_t) {
  throw ConnectionError(gyreInternalError, peer(), "this transport cannot read a peer's memory");
}

}  // namespace gyre::transport
