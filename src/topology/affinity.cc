#include "topology/affinity.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace gyre::topology {

namespace {

// Linux's mempolicy modes (linux/mempolicy.h), without needing libnuma.
constexpr int kMpolDefault = 0;
constexpr int kMpolPreferred = 1;

std::mutex g_mu;
int g_numa = -1;
std::vector<int> g_cpus;

}  // namespace

std::vector<int> cpusOfAffinity(const std::string& hex) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= hex.size()) {
    size_t end = hex.find(',', start);
    if (end == std::string::npos) end = hex.size();
    words.push_back(hex.substr(start, end - start));
    start = end + 1;
  }
  std::vector<int> cpus;
  for (size_t w = 0; w < words.size(); ++w) {
    const unsigned long v = std::strtoul(words[w].c_str(), nullptr, 16);
    const int base = static_cast<int>((words.size() - 1 - w) * 32);
    for (int b = 0; b < 32; ++b)
      if (v & (1ul << b)) cpus.push_back(base + b);
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

bool affinityEnabled() {
  const char* v = getenv("GYRE_TOPO_AFFINITY");
  return !v || std::strcmp(v, "0") != 0;
}

void setPreferredNuma(int numa, const std::vector<int>& cpus) {
  std::lock_guard<std::mutex> l(g_mu);
  g_numa = numa;
  g_cpus = cpus;
}

int preferredNuma() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_numa;
}

bool bindCurrentThreadToPreferredNuma() {
  std::vector<int> cpus;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (g_numa < 0) return false;
    cpus = g_cpus;
  }
  cpu_set_t allowed, want;
  CPU_ZERO(&want);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  int n = 0;
  for (int c : cpus)
    if (c < CPU_SETSIZE && CPU_ISSET(c, &allowed)) {
      CPU_SET(c, &want);
      ++n;
    }
  // A launcher that pinned the rank elsewhere knows better: keep its mask.
  if (n == 0) return false;
  return sched_setaffinity(0, sizeof(want), &want) == 0;
}

ScopedNumaMemoryPolicy::ScopedNumaMemoryPolicy() {
  const int numa = preferredNuma();
  if (numa < 0 || numa >= 1024) return;
  // A policy set from outside (numactl) knows better: keep it.
  int mode = -1;
  if (syscall(SYS_get_mempolicy, &mode, nullptr, 0ul, nullptr, 0ul) != 0 || mode != kMpolDefault)
    return;
  unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {};
  mask[numa / (8 * sizeof(unsigned long))] |= 1ul << (numa % (8 * sizeof(unsigned long)));
  active_ = syscall(SYS_set_mempolicy, kMpolPreferred, mask, 1024ul) == 0;
}

ScopedNumaMemoryPolicy::~ScopedNumaMemoryPolicy() {
  if (active_) syscall(SYS_set_mempolicy, kMpolDefault, nullptr, 0ul);
}

}  // namespace gyre::topology
