#include "harness/figure.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "harness/font.h"

namespace gyre::harness {
namespace {

// ---- SVG ----

// Locale-independent, one decimal: SVG wants '.' whatever LC_NUMERIC says.
std::string num(double v) {
  std::array<char, 48> buf;
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed, 1);
  return std::string(buf.data(), r.ptr);
}

std::string color(Rgb c) {
  return "rgb(" + std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b) + ")";
}

std::string escapeXml(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // XML 1.0 allows no control characters but tab, newline and return.
        out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return out;
}

// ---- Raster ----

class Image {
 public:
  Image(int width, int height)
      : width_(width), height_(height), rgb_(size_t{3} * width * height, 255) {}

  void set(long x, long y, Rgb c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
    uint8_t* p = &rgb_[3 * (static_cast<size_t>(y) * width_ + x)];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }

  // Bresenham's line, each of its pixels widened to a width x width square.
  void line(Point a, Point b, Rgb c, int width) {
    long x = pixel(a.x), y = pixel(a.y);
    const long x1 = pixel(b.x), y1 = pixel(b.y);
    const long dx = std::labs(x1 - x), dy = -std::labs(y1 - y);
    const long sx = x < x1 ? 1 : -1, sy = y < y1 ? 1 : -1;
    long err = dx + dy;
    for (;;) {
      for (int i = -(width - 1) / 2; i <= width / 2; ++i)
        for (int j = -(width - 1) / 2; j <= width / 2; ++j) set(x + i, y + j, c);
      if (x == x1 && y == y1) return;
      const long e2 = 2 * err;
      if (e2 >= dy) err += dy, x += sx;
      if (e2 <= dx) err += dx, y += sy;
    }
  }

  void dot(Point p, Rgb c, double radius) {
    const long cx = pixel(p.x), cy = pixel(p.y), r = std::lround(std::ceil(radius));
    for (long dy = -r; dy <= r; ++dy)
      for (long dx = -r; dx <= r; ++dx)
        if (dx * dx + dy * dy <= radius * radius) set(cx + dx, cy + dy, c);
  }

  void text(const Figure::Text& t) {
    const int s = t.scale;
    const double w = textWidth(t.text, s);
    const double start = t.anchor == Anchor::kStart ? 0 : t.anchor == Anchor::kMiddle ? -w / 2 : -w;
    for (size_t k = 0; k < t.text.size(); ++k) {
      for (int row = 0; row < kGlyphHeight + kGlyphDescent; ++row) {
        const uint8_t bits = glyphRow(t.text[k], row);
        for (int col = 0; col < kGlyphWidth; ++col) {
          if (!(bits & (0x10 >> col))) continue;
          // The pixel's offset from `at` in the text's own frame...
          const long u = std::lround(start) + static_cast<long>(k) * kGlyphAdvance * s + col * s;
          const long v = (row - kGlyphHeight) * s;
          for (int i = 0; i < s; ++i)
            for (int j = 0; j < s; ++j) {
              // ...and on the image: a vertical text turns (u, v) into (v, -u).
              const long du = u + i, dv = v + j;
              if (t.vertical)
                set(pixel(t.at.x) + dv, pixel(t.at.y) - du - 1, t.color);
              else
                set(pixel(t.at.x) + du, pixel(t.at.y) + dv, t.color);
            }
        }
      }
    }
  }

  std::vector<uint8_t> take() { return std::move(rgb_); }

 private:
  // Far outside the image is as good as just outside, and keeps the loops short.
  static long pixel(double v) { return std::isnan(v) ? -1 : std::lround(std::clamp(v, -1e4, 1e5)); }

  int width_, height_;
  std::vector<uint8_t> rgb_;
};

constexpr double kDotRadius = 2.5;

}  // namespace

double textWidth(const std::string& text, int scale) {
  return text.empty() ? 0 : (static_cast<double>(text.size()) * kGlyphAdvance - 1) * scale;
}

std::string toSvg(const Figure& f) {
  const std::string w = std::to_string(f.width), h = std::to_string(f.height);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h + "\" font-family=\"sans-serif\">\n";
  out += "<rect width=\"" + w + "\" height=\"" + h + "\" fill=\"white\"/>\n";
  for (const Figure::Line& l : f.lines)
    out += "<line x1=\"" + num(l.a.x) + "\" y1=\"" + num(l.a.y) + "\" x2=\"" + num(l.b.x) +
           "\" y2=\"" + num(l.b.y) + "\" stroke=\"" + color(l.color) + "\" stroke-width=\"" +
           std::to_string(l.width) + "\"/>\n";
  for (const Figure::Path& p : f.paths) {
    std::string d, dots;
    for (const std::vector<Point>& piece : p.pieces) {
      for (size_t i = 0; i < piece.size(); ++i)
        d += (d.empty() ? "" : " ") + std::string(i == 0 ? "M" : "L") + num(piece[i].x) + "," +
             num(piece[i].y);
      if (piece.size() == 1)
        dots += "<circle cx=\"" + num(piece[0].x) + "\" cy=\"" + num(piece[0].y) + "\" r=\"" +
                num(kDotRadius) + "\" fill=\"" + color(p.color) + "\"/>\n";
    }
    out += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + color(p.color) + "\" stroke-width=\"" +
           std::to_string(p.width) + "\" stroke-linejoin=\"round\" stroke-linecap=\"round\"/>\n" +
           dots;
  }
  for (const Figure::Text& t : f.texts) {
    const char* anchor = t.anchor == Anchor::kStart    ? "start"
                         : t.anchor == Anchor::kMiddle ? "middle"
                                                       : "end";
    const std::string x = num(t.at.x), y = num(t.at.y);
    // 10 px per scale step makes a sans-serif's capitals about as tall as the 5x7 font's.
    out += "<text x=\"" + x + "\" y=\"" + y + "\" font-size=\"" + std::to_string(10 * t.scale) +
           "\" text-anchor=\"" + anchor + "\" fill=\"" + color(t.color) + "\"" +
           (t.vertical ? " transform=\"rotate(-90 " + x + " " + y + ")\"" : "") + ">" +
           escapeXml(t.text) + "</text>\n";
  }
  return out + "</svg>\n";
}

std::vector<uint8_t> rasterize(const Figure& f) {
  Image image(f.width, f.height);
  for (const Figure::Line& l : f.lines) image.line(l.a, l.b, l.color, l.width);
  for (const Figure::Path& p : f.paths) {
    for (const std::vector<Point>& piece : p.pieces) {
      for (size_t i = 1; i < piece.size(); ++i)
        image.line(piece[i - 1], piece[i], p.color, p.width);
      if (piece.size() == 1) image.dot(piece[0], p.color, kDotRadius);
    }
  }
  for (const Figure::Text& t : f.texts) image.text(t);
  return image.take();
}

}  // namespace gyre::harness
