#include "bench/gyre_bench/table.h"

#include <cstdio>

namespace gyre::bench {

namespace {

// printf into a std::string (every line here is short).
template <typename... A>
std::string fmt(const char* f, A... a) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), f, a...);
  return buf;
}

// nccl-tests' time column: fewer decimals as the number grows, same width.
std::string timeText(double us, int width) {
  return fmt(us >= 10000 ? "%*.0f" : us >= 100 ? "%*.1f" : "%*.2f", width, us);
}

std::string cellText(const Cell& c) {
  if (!c.present) return "  " + std::string(7, ' ') + "     N/A     N/A     N/A";
  return fmt("  %s  %6.2f  %6.2f  %6s", timeText(c.timeUs, 7).c_str(), c.algbw, c.busbw,
             c.wrong < 0 ? "N/A" : std::to_string(c.wrong).c_str());
}

std::string percentileText(const Cell& c) {
  if (!c.present || c.p50Us < 0) return fmt("  %8s  %8s", "N/A", "N/A");
  return "  " + timeText(c.p50Us, 8) + "  " + timeText(c.p99Us, 8);
}

}  // namespace

std::string tableHeader(const RunSettings& s, const std::vector<RankInfo>& ranks) {
  std::string h = fmt(
      "# gyre-bench %s: gyre %s, nranks %d, nhosts %d, minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d "
      "iters: %d agg: %s validation: %d timeout: %d\n",
      s.collective.c_str(), s.version.c_str(), s.nranks, s.nhosts, s.minBytes, s.maxBytes,
      s.stepBytes ? double(s.stepBytes) : s.stepFactor, s.stepBytes ? "bytes" : "factor", s.warmup, s.iters,
      s.averageName.c_str(), s.check ? 1 : 0, s.timeout);
  h += "#\n# Using ranks\n";
  for (const RankInfo& r : ranks) h += fmt("#  Rank %2d Pid %7ld on %s\n", r.rank, r.pid, r.host.c_str());
  h += "#\n# transports: " + s.transports + "   algorithm: " + s.algorithm;
  if (s.collective == "alltoallv") h += "   skew: " + std::to_string(s.skew);
  if (!s.label.empty()) h += "   label: " + s.label;
  h += "\n#\n";
  h += fmt("#%51s%22s%31s", "", "out-of-place", "in-place");
  h += s.percentiles ? fmt("%39s\n", "percentiles") : "\n";
  const char* head = "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s";
  h += fmt(head, "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
  h += s.percentiles ? fmt("  %8s  %8s  %8s  %8s\n", "oop-p50", "oop-p99", "ip-p50", "ip-p99") : "\n";
  h += fmt(head, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  h += s.percentiles ? fmt("  %8s  %8s  %8s  %8s\n", "(us)", "(us)", "(us)", "(us)") : "\n";
  return h;
}

std::string tableRow(const Row& r, bool percentiles) {
  std::string line = fmt("%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, r.type.c_str(), r.redop.c_str(), r.root);
  line += cellText(r.outOfPlace) + cellText(r.inPlace);
  if (percentiles) line += percentileText(r.outOfPlace) + percentileText(r.inPlace);
  return line + "\n";
}

std::string tableFooter(long long outOfBounds, double avgBusBw) {
  return fmt("# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %g \n#\n", outOfBounds,
             outOfBounds ? "FAILED" : "OK", avgBusBw);
}

}  // namespace gyre::bench
