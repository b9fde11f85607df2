// A figure as a list of shapes in pixel coordinates (y grows downwards):
// harness/plot.cc lays a plot out once as a Figure, and the two formats are
// two ways of drawing the same shapes, so an SVG and a PNG of the same runs
// show the same thing in the same places.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::harness {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

struct Point {
  double x = 0, y = 0;
};

enum class Anchor { kStart, kMiddle, kEnd };

struct Figure {
  // A straight line: axes, ticks, grid lines, legend swatches.
  struct Line {
    Point a, b;
    Rgb color;
    int width = 1;
  };
  // One data series, drawn as one SVG <path>: each piece a polyline (the
  // pieces are where the series has no gap); a piece of one point is a dot.
  struct Path {
    std::vector<std::vector<Point>> pieces;
    Rgb color;
    int width = 2;
  };
  // Text in the 5x7 font scaled by `scale`: `at` is on the baseline, where
  // the text starts, is centred or ends (`anchor`). A vertical text reads
  // upwards, turned a quarter turn anticlockwise about `at`.
  struct Text {
    Point at;
    std::string text;
    Rgb color;
    int scale = 1;
    Anchor anchor = Anchor::kStart;
    bool vertical = false;
  };

  int width = 0, height = 0;  // on a white background
  std::vector<Line> lines;    // drawn first,
  std::vector<Path> paths;    // then these,
  std::vector<Text> texts;    // and the text on top
};

// A text's width in pixels in the 5x7 font.
double textWidth(const std::string& text, int scale);

// The figure as a standalone SVG document (starting "<svg").
std::string toSvg(const Figure& figure);

// The figure drawn into width x height RGB pixels, row by row (encodePng's input).
std::vector<uint8_t> rasterize(const Figure& figure);

}  // namespace gyre::harness
