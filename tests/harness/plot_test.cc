// The plots (harness/plot.h): the SVG holds a path per run per panel and the
// legend's names in balanced tags; the PNG is checked by a reader written
// here, independent of harness/png.cc: signature, IHDR, every chunk's CRC,
// the stored deflate blocks and the zlib stream's Adler-32, and the runs'
// colours in its pixels. Also the awkward inputs (one step, a constant loss,
// NaN and infinities) and the errors.
#include "harness/plot.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "harness/png.h"

namespace gyre::harness::test {
namespace {

namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A run whose loss falls from about log 256 and whose throughput wobbles.
PlotRun run(const std::string& name, int steps, double speed) {
  PlotRun r{name, {}};
  for (int s = 0; s < steps; ++s)
    r.steps.push_back({s, 5.5 * std::exp(-s / (10 * speed)) + 0.1, 3e-4,
                       40000 * speed + 3000 * std::sin(s), 0.1, 0.01, 0, 1});
  return r;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every tag closed, in order; "" when so, else the problem.
std::string tagProblem(const std::string& xml) {
  std::vector<std::string> open;
  for (size_t at = xml.find('<'); at != std::string::npos; at = xml.find('<', at + 1)) {
    const size_t end = xml.find('>', at);
    if (end == std::string::npos) return "unclosed '<' at " + std::to_string(at);
    const std::string tag = xml.substr(at + 1, end - at - 1);
    const std::string name = tag.substr(0, tag.find_first_of(" /\n"));
    if (tag.starts_with("/")) {
      if (open.empty() || open.back() != tag.substr(1)) return "stray </" + tag.substr(1) + ">";
      open.pop_back();
    } else if (!tag.ends_with("/")) {
      open.push_back(name);
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

// ---- An independent PNG reader ----

uint32_t big32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(b[at + i]);
  return v;
}

// Bit by bit, as the PNG specification defines it (png.cc uses a table).
uint32_t slowCrc(const std::string& bytes) {
  uint32_t c = 0xffffffff;
  for (const char ch : bytes) {
    c ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0xedb88320u : 0);
  }
  return ~c;
}

uint32_t slowAdler(const std::string& bytes) {
  uint32_t a = 1, b = 0;
  for (const char ch : bytes) {
    a = (a + static_cast<uint8_t>(ch)) % 65521;
    b = (b + a) % 65521;
  }
  return b << 16 | a;
}

struct Png {
  uint32_t width = 0, height = 0;
  std::string rgb;  // the pixels, the rows' filter bytes removed
};

// Checks the file with gtest's assertions on the way and returns its pixels.
Png readPng(const std::string& path) {
  const std::string b = readFile(path);
  Png png;
  EXPECT_EQ(b.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::vector<std::string> types;
  std::string idat;
  for (size_t at = 8; at < b.size();) {
    if (at + 12 > b.size()) return ADD_FAILURE() << "chunk cut off at " << at, png;
    const uint32_t len = big32(b, at);
    if (at + 12 + len > b.size()) return ADD_FAILURE() << "chunk cut off at " << at, png;
    const std::string type = b.substr(at + 4, 4), data = b.substr(at + 8, len);
    EXPECT_EQ(big32(b, at + 8 + len), slowCrc(type + data)) << type << " chunk's CRC";
    types.push_back(type);
    if (type == "IHDR") {
      EXPECT_EQ(len, 13u);
      png.width = big32(data, 0), png.height = big32(data, 4);
      EXPECT_EQ(data.substr(8), std::string("\x08\x02\x00\x00\x00", 5));  // 8-bit RGB
    }
    if (type == "IDAT") idat += data;
    at += 12 + len;
  }
  EXPECT_EQ(types.front(), "IHDR");
  EXPECT_EQ(types.back(), "IEND");
  // zlib: CMF/FLG, stored blocks of LEN, ~LEN and the bytes, the Adler-32.
  if (idat.size() < 6) return ADD_FAILURE() << "no image data", png;
  EXPECT_EQ(static_cast<uint8_t>(idat[0]) & 0x0f, 8) << "deflate";
  EXPECT_EQ((static_cast<uint8_t>(idat[0]) * 256 + static_cast<uint8_t>(idat[1])) % 31, 0);
  std::string raw;
  size_t at = 2;
  for (bool final = false; !final;) {
    if (at + 5 > idat.size()) return ADD_FAILURE() << "deflate block cut off", png;
    const uint8_t head = static_cast<uint8_t>(idat[at]);
    final = head & 1;
    EXPECT_EQ(head >> 1, 0) << "a stored block";
    const uint32_t len = static_cast<uint8_t>(idat[at + 1]) | static_cast<uint8_t>(idat[at + 2])
                                                                  << 8;
    const uint32_t nlen = static_cast<uint8_t>(idat[at + 3]) | static_cast<uint8_t>(idat[at + 4])
                                                                   << 8;
    EXPECT_EQ(len ^ 0xffff, nlen);
    raw += idat.substr(at + 5, len);
    at += 5 + len;
  }
  EXPECT_EQ(at + 4, idat.size());
  EXPECT_EQ(big32(idat, at), slowAdler(raw)) << "zlib's Adler-32";
  const size_t row = 1 + 3 * size_t{png.width};
  EXPECT_EQ(raw.size(), row * png.height);
  for (uint32_t y = 0; y < png.height && (y + 1) * row <= raw.size(); ++y) {
    EXPECT_EQ(raw[y * row], 0) << "row " << y << "'s filter";
    png.rgb += raw.substr(y * row + 1, row - 1);
  }
  return png;
}

// Colours (not greys) with at least `least` pixels.
size_t colours(const Png& png, size_t least) {
  std::map<std::tuple<int, int, int>, size_t> seen;
  for (size_t i = 0; i + 2 < png.rgb.size(); i += 3) {
    const int r = static_cast<uint8_t>(png.rgb[i]), g = static_cast<uint8_t>(png.rgb[i + 1]),
              b = static_cast<uint8_t>(png.rgb[i + 2]);
    if (r != g || g != b) ++seen[{r, g, b}];
  }
  size_t n = 0;
  for (const auto& [c, pixels] : seen) n += pixels >= least;
  return n;
}

class HarnessPlot : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gyre-plot-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // Both formats of `runs`, checked; returns the SVG's text.
  std::string plotBoth(const std::vector<PlotRun>& runs, size_t colouredRuns) {
    const std::string svgPath = file("plot.svg"), pngPath = file("plot.png");
    plotRuns(runs, svgPath);
    const std::string svg = readFile(svgPath);
    EXPECT_TRUE(svg.starts_with("<svg")) << svg.substr(0, 40);
    EXPECT_EQ(tagProblem(svg), "");
    EXPECT_EQ(count(svg, "<path "), 2 * runs.size()) << "a path per run per panel";
    EXPECT_EQ(count(svg, "nan"), 0u);
    EXPECT_EQ(count(svg, "inf"), 0u);
    plotRuns(runs, pngPath);
    const Png png = readPng(pngPath);
    EXPECT_EQ(png.width, static_cast<uint32_t>(kPlotWidth));
    EXPECT_EQ(png.height, static_cast<uint32_t>(kPlotHeight));
    EXPECT_GE(colours(png, 30), colouredRuns) << "each run's line in its colour";
    return svg;
  }

  fs::path dir_;
};

TEST(HarnessPng, ChecksumsMatchTheirCheckValues) {
  const std::string digits = "123456789";
  const std::vector<uint8_t> bytes(digits.begin(), digits.end());
  EXPECT_EQ(crc32(bytes), 0xCBF43926u);
  EXPECT_EQ(crc32(std::span(bytes).subspan(4), crc32(std::span(bytes).first(4))), 0xCBF43926u);
  const std::string wiki = "Wikipedia";
  EXPECT_EQ(adler32(std::vector<uint8_t>(wiki.begin(), wiki.end())), 0x11E60398u);
  // Long enough to cross adler32's reduction blocks.
  std::string big(200000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(255 - i % 7);
  EXPECT_EQ(adler32(std::vector<uint8_t>(big.begin(), big.end())), slowAdler(big));
  EXPECT_THROW(encodePng(2, 2, std::vector<uint8_t>(11)), std::invalid_argument);
}

TEST_F(HarnessPlot, TwoRunsInBothFormats) {
  const std::string svg = plotBoth({run("dp1", 60, 1), run("dp2 <fast> & co", 60, 2)}, 2);
  EXPECT_NE(svg.find(">dp1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">dp2 &lt;fast&gt; &amp; co</text>"), std::string::npos);
  for (const char* title : {">Loss<", ">Throughput<", ">step<", ">loss<", ">tokens/s<"})
    EXPECT_NE(svg.find(title), std::string::npos) << title;
  // Tick labels are numbers: the steps 0 to 60, the throughput in thousands.
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">60</text>"), std::string::npos);
  EXPECT_NE(svg.find("k</text>"), std::string::npos);
}

TEST_F(HarnessPlot, OneStepAConstantLossAndNonFiniteValues) {
  plotBoth({run("single", 1, 1)}, 1);  // one point: a dot, both axes padded
  PlotRun flat = run("flat", 20, 1);
  for (StepRecord& s : flat.steps) s.loss = 2.5, s.tokensPerSecond = 0;
  plotBoth({flat}, 1);
  PlotRun broken = run("broken", 40, 1), lost = run("lost", 40, 1.5);
  broken.steps[10].loss = kNaN;
  broken.steps[11].loss = kInf;
  broken.steps[25].tokensPerSecond = -kInf;
  for (StepRecord& s : lost.steps) s.loss = kNaN;  // a panel with no point of this run
  plotBoth({broken, lost}, 2);
  for (StepRecord& s : broken.steps) s.loss = kNaN;  // nor of any run
  plotBoth({broken, lost}, 2);
  PlotRun huge = run("huge", 5, 1);
  huge.steps[0].loss = std::numeric_limits<double>::max();
  huge.steps[1].loss = -std::numeric_limits<double>::max();
  plotBoth({huge}, 1);
}

TEST_F(HarnessPlot, BadInputsAreNamed) {
  auto expectInvalid = [](const std::vector<PlotRun>& runs, const std::string& path,
                          const std::string& part) {
    try {
      plotRuns(runs, path);
      ADD_FAILURE() << "no invalid_argument for " << path;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  const std::vector<PlotRun> runs = {run("a", 3, 1)};
  for (const std::string name : {"plot.jpg", "plot", "plot.svg.txt", "svg"})
    expectInvalid(runs, file(name), ".svg or .png");
  expectInvalid(runs, file("dir.svg") + "/plot", ".svg or .png");
  expectInvalid({}, file("plot.svg"), "no runs");
  expectInvalid({run("a", 3, 1), PlotRun{"empty run", {}}}, file("plot.png"),
                "'empty run' has no steps");
  EXPECT_FALSE(fs::exists(file("plot.svg")));
  plotRuns(runs, file("UPPER.PNG"));  // the extension in any case
  EXPECT_EQ(readPng(file("UPPER.PNG")).width, static_cast<uint32_t>(kPlotWidth));
  const std::string unwritable = file("missing/plot.svg");
  try {
    plotRuns(runs, unwritable);
    ADD_FAILURE() << "no runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(unwritable), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gyre::harness::test
