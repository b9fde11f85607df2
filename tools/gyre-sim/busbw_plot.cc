#include "busbw_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gyre::sim {

namespace {

std::string escaped(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&')
      o += "&amp;";
    else if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// 8, 1K, 1M: sizes as gyre-bench's -b and -e take them.
std::string sizeLabel(double bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char b[32];
  std::snprintf(b, sizeof b, "%g%s", bytes, units[u]);
  return b;
}

// 1, 2 or 5 times a power of ten, at or above v: round tick values.
double niceCeil(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v * (1 - 1e-12)) return m * p;
  return 10 * p;
}

// The same colours as gyre-bench's plots, so the two read alike.
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

constexpr double kX0 = 80, kY0 = 50, kW = 640, kH = 360;

}  // namespace

std::string busbwSvg(const std::vector<PlotSeries>& series, const std::string& title) {
  double bmin = 0, bmax = 0, top = 0;
  for (const PlotSeries& s : series)
    for (size_t i = 0; i < s.bytes.size(); ++i) {
      if (!(s.bytes[i] > 0)) continue;
      bmin = bmin == 0 ? s.bytes[i] : std::min(bmin, s.bytes[i]);
      bmax = std::max(bmax, s.bytes[i]);
      if (std::isfinite(s.busbw[i])) top = std::max(top, s.busbw[i]);
    }
  double xlo = bmin > 0 ? std::floor(std::log2(bmin)) : 0,
         xhi = bmax > 0 ? std::ceil(std::log2(bmax)) : 1;
  if (xhi <= xlo) xlo -= 1, xhi += 1;  // one size: in the middle
  const double ytop = niceCeil(top);
  auto px = [&](double bytes) { return kX0 + (std::log2(bytes) - xlo) / (xhi - xlo) * kW; };
  auto py = [&](double v) { return kY0 + kH - v / ytop * kH; };

  const double legendTop = kY0 + kH + 70, height = legendTop + 20.0 * double(series.size()) + 10;
  std::string svg =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"800\" height=\"" +
      num(height) + "\" viewBox=\"0 0 800 " + num(height) +
      "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n";
  svg += "<text x=\"400\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" + escaped(title) +
         "</text>\n";
  svg += "<rect x=\"" + num(kX0) + "\" y=\"" + num(kY0) + "\" width=\"" + num(kW) + "\" height=\"" +
         num(kH) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  // x: every power of two ticked, about ten labelled.
  const int first = int(xlo), last = int(xhi), stride = std::max(1, (last - first + 9) / 10);
  for (int e = first; e <= last; ++e) {
    const double x = px(std::ldexp(1.0, e));
    const bool labelled = (e - first) % stride == 0;
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kY0 + kH) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(kY0 + kH + (labelled ? 6 : 3)) + "\" stroke=\"#333\"/>\n";
    if (labelled && e >= 0)
      svg += "<text x=\"" + num(x) + "\" y=\"" + num(kY0 + kH + 20) + "\" text-anchor=\"middle\">" +
             sizeLabel(std::ldexp(1.0, e)) + "</text>\n";
  }
  svg += "<text x=\"" + num(kX0 + kW / 2) + "\" y=\"" + num(kY0 + kH + 40) +
         "\" text-anchor=\"middle\">message size (bytes)</text>\n";
  // y: five steps from zero, with light grid lines.
  for (int i = 0; i <= 5; ++i) {
    const double v = ytop * i / 5, y = py(v);
    char label[32];
    std::snprintf(label, sizeof label, "%g", v);
    svg += "<line x1=\"" + num(kX0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kX0 + kW) +
           "\" y2=\"" + num(y) + "\" stroke=\"#ddd\"/>\n<text x=\"" + num(kX0 - 6) + "\" y=\"" +
           num(y + 4) + "\" text-anchor=\"end\">" + label + "</text>\n";
  }
  svg += "<text transform=\"translate(" + num(kX0 - 50) + "," + num(kY0 + kH / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">busbw (GB/s)</text>\n";

  // The tuner's choice last, so it lies on top of the algorithm it chose.
  std::vector<size_t> order;
  for (size_t i = 0; i < series.size(); ++i)
    if (!series[i].chosen) order.push_back(i);
  for (size_t i = 0; i < series.size(); ++i)
    if (series[i].chosen) order.push_back(i);
  size_t colour = 0;
  for (size_t row = 0; row < order.size(); ++row) {
    const PlotSeries& s = series[order[row]];
    const std::string color =
        s.chosen ? "#000" : kColors[colour++ % (sizeof kColors / sizeof kColors[0])];
    const std::string stroke = "stroke=\"" + color + "\" stroke-width=\"" +
                               (s.chosen ? "3\" stroke-dasharray=\"6,4\"" : "2\"");
    std::string points, marks;
    for (size_t i = 0; i < s.bytes.size() && i < s.busbw.size(); ++i) {
      if (!(s.bytes[i] > 0) || !std::isfinite(s.busbw[i])) continue;
      const std::string x = num(px(s.bytes[i])), y = num(py(s.busbw[i]));
      points += (points.empty() ? "" : " ") + x + "," + y;
      const std::string note = i < s.notes.size() ? s.notes[i] : "";
      marks += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"" + (s.chosen ? "4" : "2.5") +
               "\" fill=\"" + color + "\">" + "<title>" +
               escaped(s.name + ": " + sizeLabel(s.bytes[i]) + " B, " + num(s.busbw[i]) + " GB/s" +
                       (note.empty() ? "" : ", " + note)) +
               "</title></circle>\n";
    }
    svg += "<polyline fill=\"none\" " + stroke + " points=\"" + points + "\"><title>" +
           escaped(s.name) + "</title></polyline>\n" + marks;
    const double y = legendTop + 20.0 * double(row);
    svg += "<line x1=\"" + num(kX0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kX0 + 30) +
           "\" y2=\"" + num(y) + "\" " + stroke + "/>\n<text x=\"" + num(kX0 + 38) + "\" y=\"" +
           num(y + 4) + "\">" + escaped(s.name) + "</text>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace gyre::sim
