#include "bench/gyre_bench/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <utility>

extern char** environ;

namespace gyre::bench {

namespace {

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string onPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = (end > at ? dirs.substr(at, end - at) : ".") + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;" : std::string(1, c);
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", v);
  return b;
}

std::string sizeLabel(double bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char b[32];
  std::snprintf(b, sizeof(b), "%g%s", bytes, units[u]);
  return b;
}

// 1, 2 or 5 times a power of ten, at or above v.
double niceCeil(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v * (1 - 1e-12)) return m * p;
  return 10 * p;
}

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
// Past ten series the colours come round again with another dash pattern,
// so a merged comparison (dozens of series) keeps every line apart.
const char* const kDashes[] = {"", "6,3", "2,3", "8,3,2,3"};

struct Stroke {
  const char* color;
  const char* dash;
  std::string attrs() const {
    return std::string("stroke=\"") + color + "\"" + (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : "");
  }
};

Stroke strokeFor(size_t i) {
  constexpr size_t nc = sizeof(kColors) / sizeof(kColors[0]), nd = sizeof(kDashes) / sizeof(kDashes[0]);
  return Stroke{kColors[i % nc], kDashes[(i / nc) % nd]};
}

// One panel: a frame at (x0, y0) of w x h, axes, and the series' lines.
struct Panel {
  double x0, y0, w, h;
  double xlo, xhi;  // log2 of sizes
  double ylo, yhi;  // value range (log10 when ylog)
  bool ylog;
  double px(double bytes) const { return x0 + (std::log2(bytes) - xlo) / (xhi - xlo) * w; }
  double py(double v) const {
    const double t = ylog ? (std::log10(v) - ylo) / (yhi - ylo) : (v - ylo) / (yhi - ylo);
    return y0 + h - t * h;
  }
  bool valid(double bytes, double v) const { return bytes > 0 && (ylog ? v > 0 : v >= 0) && std::isfinite(v); }
};

std::string axes(const Panel& p, const std::string& title, const std::string& ylabel) {
  std::string s = "<rect x=\"" + num(p.x0) + "\" y=\"" + num(p.y0) + "\" width=\"" + num(p.w) + "\" height=\"" +
                  num(p.h) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  s += "<text x=\"" + num(p.x0 + p.w / 2) + "\" y=\"" + num(p.y0 - 12) +
       "\" text-anchor=\"middle\" font-weight=\"bold\">" + xml(title) + "</text>\n";
  // x: every power of two, labelled at a stride that keeps about ten labels.
  const int span = static_cast<int>(p.xhi - p.xlo);
  const int stride = std::max(1, (span + 9) / 10);
  for (int e = static_cast<int>(p.xlo); e <= static_cast<int>(p.xhi); ++e) {
    const double x = p.px(std::ldexp(1.0, e));
    const bool labelled = (e - static_cast<int>(p.xlo)) % stride == 0;
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(p.y0 + p.h) + "\" x2=\"" + num(x) + "\" y2=\"" +
         num(p.y0 + p.h + (labelled ? 6 : 3)) + "\" stroke=\"#333\"/>\n";
    if (labelled)
      s += "<text x=\"" + num(x) + "\" y=\"" + num(p.y0 + p.h + 20) + "\" text-anchor=\"middle\">" +
           sizeLabel(std::ldexp(1.0, e)) + "</text>\n";
  }
  s += "<text x=\"" + num(p.x0 + p.w / 2) + "\" y=\"" + num(p.y0 + p.h + 40) +
       "\" text-anchor=\"middle\">message size (bytes)</text>\n";
  // y: decades when logarithmic, five steps otherwise; light grid lines.
  std::vector<std::pair<double, std::string>> ticks;
  if (p.ylog) {
    for (int e = static_cast<int>(p.ylo); e <= static_cast<int>(p.yhi); ++e) {
      char b[32];
      std::snprintf(b, sizeof(b), "%g", std::pow(10, e));
      ticks.emplace_back(std::pow(10, e), b);
    }
  } else {
    for (int i = 0; i <= 5; ++i) {
      char b[32];
      std::snprintf(b, sizeof(b), "%g", p.yhi * i / 5);
      ticks.emplace_back(p.yhi * i / 5, b);
    }
  }
  for (const auto& [v, text] : ticks) {
    const double y = p.py(v);
    s += "<line x1=\"" + num(p.x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(p.x0 + p.w) + "\" y2=\"" + num(y) +
         "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + num(p.x0 - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + text + "</text>\n";
  }
  s += "<text transform=\"translate(" + num(p.x0 - 48) + "," + num(p.y0 + p.h / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + xml(ylabel) + "</text>\n";
  return s;
}

std::string line(const Panel& p, const Series& s, const std::vector<double>& ys, const Stroke& stroke) {
  const char* color = stroke.color;
  std::string points, marks;
  for (size_t i = 0; i < s.bytes.size() && i < ys.size(); ++i) {
    if (!p.valid(s.bytes[i], ys[i])) continue;
    const std::string x = num(p.px(s.bytes[i])), y = num(p.py(ys[i]));
    points += (points.empty() ? "" : " ") + x + "," + y;
    marks += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"2.5\" fill=\"" + color + "\"/>\n";
  }
  if (points.empty()) return "";
  return "<polyline fill=\"none\" " + stroke.attrs() + " stroke-width=\"2\" points=\"" + points + "\"/>\n" + marks;
}

}  // namespace

std::vector<Series> seriesOf(const std::vector<Report>& runs) {
  std::vector<Series> out;
  for (const Report& r : runs) {
    const RunSettings& s = r.settings;
    std::string base = s.label;
    if (base.empty()) {
      base = s.library == "gyre" || s.library.empty() ? "" : s.library + " ";
      base += s.collective + " " + (s.transports.empty() ? s.transport : s.transports) + " " + s.algorithm;
      if (!s.codec.empty() && s.codec != "none") base += " " + s.codec;  // beside the same run uncompressed
    }
    std::vector<std::pair<std::string, std::string>> combos;  // (type, redop) in row order
    for (const Row& w : r.rows)
      if (std::find(combos.begin(), combos.end(), std::make_pair(w.type, w.redop)) == combos.end())
        combos.emplace_back(w.type, w.redop);
    for (const auto& combo : combos) {
      Series ser;
      ser.name = base;
      if (combos.size() > 1) ser.name += " " + combo.first + (combo.second == "none" ? "" : "/" + combo.second);
      for (const Row& w : r.rows) {
        if (std::make_pair(w.type, w.redop) != combo) continue;
        const Cell& c = w.outOfPlace.present ? w.outOfPlace : w.inPlace;
        ser.bytes.push_back(double(w.bytes));
        ser.busbw.push_back(c.busbw);
        ser.timeUs.push_back(c.timeUs);
      }
      out.push_back(ser);
    }
  }
  std::map<std::string, int> seen;
  for (Series& ser : out)
    if (++seen[ser.name] > 1) ser.name += " (" + std::to_string(seen[ser.name]) + ")";
  return out;
}

std::string renderSvg(const std::vector<Series>& series, const std::string& title) {
  double bmin = 0, bmax = 0, busMax = 0, tmin = 0, tmax = 0;
  for (const Series& s : series)
    for (size_t i = 0; i < s.bytes.size(); ++i) {
      if (s.bytes[i] <= 0) continue;
      bmin = bmin == 0 ? s.bytes[i] : std::min(bmin, s.bytes[i]);
      bmax = std::max(bmax, s.bytes[i]);
      if (std::isfinite(s.busbw[i])) busMax = std::max(busMax, s.busbw[i]);
      if (s.timeUs[i] > 0) tmin = tmin == 0 ? s.timeUs[i] : std::min(tmin, s.timeUs[i]), tmax = std::max(tmax, s.timeUs[i]);
    }
  double xlo = bmin > 0 ? std::floor(std::log2(bmin)) : 0, xhi = bmax > 0 ? std::ceil(std::log2(bmax)) : 1;
  if (xhi <= xlo) xhi = xlo + 1;
  double tlo = tmin > 0 ? std::floor(std::log10(tmin)) : 0, thi = tmax > 0 ? std::ceil(std::log10(tmax)) : 1;
  if (thi <= tlo) thi = tlo + 1;
  const Panel bw{80, 50, 440, 320, xlo, xhi, 0, niceCeil(busMax), false};
  const Panel lat{640, 50, 440, 320, xlo, xhi, tlo, thi, true};
  const double legendTop = 440, height = legendTop + 20.0 * double(series.size()) + 10;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1120\" "
                    "height=\"" + num(height) + "\" viewBox=\"0 0 1120 " + num(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"560\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">" + xml(title) + "</text>\n";
  svg += axes(bw, "bus bandwidth", "busbw (GB/s)") + axes(lat, "latency", "time (us)");
  for (size_t i = 0; i < series.size(); ++i) {
    const Stroke stroke = strokeFor(i);
    svg += line(bw, series[i], series[i].busbw, stroke) + line(lat, series[i], series[i].timeUs, stroke);
    const double y = legendTop + 20.0 * double(i);
    svg += "<line x1=\"80\" y1=\"" + num(y) + "\" x2=\"110\" y2=\"" + num(y) + "\" " + stroke.attrs() +
           " stroke-width=\"3\"/>\n<text x=\"118\" y=\"" + num(y + 4) + "\">" + xml(series[i].name) + "</text>\n";
  }
  return svg + "</svg>\n";
}

bool plotPathUsable(const std::string& path, std::string& why) {
  if (endsWith(path, ".svg")) return true;
  if (!endsWith(path, ".png")) return why = "--plot takes a file ending in .svg or .png, not '" + path + "'", false;
  if (onPath("rsvg-convert").empty())
    return why = "a .png plot needs rsvg-convert (Debian package librsvg2-bin), which is not on PATH; "
                 "ask for .svg instead",
           false;
  return true;
}

int writePlot(const std::string& path, const std::vector<Series>& series, const std::string& title,
              std::string& error) {
  if (!plotPathUsable(path, error)) return 2;
  const bool png = endsWith(path, ".png");
  const std::string svgPath = png ? path + ".tmp.svg" : path;
  {
    std::ofstream f(svgPath);
    f << renderSvg(series, title);
    if (!f.flush()) return error = "cannot write " + svgPath, 1;
  }
  if (!png) return 0;
  const std::string tool = onPath("rsvg-convert");
  std::vector<std::string> args = {tool, "-f", "png", "-o", path, svgPath};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  int status = -1;
  if (posix_spawn(&pid, tool.c_str(), nullptr, nullptr, argv.data(), environ) == 0) waitpid(pid, &status, 0);
  std::remove(svgPath.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return error = "rsvg-convert could not write " + path, 1;
  return 0;
}

}  // namespace gyre::bench
