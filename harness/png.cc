#include "harness/png.h"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace gyre::harness {
namespace {

// The CRC of every byte value, computed once.
constexpr std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}();

void putBig32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

// A chunk: length, type, data, and the CRC of type and data.
void putChunk(std::vector<uint8_t>& out, const char (&type)[5], std::span<const uint8_t> data) {
  putBig32(out, static_cast<uint32_t>(data.size()));
  const size_t typeAt = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  putBig32(out, crc32(std::span(out).subspan(typeAt)));
}

// A zlib stream (RFC 1950) of `raw` in stored deflate blocks (RFC 1951,
// BTYPE 00): each block is a header byte (BFINAL in bit 0), its length
// LEN and ~LEN in little-endian, and up to 65535 bytes copied as they are.
std::vector<uint8_t> zlibStored(std::span<const uint8_t> raw) {
  std::vector<uint8_t> z = {0x78, 0x01};  // deflate, 32 KiB window; (0x78 * 256 + 0x01) % 31 == 0
  size_t at = 0;
  do {
    const size_t len = std::min<size_t>(raw.size() - at, 65535);
    z.push_back(at + len == raw.size() ? 1 : 0);
    const uint16_t n = static_cast<uint16_t>(len), nn = static_cast<uint16_t>(~n);
    z.insert(z.end(), {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8),
                       static_cast<uint8_t>(nn), static_cast<uint8_t>(nn >> 8)});
    z.insert(z.end(), raw.begin() + at, raw.begin() + at + len);
    at += len;
  } while (at < raw.size());
  putBig32(z, adler32(raw));
  return z;
}

}  // namespace

uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc) {
  crc = ~crc;
  for (const uint8_t b : bytes) crc = kCrcTable[(crc ^ b) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(std::span<const uint8_t> bytes, uint32_t adler) {
  constexpr uint32_t kMod = 65521;
  uint32_t a = adler & 0xffff, b = adler >> 16;
  // 5552 bytes is the most that can be added before b could overflow.
  for (size_t at = 0; at < bytes.size(); at += 5552) {
    const size_t end = std::min(bytes.size(), at + 5552);
    for (size_t i = at; i < end; ++i) {
      a += bytes[i];
      b += a;
    }
    a %= kMod;
    b %= kMod;
  }
  return b << 16 | a;
}

std::vector<uint8_t> encodePng(int width, int height, std::span<const uint8_t> rgb) {
  if (width <= 0 || height <= 0 || rgb.size() != size_t{3} * width * height)
    throw std::invalid_argument("encodePng: " + std::to_string(rgb.size()) + " bytes are not a " +
                                std::to_string(width) + "x" + std::to_string(height) +
                                " RGB image");
  const size_t rowBytes = size_t{3} * width;
  std::vector<uint8_t> raw;  // each row led by its filter type, 0 (none)
  raw.reserve((rowBytes + 1) * height);
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), rgb.begin() + y * rowBytes, rgb.begin() + (y + 1) * rowBytes);
  }

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> header;
  putBig32(header, static_cast<uint32_t>(width));
  putBig32(header, static_cast<uint32_t>(height));
  // Bit depth 8, colour type 2 (RGB), deflate, filter method 0, no interlace.
  header.insert(header.end(), {8, 2, 0, 0, 0});
  putChunk(png, "IHDR", header);
  putChunk(png, "IDAT", zlibStored(raw));
  putChunk(png, "IEND", {});
  return png;
}

}  // namespace gyre::harness
