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

// --codec: maxerr takes #wrong's place, wider, so that every field keeps
// its position (scripts read the time columns by number); the rms errors
// and the bytes sent come after the in-place and percentile columns.
std::string errorText(double v) { return v < 0 ? "N/A" : fmt("%.2e", v); }

std::string cellText(const Cell& c, bool codec) {
  const int width = codec ? 8 : 6;
  if (!c.present) return "  " + std::string(7, ' ') + "     N/A     N/A" + fmt("  %*s", width, "N/A");
  const std::string last = codec ? errorText(c.maxErr) : c.wrong < 0 ? "N/A" : std::to_string(c.wrong);
  return fmt("  %s  %6.2f  %6.2f  %*s", timeText(c.timeUs, 7).c_str(), c.algbw, c.busbw, width, last.c_str());
}

const char* const kCodecHead = "  %8s  %8s  %10s  %10s";

std::string codecText(const Row& r) {
  auto rms = [](const Cell& c) { return c.present ? errorText(c.rmsErr) : std::string("N/A"); };
  return fmt("  %8s  %8s  %10.0f  %10.0f", rms(r.outOfPlace).c_str(), rms(r.inPlace).c_str(), r.wireBytes,
             r.plainBytes);
}

std::string percentileText(const Cell& c) {
  if (!c.present || c.p50Us < 0) return fmt("  %8s  %8s", "N/A", "N/A");
  return "  " + timeText(c.p50Us, 8) + "  " + timeText(c.p99Us, 8);
}

// What the compressed run's columns mean (docs/gyre-bench.md).
std::string codecLegend(const std::string& codec) {
  return "# maxerr, oop-rms, ip-rms: |result - exact| / max |exact| over every rank's output, the largest and the "
         "root mean square\n# wire, plain: bytes a rank sends per call, " +
         codec + " and uncompressed (busbw counts plain)";
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
  if (!s.seqLayout.empty()) h += "   layout: " + s.seqLayout;
  if (!s.label.empty()) h += "   label: " + s.label;
  const bool codec = s.codec != "none";
  if (codec) h += "   codec: " + s.codec + "\n" + codecLegend(s.codec);
  h += "\n#\n";
  // The placements' names over their columns (wider with maxerr).
  h += fmt(codec ? "#%51s%24s%33s" : "#%51s%22s%31s", "", "out-of-place", "in-place");
  h += s.percentiles ? fmt("%39s\n", "percentiles") : "\n";
  const char* head = codec ? "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %8s  %7s  %6s  %6s  %8s"
                           : "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s";
  const char* last = codec ? "maxerr" : "#wrong";
  h += fmt(head, "size", "count", "type", "redop", "root", "time", "algbw", "busbw", last, "time", "algbw", "busbw",
           last);
  if (s.percentiles) h += fmt("  %8s  %8s  %8s  %8s", "oop-p50", "oop-p99", "ip-p50", "ip-p99");
  if (codec) h += fmt(kCodecHead, "oop-rms", "ip-rms", "wire", "plain");
  h += "\n";
  h += fmt(head, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (s.percentiles) h += fmt("  %8s  %8s  %8s  %8s", "(us)", "(us)", "(us)", "(us)");
  if (codec) h += fmt(kCodecHead, "", "", "(B)", "(B)");
  return h + "\n";
}

std::string tableRow(const Row& r, bool percentiles, bool codec) {
  std::string line = fmt("%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, r.type.c_str(), r.redop.c_str(), r.root);
  line += cellText(r.outOfPlace, codec) + cellText(r.inPlace, codec);
  if (percentiles) line += percentileText(r.outOfPlace) + percentileText(r.inPlace);
  if (codec) line += codecText(r);
  return line + "\n";
}

std::string tableFooter(long long outOfBounds, double avgBusBw, double maxErr) {
  std::string f = fmt("# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %g \n", outOfBounds,
                      outOfBounds ? "FAILED" : "OK", avgBusBw);
  if (maxErr >= 0) f += fmt("# Max relative error   : %.2e\n", maxErr);
  return f + "#\n";
}

}  // namespace gyre::bench
