// RAII TCP sockets with deadlines, for the bootstrap and the TCP transport.
// Blocking helpers use poll() so that every wait is bounded by a Deadline.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/clock.h"
#include "base/error.h"

namespace gyre::bootstrap {

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  std::string str() const;   // "1.2.3.4:5" or "[::1]:5"
  std::string host() const;  // "1.2.3.4" or "::1": without the port
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }

  // "host:port", "[v6]:port" or "host" (port 0); host may be a name.
  static SockAddr parse(const std::string& text, int familyHint = AF_UNSPEC);
  static SockAddr any(int family, uint16_t port);
  static SockAddr loopback(int family, uint16_t port);

  // Fixed 28-byte encoding (a sockaddr_in6 fits), for ids and peer tables.
  static constexpr size_t kPackedBytes = 28;
  void pack(uint8_t out[kPackedBytes]) const;
  static SockAddr unpack(const uint8_t in[kPackedBytes]);
};

// A connection attempt refused (nobody listens at the address), raised by
// connectTo when the caller says refusal is final (gyreRemoteError).
class ConnectionRefused : public Error {
 public:
  using Error::Error;
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

  static Socket listenOn(const SockAddr& bindAddr, int backlog = 512);
  // Retries refused/unreachable connections until the deadline (the listener
  // may not be up yet); throws Error(gyreTimeout) naming `who` when it passes.
  // refusedIsFinal: a listener known to have been up refuses only when its
  // process is gone, so a refusal throws ConnectionRefused at once.
  // whileRetrying runs between attempts (it may throw to give up).
  static Socket connectTo(const SockAddr& addr, Deadline deadline, const std::string& who,
                          bool refusedIsFinal = false,
                          const std::function<void()>& whileRetrying = {});
  Socket accept(Deadline deadline) const;
  // Non-blocking accept: an invalid socket when nothing is pending.
  Socket tryAccept() const;

  SockAddr localAddr() const;
  SockAddr peerAddr() const;  // an empty address (family 0) when not connected
  void setNonBlocking(bool on);
  void setNoDelay();
  void setBufferBytes(size_t bytes);
  // TCP keepalive: probes after idleSec without traffic, every intervalSec,
  // the connection reset after `probes` unanswered (a host that went down
  // without closing it).
  void setKeepAlive(int idleSec, int intervalSec, int probes);

  // Complete transfers bounded by the deadline. A closed peer is
  // Error(gyreRemoteError) naming `who`; an expired deadline Error(gyreTimeout).
  void sendAll(const void* data, size_t bytes, Deadline deadline, const std::string& who);
  void recvAll(void* data, size_t bytes, Deadline deadline, const std::string& who);
  // Moves what it can now (0 when it would block); a closed or reset peer is
  // Error(gyreRemoteError) naming `who`.
  size_t sendSome(const void* data, size_t bytes, const std::string& who);
  size_t recvSome(void* data, size_t bytes, const std::string& who);
  // Without blocking: true when the peer has closed its end and nothing
  // unread is left before the end (or the connection is reset).
  bool peerClosed() const;

 private:
  int fd_ = -1;
};

// Sends `out` to one socket while receiving `in` from another (they may be the
// same), so that two peers exchanging large blocks cannot deadlock on full
// kernel buffers.
void sendRecv(Socket& to, const void* out, size_t outBytes, Socket& from, void* in, size_t inBytes,
              Deadline deadline, const std::string& who);

}  // namespace gyre::bootstrap
