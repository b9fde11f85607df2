#include "bench/gyre_bench/comm_stats.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace gyre::bench {

namespace {

// The transports a row has a column for; a plugin's own name counts as "net".
const char* const kTransports[] = {"shm", "tcp", "ucx", "verbs", "net"};
constexpr int kColumns = 5;

int column(const char* name) {
  for (int i = 0; i < kColumns - 1; ++i)
    if (std::strcmp(name, kTransports[i]) == 0) return i;
  return kColumns - 1;
}

// One rank's numbers, as doubles for one AllGather.
struct Line {
  double calls, failed, bytes, seconds, sent[kColumns];
};

}  // namespace

std::string commStatsTable(gyreComm_t comm, int rank, int nranks) {
  gyreCommStats_t s{};
  std::vector<uint64_t> perPeer(static_cast<size_t>(nranks), 0);
  Line mine{};
  if (gyreCommGetStats(comm, &s, perPeer.data()) == gyreSuccess) {
    mine.calls = static_cast<double>(s.calls);
    mine.failed = static_cast<double>(s.failedCalls);
    mine.bytes = static_cast<double>(s.bytes);
    mine.seconds = s.seconds;
    for (int p = 0; p < nranks; ++p) {
      char name[64] = "";
      if (p == rank || gyreCommPeerTransport(comm, p, name, sizeof name) != gyreSuccess || !*name) continue;
      mine.sent[column(name)] += static_cast<double>(perPeer[p]);
    }
  }
  std::vector<Line> all(static_cast<size_t>(nranks));
  if (gyreAllGather(&mine, all.data(), sizeof(Line) / sizeof(double), gyreFloat64, comm, nullptr) != gyreSuccess)
    return rank == 0 ? "# --stats: the gather failed: " + std::string(gyreGetLastError(comm)) + "\n" : "";
  if (rank != 0) return "";
  std::string out = "# Statistics (gyreCommGetStats): calls, bytes and seconds inside calls; bytes sent by transport\n";
  char line[256];
  std::snprintf(line, sizeof line, "# %5s %9s %7s %14s %10s", "rank", "calls", "failed", "bytes", "seconds");
  out += line;
  for (const char* t : kTransports) {
    std::snprintf(line, sizeof line, " %14s", (std::string("sent ") + t).c_str());
    out += line;
  }
  out += "\n";
  for (int r = 0; r < nranks; ++r) {
    const Line& l = all[r];
    std::snprintf(line, sizeof line, "# %5d %9.0f %7.0f %14.0f %10.3f", r, l.calls, l.failed, l.bytes, l.seconds);
    out += line;
    for (double b : l.sent) {
      std::snprintf(line, sizeof line, " %14.0f", b);
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace gyre::bench
