// The socket plugin's connections and messages (socket_net.h).
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>

#include "socket_net.h"

namespace gyre::netsocket {

namespace {

constexpr uint32_t kHandleMagic = 0x47534e48;  // "GSNH"
constexpr uint32_t kHelloMagic = 0x47534e43;   // "GSNC"

// What a connector sends first: the listener's nonce, so a stray connection
// to the port is not taken for the peer.
struct Hello {
  uint32_t magic;
  uint32_t reserved;
  uint64_t nonce;
};

// A connect in progress, kept through the handle between calls.
struct Connecting {
  int fd = -1;
  bool connected = false;
  size_t helloSent = 0;
  Hello hello{};
};

// The listen handle (at most netabi::kHandleMaxBytes): where to connect,
// the nonce to prove it, and the connector's state (null when it arrives).
union Address {
  sockaddr any;
  sockaddr_in v4;
  sockaddr_in6 v6;
};
struct Handle {
  uint32_t magic;
  uint32_t addressBytes;
  Address address;
  uint64_t nonce;
  Connecting* connecting;
};
static_assert(sizeof(Handle) <= netabi::kHandleMaxBytes);

struct Listen {
  int fd = -1;
  uint64_t nonce = 0;
  int pending = -1;  // an accepted socket whose hello is still arriving
  size_t helloGot = 0;
  Hello hello{};
};

bool wouldBlock(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

int newSocket(int family) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

Result broken(Comm* c, const char* what, int err) {
  if (c->broken.empty()) {
    c->broken = std::string(what) + (err ? std::string(": ") + std::strerror(err) : std::string());
    logLine(netabi::kLogWarn, "gyre-net-socket: %s", c->broken.c_str());
  }
  return netabi::kRemoteError;
}

Comm* newComm(int fd, bool sending) {
  Comm* c = new (std::nothrow) Comm();
  if (!c) return nullptr;
  c->fd = fd;
  c->sending = sending;
  for (Request& r : c->requests) r.comm = c;
  return c;
}

// Moves the oldest unfinished requests' bytes as far as the socket lets.
Result progress(Comm* c) {
  if (!c->broken.empty()) return netabi::kRemoteError;
  while (c->moved < c->posted) {
    Request& r = c->requests[c->moved % kMaxRequests];
    if (c->sending) {
      iovec iov[2];
      int n = 0;
      if (r.headerDone < sizeof(uint64_t))
        iov[n++] = {reinterpret_cast<uint8_t*>(&r.length) + r.headerDone, sizeof(uint64_t) - r.headerDone};
      if (r.dataDone < r.length) iov[n++] = {r.data + r.dataDone, r.length - r.dataDone};
      if (n > 0) {
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = static_cast<size_t>(n);
        const ssize_t w = ::sendmsg(c->fd, &m, MSG_NOSIGNAL);
        if (w < 0) {
          if (wouldBlock(errno)) return netabi::kSuccess;
          return broken(c, "send to the peer failed", errno);
        }
        size_t left = static_cast<size_t>(w);
        const size_t h = std::min(left, sizeof(uint64_t) - r.headerDone);
        r.headerDone += h;
        left -= h;
        r.dataDone += left;
      }
      if (r.headerDone < sizeof(uint64_t) || r.dataDone < r.length) return netabi::kSuccess;
    } else {
      if (r.headerDone < sizeof(uint64_t)) {
        const ssize_t got = ::recv(c->fd, reinterpret_cast<uint8_t*>(&r.length) + r.headerDone,
                                   sizeof(uint64_t) - r.headerDone, 0);
        if (got == 0) return broken(c, "the peer closed the connection", 0);
        if (got < 0) return wouldBlock(errno) ? netabi::kSuccess : broken(c, "receive from the peer failed", errno);
        r.headerDone += static_cast<size_t>(got);
        if (r.headerDone < sizeof(uint64_t)) return netabi::kSuccess;
        if (r.length > r.capacity) {
          c->broken = "a message of " + std::to_string(r.length) + " bytes arrived for a receive of " +
                      std::to_string(r.capacity);
          logLine(netabi::kLogWarn, "gyre-net-socket: %s", c->broken.c_str());
          return netabi::kInvalidUsage;
        }
      }
      if (r.dataDone < r.length) {
        const ssize_t got = ::recv(c->fd, r.data + r.dataDone, r.length - r.dataDone, 0);
        if (got == 0) return broken(c, "the peer closed the connection", 0);
        if (got < 0) return wouldBlock(errno) ? netabi::kSuccess : broken(c, "receive from the peer failed", errno);
        r.dataDone += static_cast<size_t>(got);
        if (r.dataDone < r.length) return netabi::kSuccess;
      }
    }
    r.state = Request::State::Done;
    ++c->moved;
  }
  return netabi::kSuccess;
}

Result post(Comm* c, uint8_t* data, size_t bytes, bool asSend, void** request) {
  *request = nullptr;
  if (!c->broken.empty()) return netabi::kRemoteError;
  Request& r = c->requests[c->posted % kMaxRequests];
  if (r.state != Request::State::Free) return netabi::kSuccess;  // full: the caller tries again
  r.state = Request::State::Active;
  ++c->posted;
  r.data = data;
  r.capacity = bytes;
  r.length = asSend ? bytes : 0;
  r.headerDone = r.dataDone = 0;
  *request = &r;
  progress(c);  // a failure shows when the request is tested: it is the caller's now
  return netabi::kSuccess;
}

}  // namespace

Result listen(int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  if (dev < 0 || dev >= static_cast<int>(devices().size())) return netabi::kInvalidArgument;
  const Device& d = devices()[static_cast<size_t>(dev)];
  int fd = newSocket(d.address.ss_family);
  if (fd < 0) return netabi::kSystemError;
  sockaddr_storage a = d.address;
  if (a.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&a)->sin_port = 0;
  else reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = 0;
  socklen_t len = d.addressBytes;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    logLine(netabi::kLogWarn, "gyre-net-socket: cannot listen on %s: %s", d.name.c_str(), std::strerror(errno));
    ::close(fd);
    return netabi::kSystemError;
  }
  Listen* l = new (std::nothrow) Listen();
  if (!l) {
    ::close(fd);
    return netabi::kSystemError;
  }
  l->fd = fd;
  std::random_device rd;
  l->nonce = (uint64_t(rd()) << 32) ^ rd();
  Handle h{};
  h.magic = kHandleMagic;
  h.addressBytes = len;
  std::memcpy(&h.address, &a, len);
  h.nonce = l->nonce;
  h.connecting = nullptr;
  std::memset(handle, 0, netabi::kHandleMaxBytes);
  std::memcpy(handle, &h, sizeof(h));
  *listenComm = l;
  return netabi::kSuccess;
}

Result connect(int, void* handle, void** sendComm) {
  *sendComm = nullptr;
  Handle* h = static_cast<Handle*>(handle);
  if (h->magic != kHandleMagic || h->addressBytes > sizeof(Address)) return netabi::kInvalidArgument;
  Connecting* c = h->connecting;
  if (!c) {
    c = new (std::nothrow) Connecting();
    if (!c) return netabi::kSystemError;
    c->fd = newSocket(h->address.any.sa_family);
    if (c->fd < 0) {
      delete c;
      return netabi::kSystemError;
    }
    c->hello = Hello{kHelloMagic, 0, h->nonce};
    h->connecting = c;
    if (::connect(c->fd, &h->address.any, h->addressBytes) == 0) c->connected = true;
    else if (errno != EINPROGRESS) c->connected = true;  // the error shows at SO_ERROR below
  }
  auto fail = [&](const char* what, int err) {
    logLine(netabi::kLogWarn, "gyre-net-socket: connect: %s: %s", what, std::strerror(err));
    ::close(c->fd);
    delete c;
    h->connecting = nullptr;
    return netabi::kSystemError;
  };
  if (!c->connected) {
    // Writable once the connection is made or failed.
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail("the peer's listener refused", err);
    sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    if (::getpeername(c->fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) return netabi::kSuccess;  // not yet
    c->connected = true;
  }
  while (c->helloSent < sizeof(Hello)) {
    const ssize_t w = ::send(c->fd, reinterpret_cast<uint8_t*>(&c->hello) + c->helloSent,
                             sizeof(Hello) - c->helloSent, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == ENOTCONN || wouldBlock(errno)) return netabi::kSuccess;
      return fail("sending the hello failed", errno);
    }
    c->helloSent += static_cast<size_t>(w);
  }
  Comm* comm = newComm(c->fd, true);
  if (!comm) return fail("out of memory", ENOMEM);
  delete c;
  h->connecting = nullptr;
  *sendComm = comm;
  return netabi::kSuccess;
}

Result accept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  Listen* l = static_cast<Listen*>(listenComm);
  for (;;) {
    if (l->pending < 0) {
      l->pending = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (l->pending < 0) return wouldBlock(errno) || errno == ECONNABORTED ? netabi::kSuccess : netabi::kSystemError;
      int one = 1;
      ::setsockopt(l->pending, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      l->helloGot = 0;
    }
    const ssize_t got = ::recv(l->pending, reinterpret_cast<uint8_t*>(&l->hello) + l->helloGot,
                               sizeof(Hello) - l->helloGot, 0);
    if (got < 0 && wouldBlock(errno)) return netabi::kSuccess;
    if (got > 0) l->helloGot += static_cast<size_t>(got);
    if (got > 0 && l->helloGot < sizeof(Hello)) continue;
    if (got > 0 && l->hello.magic == kHelloMagic && l->hello.nonce == l->nonce) {
      Comm* comm = newComm(l->pending, false);
      if (!comm) return netabi::kSystemError;
      l->pending = -1;
      *recvComm = comm;
      return netabi::kSuccess;
    }
    // Closed, failed, or not our peer: drop it and look for the next.
    logLine(netabi::kLogInfo, "gyre-net-socket: dropped a connection that sent no valid hello");
    ::close(l->pending);
    l->pending = -1;
  }
}

Result isend(void* sendComm, void* data, size_t size, void** request) {
  return post(static_cast<Comm*>(sendComm), static_cast<uint8_t*>(data), size, true, request);
}

Result irecv(void* recvComm, int n, void** data, const size_t* sizes, void** request) {
  *request = nullptr;
  if (n != 1) return netabi::kInvalidArgument;  // maxRecvs is 1: no grouped receives
  return post(static_cast<Comm*>(recvComm), static_cast<uint8_t*>(data[0]), sizes[0], false, request);
}

Result test(void* request, int* done, int* size) {
  Request* r = static_cast<Request*>(request);
  *done = 0;
  Result p = netabi::kSuccess;
  if (r->state == Request::State::Active) p = progress(r->comm);
  // A request that completed is done, whatever a later one ran into (the
  // peer may close after its last message).
  if (r->state != Request::State::Done) return p;
  *done = 1;
  if (size) *size = static_cast<int>(r->length);
  if (size && faults().oversize && !r->comm->sending && r->capacity > 4096)
    *size = static_cast<int>(r->capacity + 64);  // a broken plugin, for gyre's check
  r->state = Request::State::Free;
  return netabi::kSuccess;
}

Result closeComm(void* comm) {
  Comm* c = static_cast<Comm*>(comm);
  if (!c) return netabi::kSuccess;
  ::close(c->fd);
  delete c;
  return netabi::kSuccess;
}

Result closeListen(void* listenComm) {
  Listen* l = static_cast<Listen*>(listenComm);
  if (!l) return netabi::kSuccess;
  if (l->pending >= 0) ::close(l->pending);
  ::close(l->fd);
  delete l;
  return netabi::kSuccess;
}

}  // namespace gyre::netsocket
