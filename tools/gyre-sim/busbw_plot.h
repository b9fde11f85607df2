// gyre-sim --plot: bus bandwidth against message size as a small
// hand-written SVG (no plotting library on the hosts that run it), one line
// per series. gyre-bench's --plot draws its runs alike (bench/gyre_bench/
// plot.h), but lives with the library's shared build, which gyre-sim does
// not link.
#pragma once

#include <string>
#include <vector>

namespace gyre::sim {

struct PlotSeries {
  std::string name;
  std::vector<double> bytes, busbw;  // one point per size it ran at (GB/s)
  std::vector<std::string> notes;    // per point, shown on hover ("" for none)
  bool chosen = false;               // the tuner's choice: drawn on top, marked
};

// Size on a log2 axis (labelled 8, 1K, 1M, ...), busbw (GB/s) linear from 0;
// a legend below; title above.
std::string busbwSvg(const std::vector<PlotSeries>& series, const std::string& title);

}  // namespace gyre::sim
