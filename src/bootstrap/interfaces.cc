#include "bootstrap/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <cstring>

#include "base/error.h"

namespace gyre::bootstrap {

std::vector<NetInterface> listInterfaces(int family) {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int f = i->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    if (family && f != family) continue;
    NetInterface ni;
    ni.name = i->ifa_name;
    ni.addr.len = f == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&ni.addr.storage, i->ifa_addr, ni.addr.len);
    if (f == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(&ni.addr.storage)->sin6_addr))
      continue;
    ni.addr.setPort(0);
    ni.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0 || ni.addr.isLoopback();
    out.push_back(ni);
  }
  freeifaddrs(list);
  return out;
}

bool interfaceMatches(const std::string& specIn, const std::string& name) {
  std::string spec = specIn;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool hit = false;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item =
        spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty() && (exact ? name == item : name.compare(0, item.size(), item) == 0))
      hit = true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return exclude ? !hit : hit;
}

NetInterface chooseInterface(const std::string& spec, int family) {
  std::vector<NetInterface> all = listInterfaces(family);
  if (!spec.empty()) {
    for (const NetInterface& i : all)
      if (interfaceMatches(spec, i.name)) return i;
    std::string names;
    for (const NetInterface& i : all) names += (names.empty() ? "" : ", ") + i.name;
    throwError(gyreInvalidArgument, "GYRE_SOCKET_IFNAME=" + spec +
                                        " matches no interface that is up (have: " + names + ")");
  }
  auto rank = [](const NetInterface& i) {
    if (i.loopback) return 3;
    if (i.name.rfind("docker", 0) == 0 || i.name.rfind("virbr", 0) == 0) return 2;
    if (i.name.rfind("ib", 0) == 0) return 0;  // IP over InfiniBand first, as NCCL does
    return 1;
  };
  const NetInterface* best = nullptr;
  for (const NetInterface& i : all)
    if (!best || rank(i) < rank(*best) ||
        (rank(i) == rank(*best) && i.addr.family() == AF_INET && best->addr.family() != AF_INET))
      best = &i;
  if (best) return *best;
  return loopbackInterface(family);
}

NetInterface loopbackInterface(int family) {
  NetInterface lo;
  lo.name = "lo";
  for (const NetInterface& i : listInterfaces(family == AF_INET6 ? AF_INET6 : AF_INET))
    if (i.loopback) lo.name = i.name;
  lo.addr = SockAddr::loopback(family == AF_INET6 ? AF_INET6 : AF_INET, 0);
  lo.loopback = true;
  return lo;
}

}  // namespace gyre::bootstrap
