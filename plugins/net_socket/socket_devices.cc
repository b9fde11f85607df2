// The socket plugin's devices: the host's interfaces that are up and have an
// address, those other than loopback first (loopback alone when nothing
// else is there), narrowed by GYRE_SOCKET_IFNAME.
#include <ifaddrs.h>
#include <net/if.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "socket_net.h"

namespace gyre::netsocket {

namespace {

netabi::Logger gLogger = nullptr;

// GYRE_SOCKET_IFNAME's syntax: comma-separated prefixes; a leading '^'
// excludes the ones listed, a leading '=' makes them exact names.
bool selected(const std::string& name, const char* spec) {
  if (!spec || !*spec) return true;
  std::string s(spec);
  bool exclude = false, exact = false;
  if (!s.empty() && s[0] == '^') exclude = true, s.erase(0, 1);
  if (!s.empty() && s[0] == '=') exact = true, s.erase(0, 1);
  bool listed = false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(start, end - start);
    if (!item.empty() && (exact ? name == item : name.compare(0, item.size(), item) == 0)) listed = true;
    start = end + 1;
  }
  return exclude ? !listed : listed;
}

int speedOf(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  int mbps = 0;
  if (f >> mbps && mbps > 0) return mbps;
  return 10000;  // virtual interfaces say nothing (or -1)
}

}  // namespace

Faults& faults() {
  static Faults f;
  return f;
}

std::vector<Device>& devices() {
  static std::vector<Device> d;
  return d;
}

void setLogger(netabi::Logger logger) { gLogger = logger; }

void logLine(int level, const char* fmt, ...) {
  if (!gLogger) return;
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  gLogger(level, 16 /* NCCL_NET */, __FILE__, __LINE__, "%s", text);
}

Result findDevices() {
  devices().clear();
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    logLine(netabi::kLogWarn, "gyre-net-socket: getifaddrs failed: %s", std::strerror(errno));
    return netabi::kSystemError;
  }
  const char* spec = std::getenv("GYRE_SOCKET_IFNAME");
  std::vector<Device> loopback;
  // IPv4 first: an interface with both is used through its IPv4 address.
  for (int family : {AF_INET, AF_INET6})
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP) || a->ifa_addr->sa_family != family) continue;
    // Link-local IPv6 needs a scope to connect to: skip it.
    if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr)) continue;
    const std::string name = a->ifa_name;
    if (!selected(name, spec)) continue;
    bool seen = false;  // one address per interface
    for (const Device& d : devices()) seen |= d.name == name;
    for (const Device& d : loopback) seen |= d.name == name;
    if (seen) continue;
    Device d;
    d.name = name;
    d.addressBytes = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&d.address, a->ifa_addr, d.addressBytes);
    d.speedMbps = speedOf(name);
    ((a->ifa_flags & IFF_LOOPBACK) ? loopback : devices()).push_back(d);
  }
  ::freeifaddrs(list);
  if (devices().empty()) devices() = loopback;
  for (const Device& d : devices())
    logLine(netabi::kLogInfo, "gyre-net-socket: device %s (%d Mbit/s)", d.name.c_str(), d.speedMbps);
  return netabi::kSuccess;
}

}  // namespace gyre::netsocket
