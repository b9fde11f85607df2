// The rendezvous root as ranks (or strangers) reach it: a one-round
// RootServer on loopback per input, and up to kMaxConnections connections
// that each send one piece of the input (a Hello and a PeerInfo blob, or
// anything) and then close their side; every answer is read to its end.
//
// Input: a flags byte (bit 0: send the secret as given, else the root's is
// written over bytes 8..39 of each piece, so mutations reach past the secret
// check; bit 1: the secret is guessable, trustClaims off), then pieces, each
// a 16-bit little-endian length and that many bytes.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "bootstrap/rendezvous_protocol.h"
#include "bootstrap/root_server.h"
#include "tests/fuzz/loopback.h"

namespace {

constexpr size_t kMaxConnections = 4;
constexpr size_t kSecretOffset = offsetof(gyre::bootstrap::Hello, secret);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::bootstrap;
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::vector<std::vector<uint8_t>> pieces;
  for (size_t at = 1; at + 2 <= size && pieces.size() < kMaxConnections;) {
    const size_t len = std::min<size_t>(data[at] | (size_t(data[at + 1]) << 8), size - at - 2);
    pieces.emplace_back(data + at + 2, data + at + 2 + len);
    at += 2 + len;
  }
  if (pieces.empty()) return 0;

  RootServer::Options o;
  o.bind = SockAddr::loopback(AF_INET, 0);
  o.advertise = o.bind;
  for (size_t i = 0; i < o.secret.size(); ++i) o.secret[i] = static_cast<uint8_t>(0xA0 + i);
  o.trustClaims = (flags & 2) == 0;
  o.lifetimeMs = 2000;  // a round that never fills ends by itself
  auto root = RootServer::start(o);

  std::vector<Socket> conns;
  for (auto& piece : pieces) {
    if (!(flags & 1) && piece.size() >= kSecretOffset + o.secret.size())
      std::memcpy(piece.data() + kSecretOffset, o.secret.data(), o.secret.size());
    // A one-round root closes once its round is decided: the later pieces
    // are then refused, as a late rank would be.
    Socket s;
    try {
      s = Socket::connectTo(root->address(), gyre::Deadline::afterMs(5000), "the fuzzed root", true);
    } catch (const ConnectionRefused&) {
      break;
    }
    // Blocking sends: a piece is at most 64 KiB, which the socket buffers hold.
    gyre::fuzz::sendAllAndEnd(s, piece.data(), piece.size());  // the root may close it: refused
    conns.push_back(std::move(s));
  }
  // Every answer to its end, each bounded: the root answers or closes
  // within its lifetime.
  const int64_t until = gyre::nowNs() + 5'000'000'000;
  for (Socket& s : conns) {
    uint8_t buf[4096];
    for (;;) {
      const int64_t left = until - gyre::nowNs();
      if (left <= 0) break;
      pollfd p{s.fd(), POLLIN, 0};
      if (::poll(&p, 1, int(left / 1'000'000) + 1) <= 0) break;
      if (::recv(s.fd(), buf, sizeof buf, 0) <= 0) break;
    }
    gyre::fuzz::closeHard(s);
  }
  root->stop();
  return 0;
}
