// What each rank tells every other at rendezvous: fixed size, plain bytes.
// The root relays these blobs without reading them, except to name a rank
// in its messages (pid and host).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/socket.h"

namespace gyre::bootstrap {

struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;
  uint8_t listenAddr[SockAddr::kPackedBytes];
  int32_t cpus;           // CPUs the rank may run on
  uint32_t loopbackPort;  // its listener on loopback, for ranks of its host (0: none)
  char hostName[64];
  uint64_t probeAddress;  // a known value in this process, to test reading its memory
  uint64_t cpuMask[16];   // topology::cpuMask: which CPUs it may run on
  uint64_t pidNamespace;  // inode of /proc/self/ns/pid: its pid means the same here only if equal
  // Random, per rank. The XOR of every rank's is the secret that connections
  // between ranks present: only processes in the final table know it, so a
  // process that could guess the rendezvous secret (derived from public
  // facts under some launchers) still cannot join the ranks' connections.
  uint8_t sessionKey[32];
};

// "pid 1234 on host7" (without the rank).
inline std::string describeProcess(const PeerInfo& i) {
  return "pid " + std::to_string(i.pid) + " on " +
         std::string(i.hostName, strnlen(i.hostName, sizeof(i.hostName)));
}

// The value at PeerInfo::probeAddress in every gyre process.
extern const uint64_t kMemoryProbe;

// This process's pid namespace (0 when /proc does not say).
uint64_t pidNamespaceId();

}  // namespace gyre::bootstrap
