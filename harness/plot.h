// Plots of training runs, for `gyre-train --plot FILE.svg|png` and for
// comparing runs side by side (docs/harness.md, "The training log and
// plots"): loss against step above, tokens per second against step below,
// one coloured line per run and a legend naming them.
//
// Written by hand, with no plotting, image or compression library: an SVG is
// text, and a PNG is rasterized here with a built-in 5x7 font
// (harness/font.h) and stored uncompressed (harness/png.h). A plot is for
// looking at a run, not for publication.
#pragma once

#include <string>
#include <vector>

#include "harness/train_log.h"

namespace gyre::harness {

struct PlotRun {
  std::string name;  // in the legend
  std::vector<StepRecord> steps;
};

// Every plot's size in pixels (the SVG's too).
inline constexpr int kPlotWidth = 800;
inline constexpr int kPlotHeight = 640;

// Writes the plot of `runs` to `path`, in the format its extension names:
// ".svg" or ".png" (in any case). Both panels share the step axis; each
// panel's value axis spans its finite values, padded when they are all one
// value. A point whose value is NaN or infinite is left out, breaking its
// line there. Throws std::invalid_argument for another extension, no runs or
// a run without steps, and std::runtime_error naming the file when it cannot
// be written. Runs beyond the eighth reuse the palette's colours.
void plotRuns(const std::vector<PlotRun>& runs, const std::string& path);

}  // namespace gyre::harness
