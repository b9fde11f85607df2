// --plot and `gyre-bench plot`: bus bandwidth and latency against message
// size, one line per series, drawn as a small hand-written SVG (no plotting
// library is assumed); .png goes through rsvg-convert when it is installed.
#pragma once

#include <string>
#include <vector>

#include "bench/gyre_bench/report.h"

namespace gyre::bench {

struct Series {
  std::string name;
  std::vector<double> bytes, busbw, timeUs;  // out-of-place values, one per row
};

// One series per run and (type, redop) combination, named by the run's
// settings (label if given, else collective, transports, algorithm, and the
// library when not gyre); names made unique.
std::vector<Series> seriesOf(const std::vector<Report>& runs);

// Two panels: busbw (linear) and latency (log) against size (log2 axis).
std::string renderSvg(const std::vector<Series>& series, const std::string& title);

// Before measuring: whether `path` can be written as a plot (.svg, or .png
// with rsvg-convert on PATH). false and why otherwise.
bool plotPathUsable(const std::string& path, std::string& why);

// Writes the plot. 0 on success; otherwise a message in `error` and the
// exit status to use (2 when .png cannot be made here, 1 on I/O failure).
int writePlot(const std::string& path, const std::vector<Series>& series, const std::string& title,
              std::string& error);

}  // namespace gyre::bench
