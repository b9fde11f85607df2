#include "harness/plot.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <tuple>

#include "harness/figure.h"
#include "harness/png.h"

namespace gyre::harness {
namespace {

// Colours apart enough to tell eight runs apart.
constexpr std::array<Rgb, 8> kPalette = {{{31, 100, 200},
                                          {220, 80, 30},
                                          {40, 160, 60},
                                          {150, 60, 180},
                                          {200, 150, 0},
                                          {0, 160, 170},
                                          {200, 50, 120},
                                          {110, 110, 110}}};
constexpr Rgb kInk = {40, 40, 40};
constexpr Rgb kGrid = {225, 225, 225};

// Pixel layout: each panel half the height; the legend a column on the right.
constexpr int kLeft = 72, kRight = 20, kTop = 40, kBottom = 48;
constexpr int kLegendRow = 16, kSwatch = 22, kLegendMaxChars = 28;

// A value axis: [lo, hi] and its ticks at multiples of `step`.
struct Axis {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> ticks;
};

// 1, 2 or 5 times a power of ten, near `raw`.
double niceStep(double raw) {
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

// About five ticks over [lo, hi], the axis widened to the ticks around it.
// No values (lo > hi) gives [0, 1]; one value is padded by a tenth of itself
// (or by 1 when it is about zero), so that a constant line sits mid-panel.
Axis niceAxis(double lo, double hi, bool integerSteps) {
  if (!(lo <= hi)) lo = 0, hi = 1;
  const double size = std::max({std::abs(lo), std::abs(hi), 1e-6});
  if (hi - lo < size * 1e-9) {
    const double mid = (lo + hi) / 2, pad = std::abs(mid) >= 1e-6 ? std::abs(mid) / 10 : 1;
    lo = mid - pad, hi = mid + pad;
  }
  Axis axis;
  axis.step = niceStep((hi - lo) / 5);
  if (integerSteps) axis.step = std::max(axis.step, 1.0);
  const double first = std::floor(lo / axis.step), last = std::ceil(hi / axis.step);
  axis.lo = first * axis.step, axis.hi = last * axis.step;
  for (double k = first; k <= last && axis.ticks.size() < 50; ++k)
    axis.ticks.push_back(k * axis.step + 0.0);  // + 0.0: no "-0" label
  return axis;
}

// A tick label: as many decimals as the step needs, and k, M or G for large values.
std::string tickLabel(double v, const Axis& axis) {
  const double top = std::max(std::abs(axis.lo), std::abs(axis.hi));
  double unit = 1;
  const char* suffix = "";
  for (const auto& [from, u, s] : {std::tuple{1e9, 1e9, "G"}, {1e6, 1e6, "M"}, {1e4, 1e3, "k"}}) {
    if (top >= from) {
      unit = u, suffix = s;
      break;
    }
  }
  const int decimals =
      std::clamp(static_cast<int>(-std::floor(std::log10(axis.step / unit) + 1e-9)), 0, 12);
  std::array<char, 64> buf;
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v / unit,
                               std::chars_format::fixed, decimals);
  return std::string(buf.data(), r.ptr) + suffix;
}

std::string fitted(const std::string& name, size_t chars) {
  return name.size() <= chars ? name : name.substr(0, chars - 3) + "...";
}

// The values a panel plots, clamped so that differences between them stay
// finite; NaN and infinities are left out.
bool plotted(double v, double& out) {
  out = std::clamp(v, -1e300, 1e300);
  return std::isfinite(v);
}

struct Panel {
  const char* title;
  const char* axisTitle;
  std::function<double(const StepRecord&)> value;
};

// One panel in the box [x0, x1] x [top, top + height]: frame, grid, ticks,
// titles and a path per run.
void layPanel(Figure& f, const Panel& panel, const std::vector<PlotRun>& runs, const Axis& xAxis,
              double x0, double x1, double top, double height) {
  const double y0 = top + kTop, y1 = top + height - kBottom;
  double lo = INFINITY, hi = -INFINITY;
  for (const PlotRun& run : runs)
    for (const StepRecord& s : run.steps)
      if (double v; plotted(panel.value(s), v)) lo = std::min(lo, v), hi = std::max(hi, v);
  const Axis yAxis = niceAxis(lo, hi, false);
  auto px = [&](double step) { return x0 + (step - xAxis.lo) / (xAxis.hi - xAxis.lo) * (x1 - x0); };
  auto py = [&](double v) { return y1 - (v - yAxis.lo) / (yAxis.hi - yAxis.lo) * (y1 - y0); };

  for (const double t : yAxis.ticks) {
    f.lines.push_back({{x0, py(t)}, {x1, py(t)}, kGrid, 1});
    f.lines.push_back({{x0 - 4, py(t)}, {x0, py(t)}, kInk, 1});
    f.texts.push_back({{x0 - 7, py(t) + 3.5}, tickLabel(t, yAxis), kInk, 1, Anchor::kEnd});
  }
  for (const double t : xAxis.ticks) {
    f.lines.push_back({{px(t), y0}, {px(t), y1}, kGrid, 1});
    f.lines.push_back({{px(t), y1}, {px(t), y1 + 4}, kInk, 1});
    f.texts.push_back({{px(t), y1 + 17}, tickLabel(t, xAxis), kInk, 1, Anchor::kMiddle});
  }
  for (const auto& [a, b] : {std::pair<Point, Point>{{x0, y0}, {x1, y0}},
                             {{x1, y0}, {x1, y1}},
                             {{x1, y1}, {x0, y1}},
                             {{x0, y1}, {x0, y0}}})
    f.lines.push_back({a, b, kInk, 1});
  f.texts.push_back({{(x0 + x1) / 2, top + 26}, panel.title, kInk, 2, Anchor::kMiddle});
  f.texts.push_back({{(x0 + x1) / 2, y1 + 36}, "step", kInk, 1, Anchor::kMiddle});
  f.texts.push_back({{x0 - 54, (y0 + y1) / 2}, panel.axisTitle, kInk, 1, Anchor::kMiddle, true});

  for (size_t r = 0; r < runs.size(); ++r) {
    Figure::Path path{{}, kPalette[r % kPalette.size()], 2};
    bool broken = true;  // the next finite point starts a piece
    for (const StepRecord& s : runs[r].steps) {
      double v;
      if (!plotted(panel.value(s), v)) {
        broken = true;
        continue;
      }
      if (broken) path.pieces.emplace_back();
      path.pieces.back().push_back({px(static_cast<double>(s.step)), py(v)});
      broken = false;
    }
    f.paths.push_back(std::move(path));
  }
}

Figure layOut(const std::vector<PlotRun>& runs) {
  Figure f;
  f.width = kPlotWidth, f.height = kPlotHeight;
  size_t longest = 0;
  for (const PlotRun& run : runs) longest = std::max(longest, run.name.size());
  const size_t chars = std::clamp<size_t>(longest, 8, kLegendMaxChars);
  const double legendX = kPlotWidth - 16 - kSwatch - 6 - textWidth(std::string(chars, 'x'), 1);

  double lo = INFINITY, hi = -INFINITY;
  for (const PlotRun& run : runs)
    for (const StepRecord& s : run.steps)
      lo = std::min(lo, static_cast<double>(s.step)),
      hi = std::max(hi, static_cast<double>(s.step));
  const Axis xAxis = niceAxis(lo, hi, true);

  const std::array<Panel, 2> panels = {{
      {"Loss", "loss", [](const StepRecord& s) { return s.loss; }},
      {"Throughput", "tokens/s", [](const StepRecord& s) { return s.tokensPerSecond; }},
  }};
  const double height = kPlotHeight / 2.0;
  for (size_t i = 0; i < panels.size(); ++i)
    layPanel(f, panels[i], runs, xAxis, kLeft, legendX - kRight, i * height, height);

  for (size_t r = 0; r < runs.size(); ++r) {
    const double y = kTop + 8 + r * kLegendRow;
    const Rgb c = kPalette[r % kPalette.size()];
    f.lines.push_back({{legendX, y - 3.5}, {legendX + kSwatch, y - 3.5}, c, 2});
    f.texts.push_back({{legendX + kSwatch + 6, y}, fitted(runs[r].name, chars), kInk, 1});
  }
  return f;
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("plotRuns: cannot write '" + path + "'");
}

}  // namespace

void plotRuns(const std::vector<PlotRun>& runs, const std::string& path) {
  const size_t dot = path.rfind('.');
  std::string ext =
      dot == std::string::npos || path.find('/', dot) != std::string::npos ? "" : path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext != ".svg" && ext != ".png")
    throw std::invalid_argument("plotRuns: '" + path + "': the format comes from the extension, " +
                                "which must be .svg or .png");
  if (runs.empty()) throw std::invalid_argument("plotRuns: no runs to plot");
  for (const PlotRun& run : runs)
    if (run.steps.empty())
      throw std::invalid_argument("plotRuns: run '" + run.name + "' has no steps");

  const Figure figure = layOut(runs);
  if (ext == ".svg") return writeFile(path, toSvg(figure));
  const std::vector<uint8_t> png = encodePng(figure.width, figure.height, rasterize(figure));
  writeFile(path, std::string(png.begin(), png.end()));
}

}  // namespace gyre::harness
