#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "base/error.h"

namespace gyre::bootstrap {

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(p);
}

bool SockAddr::isLoopback() const {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
  return false;
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host,
              sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host,
              sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

std::string SockAddr::host() const {
  const std::string s = str();
  if (family() == AF_INET6) return s.substr(1, s.rfind(']') - 1);
  if (family() == AF_INET) return s.substr(0, s.rfind(':'));
  return s;
}

SockAddr SockAddr::parse(const std::string& text, int familyHint) {
  std::string host = text, port = "0";
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos)
      throwError(gyreInvalidArgument, "address '" + text + "' has '[' without ']'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':')
        throwError(gyreInvalidArgument, "address '" + text + "' is malformed");
      port = text.substr(close + 2);
    }
  } else if (size_t colon = text.rfind(':');
             colon != std::string::npos && text.find(':') == colon) {  // one colon: host:port
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 0 || p > 65535)
    throwError(gyreInvalidArgument, "address '" + text + "' has an invalid port");
  addrinfo hints{};
  hints.ai_family = familyHint;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    throwError(gyreInvalidArgument, "cannot resolve host '" + host + "': " + gai_strerror(rc));
  SockAddr a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  a.setPort(static_cast<uint16_t>(p));
  return a;
}

SockAddr SockAddr::any(int family, uint16_t port) {
  SockAddr a;
  if (family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    s->sin6_addr = in6addr_any;
    a.len = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    s->sin_family = AF_INET;
    s->sin_addr.s_addr = htonl(INADDR_ANY);
    a.len = sizeof(sockaddr_in);
  }
  a.setPort(port);
  return a;
}

SockAddr SockAddr::loopback(int family, uint16_t port) {
  SockAddr a = any(family, port);
  if (family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_addr = in6addr_loopback;
  else
    reinterpret_cast<sockaddr_in*>(&a.storage)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

void SockAddr::pack(uint8_t out[kPackedBytes]) const {
  std::memset(out, 0, kPackedBytes);
  std::memcpy(out, &storage, len < kPackedBytes ? len : kPackedBytes);
}

SockAddr SockAddr::unpack(const uint8_t in[kPackedBytes]) {
  SockAddr a;
  std::memcpy(&a.storage, in, kPackedBytes);
  a.len = a.family() == AF_INET6  ? sizeof(sockaddr_in6)
          : a.family() == AF_INET ? sizeof(sockaddr_in)
                                  : 0;
  return a;
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listenOn(const SockAddr& bindAddr, int backlog) {
  Socket s(::socket(bindAddr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throwSystemError("socket()", errno);
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), bindAddr.sa(), bindAddr.len) != 0)
    throwSystemError("cannot listen on " + bindAddr.str(), errno);
  if (::listen(s.fd(), backlog) != 0) throwSystemError("listen() on " + bindAddr.str(), errno);
  return s;
}

namespace {

// Connecting to a free port in the ephemeral range can, rarely, connect the
// socket to itself (TCP simultaneous open). That is no listener at all.
bool isSelfConnection(const Socket& s) {
  SockAddr local, peer;
  local.len = peer.len = sizeof(sockaddr_storage);
  if (getsockname(s.fd(), local.sa(), &local.len) != 0 ||
      getpeername(s.fd(), peer.sa(), &peer.len) != 0)
    return false;
  return local.len == peer.len && local.str() == peer.str();
}

}  // namespace

Socket Socket::connectTo(const SockAddr& addr, Deadline deadline, const std::string& who,
                         bool refusedIsFinal, const std::function<void()>& whileRetrying) {
  int backoffMs = 1;
  for (;;) {
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) throwSystemError("socket()", errno);
    int rc = ::connect(s.fd(), addr.sa(), addr.len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      int n = ::poll(&p, 1, deadline.pollMs(1000));
      if (n > 0) {
        socklen_t l = sizeof(err);
        getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &l);
      } else {
        err = ETIMEDOUT;
      }
    }
    if (err == 0 && isSelfConnection(s)) err = ECONNREFUSED;  // nobody listens there yet
    if (err == 0) {
      s.setNonBlocking(false);
      return s;
    }
    if (err == ECONNREFUSED && refusedIsFinal)
      throw ConnectionRefused(gyreRemoteError, who + " refuses connections at " + addr.str());
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH ||
                 err == EHOSTUNREACH || err == ECONNRESET || err == EAGAIN || err == EINTR;
    if (!retry) throwSystemError("cannot connect to " + who + " at " + addr.str(), err);
    if (deadline.expired())
      throwError(gyreTimeout, "timed out connecting to " + who + " at " + addr.str() + " (" +
                                  std::strerror(err) + ")");
    if (whileRetrying) whileRetrying();
    // The listener may not be up yet: back off, but never past the deadline.
    int64_t sleepNs = std::min<int64_t>(int64_t(backoffMs) * 1'000'000, deadline.remainingNs());
    std::this_thread::sleep_for(std::chrono::nanoseconds(sleepNs));
    backoffMs = std::min(backoffMs * 2, 100);
  }
}

Socket Socket::accept(Deadline deadline) const {
  for (;;) {
    Socket s = tryAccept();
    if (s.valid()) return s;
    if (deadline.expired()) throwError(gyreTimeout, "timed out waiting for a connection");
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, deadline.pollMs(1000));
  }
}

Socket Socket::tryAccept() const {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Socket s(fd);
      s.setNonBlocking(false);
      return s;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Socket();
    throwSystemError("accept()", errno);
  }
}

SockAddr Socket::localAddr() const {
  SockAddr a;
  a.len = sizeof(a.storage);
  if (getsockname(fd_, a.sa(), &a.len) != 0) throwSystemError("getsockname()", errno);
  return a;
}

SockAddr Socket::peerAddr() const {
  SockAddr a;
  a.len = sizeof(a.storage);
  if (getpeername(fd_, a.sa(), &a.len) != 0) return SockAddr();
  return a;
}

void Socket::setNonBlocking(bool on) {
  int flags = fcntl(fd_, F_GETFL);
  fcntl(fd_, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void Socket::setNoDelay() {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Socket::setKeepAlive(int idleSec, int intervalSec, int probes) {
  int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &idleSec, sizeof(idleSec));
  setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &intervalSec, sizeof(intervalSec));
  setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

void Socket::setBufferBytes(size_t bytes) {
  // The kernel takes an int (and caps it at net.core.[rw]mem_max): a larger
  // GYRE_TCP_BUFFER_BYTES asks for the most, never a truncated number.
  int v = bytes > size_t(INT_MAX) ? INT_MAX : static_cast<int>(bytes);
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

namespace {

// One poll-driven step of a transfer: returns bytes moved (0 on EAGAIN).
size_t ioStep(int fd, bool sending, void* buf, size_t bytes, const std::string& who) {
  for (;;) {
    ssize_t n = sending ? ::send(fd, buf, bytes, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : ::recv(fd, buf, bytes, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0 && !sending) throwError(gyreRemoteError, who + " closed the connection");
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0 && (errno == ECONNRESET || errno == EPIPE))
      throwError(gyreRemoteError, who + " reset the connection");
    throwSystemError(std::string(sending ? "send to " : "recv from ") + who, errno);
  }
}

}  // namespace

size_t Socket::sendSome(const void* data, size_t bytes, const std::string& who) {
  return ioStep(fd_, true, const_cast<void*>(data), bytes, who);
}

size_t Socket::recvSome(void* data, size_t bytes, const std::string& who) {
  return ioStep(fd_, false, data, bytes, who);
}

bool Socket::peerClosed() const {
  char b;
  for (;;) {
    ssize_t n = ::recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    if (n > 0) return false;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

void Socket::sendAll(const void* data, size_t bytes, Deadline deadline, const std::string& who) {
  Socket none;
  sendRecv(*this, data, bytes, none, nullptr, 0, deadline, who);
}

void Socket::recvAll(void* data, size_t bytes, Deadline deadline, const std::string& who) {
  Socket none;
  sendRecv(none, nullptr, 0, *this, data, bytes, deadline, who);
}

void sendRecv(Socket& to, const void* out, size_t outBytes, Socket& from, void* in, size_t inBytes,
              Deadline deadline, const std::string& who) {
  size_t sent = 0, received = 0;
  while (sent < outBytes || received < inBytes) {
    bool moved = false;
    if (sent < outBytes) {
      size_t n = ioStep(to.fd(), true, const_cast<char*>(static_cast<const char*>(out)) + sent,
                        outBytes - sent, who);
      sent += n;
      moved |= n > 0;
    }
    if (received < inBytes) {
      size_t n =
          ioStep(from.fd(), false, static_cast<char*>(in) + received, inBytes - received, who);
      received += n;
      moved |= n > 0;
    }
    if (moved) continue;
    if (deadline.expired()) throwError(gyreTimeout, "timed out exchanging data with " + who);
    pollfd p[2];
    int np = 0;
    if (sent < outBytes) p[np++] = {to.fd(), POLLOUT, 0};
    if (received < inBytes) p[np++] = {from.fd(), POLLIN, 0};
    ::poll(p, np, deadline.pollMs(1000));
  }
}

}  // namespace gyre::bootstrap
