// A 5x7 bitmap font for the text of the PNG plots (harness/plot.h): printable
// ASCII, drawn for this harness, so that a plot needs no font file and no
// library and looks the same on every machine.
#pragma once

#include <cstdint>

namespace gyre::harness {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;   // from the cap line to the baseline
inline constexpr int kGlyphDescent = 2;  // below the baseline: g, j, p, q, y, ',' and ';'
inline constexpr int kGlyphAdvance = 6;  // a column of space between characters

// Row `row` (0 at the top, the baseline under row kGlyphHeight - 1, the
// descent below it) of the glyph of `c`: bit 4 is the leftmost column. A
// character outside printable ASCII gets a hollow box.
uint8_t glyphRow(char c, int row);

}  // namespace gyre::harness
