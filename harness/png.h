// A PNG encoder small enough to read in one sitting, so that the harness can
// write plots without libpng or zlib: 8-bit RGB, no interlacing, every row
// unfiltered, and the image data in zlib's *stored* deflate blocks (no
// compression; a 800x640 plot is 1.5 MB). The checksums PNG and zlib ask
// for, CRC-32 on each chunk and Adler-32 on the zlib stream, are here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gyre::harness {

// CRC-32 as PNG defines it (polynomial 0xEDB88320, reflected, inverted),
// continued from `crc` (the CRC of the bytes before; 0 to start).
uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc = 0);

// Adler-32 as zlib defines it, continued from `adler` (1 to start).
uint32_t adler32(std::span<const uint8_t> bytes, uint32_t adler = 1);

// The PNG file of a width x height image, `rgb` holding its pixels row by
// row, three bytes (red, green, blue) each. Throws std::invalid_argument
// when the sizes do not agree or either is not positive.
std::vector<uint8_t> encodePng(int width, int height, std::span<const uint8_t> rgb);

}  // namespace gyre::harness
