#include "bench/gyre_bench/rank_cards.h"

#include "base/hash.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace gyre::bench {

namespace {

// A host as gyre itself tells hosts apart (src/topology/host_identity.cc:
// host name, boot id and network namespace, or GYRE_HOSTID), repeated here
// in a few lines because gyre-bench uses only the public API.
uint64_t hostKey(std::string& name) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  name = host;
  std::string id;
  if (const char* o = std::getenv("GYRE_HOSTID"); o && *o) {
    id = o;
  } else {
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    std::getline(boot, bootId);
    char ns[256] = {};
    const ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    id = name + " " + bootId + " " + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "");
  }
  return fnv1a(id);
}

}  // namespace

gyreResult_t exchangeCards(gyreComm_t comm, int nranks, std::vector<RankCard>& all) {
  RankCard mine{};
  std::string name;
  mine.hostKey = hostKey(name);
  mine.pid = getpid();
  std::snprintf(mine.host, sizeof(mine.host), "%s", name.c_str());
  all.assign(static_cast<size_t>(nranks), RankCard{});
  return gyreAllGather(&mine, all.data(), sizeof(RankCard), gyreUint8, comm, nullptr);
}

std::string transportsInUse(const std::vector<RankCard>& cards, const std::string& requested) {
  if (cards.size() < 2) return "none";
  if (requested != "auto") return requested;
  bool shm = false, tcp = false;
  for (size_t i = 0; i < cards.size(); ++i)
    for (size_t j = i + 1; j < cards.size(); ++j) (cards[i].hostKey == cards[j].hostKey ? shm : tcp) = true;
  return shm && tcp ? "shm+tcp" : shm ? "shm" : "tcp";
}

}  // namespace gyre::bench
