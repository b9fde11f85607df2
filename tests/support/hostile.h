// What a hostile or broken process does to a job's ports, for the tests of
// startup hardening: find a process's listening TCP sockets (from /proc),
// open connections that say nothing or half a hello, and speak the
// rendezvous protocol by hand (claims a real rank would never make).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/peer_info.h"
#include "bootstrap/rendezvous_protocol.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace gyre::test {

// The TCP sockets process `pid` listens on (IPv4 and IPv6), from its file
// descriptors and /proc/<pid>/net/tcp{,6}.
std::vector<bootstrap::SockAddr> listeningSockets(pid_t pid);

// Polls (every millisecond, bounded by timeoutMs) until `pid` listens on at
// least `count` sockets; returns them (fewer if the time ran out or it died).
std::vector<bootstrap::SockAddr> awaitListeners(pid_t pid, size_t count, int timeoutMs);

// Connections that never introduce themselves: `silent` that send nothing
// and `partial` that send the first bytes of a hello and stop.
std::vector<bootstrap::Socket> openNoise(const bootstrap::SockAddr& at, int silent, int partial);

// A rendezvous hello as a rank sends it, with every field open to abuse.
struct Claim {
  bootstrap::Secret secret{};
  uint64_t round = 0;
  int32_t nranks = 1;
  int32_t rank = 0;
  uint32_t version = bootstrap::kProtocolVersion;
  uint32_t infoBytes = sizeof(bootstrap::PeerInfo);
  uint32_t timeoutMs = 0;
  bootstrap::PeerInfo info{};  // sent padded or cut to infoBytes
};

// Connects to the root and sends the claim; the socket stays open (waiting
// for the reply) until the caller drops it.
bootstrap::Socket sendClaim(const bootstrap::SockAddr& root, const Claim& claim);

struct RootAnswer {
  bool closed = false;  // the root closed without a reply
  bootstrap::Reply reply{};
  std::string message;
  std::vector<bootstrap::PeerInfo> table;
};
// Waits (at most timeoutMs) for the root's reply on a claim's socket.
RootAnswer readAnswer(bootstrap::Socket& s, int timeoutMs);

}  // namespace gyre::test
