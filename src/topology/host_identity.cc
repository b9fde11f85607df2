#include "topology/host_identity.h"

#include "base/hash.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>

namespace gyre::topology {

namespace {

std::string readFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string readLink(const char* path) {
  char buf[256];
  ssize_t n = readlink(path, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

std::string hostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

HostIdentity detectHostIdentity(const std::string& override) {
  HostIdentity id;
  if (!override.empty()) {
    id.description = "GYRE_HOSTID=" + override;
  } else {
    id.description = hostName() + " boot " + readFirstLine("/proc/sys/kernel/random/boot_id") +
                     " " + readLink("/proc/self/ns/net");
  }
  id.hash = fnv1a(id.description);
  return id;
}

int availableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

void cpuMask(uint64_t (&mask)[kCpuMaskWords]) {
  for (uint64_t& w : mask) w = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    for (int i = 0; i < availableCpus() && i < 64 * kCpuMaskWords; ++i) mask[i / 64] |= uint64_t{1} << (i % 64);
    return;
  }
  for (int i = 0; i < CPU_SETSIZE && i < 64 * kCpuMaskWords; ++i)
    if (CPU_ISSET(i, &set)) mask[i / 64] |= uint64_t{1} << (i % 64);
}

}  // namespace gyre::topology
