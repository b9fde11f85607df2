// The text gyre-bench prints, in nccl-tests' layout: header lines (version,
// ranks and hosts, transports in use, algorithm), the table's column heads,
// one fixed-width line per row, and the footer. Kept apart from the
// measuring so the layout can be tested against a golden copy.
#pragma once

#include <string>
#include <vector>

#include "bench/gyre_bench/report.h"

namespace gyre::bench {

struct RankInfo {
  int rank = 0;
  long pid = 0;
  std::string host;
};

// Everything before the first row. `percentiles` adds the p50/p99 columns
// (after the in-place ones, so nccl-tests' column positions stay put).
// A codec (settings.codec not "none") puts maxerr where #wrong was, and
// adds the rms errors and the bytes sent after every other column.
std::string tableHeader(const RunSettings& s, const std::vector<RankInfo>& ranks);
std::string tableRow(const Row& r, bool percentiles, bool codec = false);
// maxErr >= 0 (a codec's run): a line with the largest error of the run.
std::string tableFooter(long long outOfBounds, double avgBusBw, double maxErr = -1);

}  // namespace gyre::bench
