// Network interface choice, with NCCL_SOCKET_IFNAME's syntax:
//   "eth,ib"     interfaces whose names start with eth or ib
//   "^docker,lo" all but those starting with docker or lo
//   "=eth0"      exactly eth0 ("^=eth0": all but exactly eth0)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/socket.h"

namespace gyre::bootstrap {

struct NetInterface {
  std::string name;
  SockAddr addr;  // port 0
  bool loopback = false;
};

// Interfaces that are up, with their IPv4/IPv6 addresses (IPv6 link-local
// skipped: it needs a scope to be reachable).
std::vector<NetInterface> listInterfaces(int family = 0);

bool interfaceMatches(const std::string& spec, const std::string& name);

// The address this process advertises to peers. With an empty spec: the
// first non-loopback interface (docker/virbr bridges last), else loopback.
// Throws Error(gyreInvalidArgument) when a non-empty spec matches nothing.
NetInterface chooseInterface(const std::string& spec, int family);
// The loopback interface of a family (127.0.0.1 or ::1).
NetInterface loopbackInterface(int family);

}  // namespace gyre::bootstrap
