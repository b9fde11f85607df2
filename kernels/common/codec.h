// The compression codecs' arithmetic, written once for the host and the GPU
// (as arith.h): int8 min-max quantization and 1-bit sign packing, each per
// chunk of kChunk elements. kernels/cpu/codec.cc and kernels/cuda/codec.cu
// both build on these functions and on the one order of summation stated
// here, so a message encoded on a GPU decodes to the CPU's bits and back.
//
// Messages (docs/compression.md will give the codecs' use):
// - int8 min-max, n elements: chunks(n) pairs {float lo, float hi}, then n
//   codes (uint8). A code c decodes to lo + c * (hi - lo) / 255; encoding
//   rounds (x - lo) * 255 / (hi - lo) to nearest, ties to even, clamped to
//   [0, 255]. NaNs are left out of lo and hi (and encode as 0); a chunk
//   without a number has lo = hi = 0.
// - 1-bit sign, n elements: chunks(n) floats (the scale: the mean of |x| over
//   the chunk), then (n + 31) / 32 words (uint32): bit i % 32 of word i / 32
//   is 1 when element i is not negative (NaN and -0.0 too). A bit decodes to
//   +scale or -scale.
// The mean's sum has one order (so the GPU's equals the CPU's): kLanes
// partial sums, lane l adding |x[l]|, |x[l + kLanes]|, ... in turn, then a
// tree: for s = kLanes / 2 down to 1, partial[i] += partial[i + s] for i < s.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/arith.h"

namespace gyre::kernels::codec {

constexpr uint32_t kChunk = 4096;  // elements per chunk: one scale (pair) each
constexpr uint32_t kLanes = 256;   // partial sums of a chunk's mean
static_assert(kChunk % kLanes == 0 && kChunk % 32 == 0);

GYRE_HD constexpr size_t chunks(size_t n) { return (n + kChunk - 1) / kChunk; }
GYRE_HD constexpr size_t minMaxBytes(size_t n) { return chunks(n) * 2 * sizeof(float) + n; }
GYRE_HD constexpr size_t signWords(size_t n) { return (n + 31) / 32; }
GYRE_HD constexpr size_t signBytes(size_t n) { return chunks(n) * sizeof(float) + signWords(n) * sizeof(uint32_t); }

constexpr float kInf = arith::bitCast<float>(0x7f800000u);

// ---- int8 min-max ---------------------------------------------------------

struct Range {
  float lo, hi;
};

// Folds x into a chunk's range; NaNs are passed over (comparisons fail).
GYRE_HD void widen(Range& r, float x) {
  r.lo = x < r.lo ? x : r.lo;
  r.hi = x > r.hi ? x : r.hi;
}
GYRE_HD constexpr Range emptyRange() { return {kInf, -kInf}; }
// Two partial ranges (of numbers, or empty) as one.
GYRE_HD void merge(Range& a, Range b) {
  a.lo = b.lo < a.lo ? b.lo : a.lo;
  a.hi = b.hi > a.hi ? b.hi : a.hi;
}
// A chunk's final range: one without a number becomes [0, 0], and a zero
// end is +0.0 (which of -0.0 and 0.0 a comparison keeps depends on order).
GYRE_HD Range settle(Range r) { return r.hi >= r.lo ? Range{r.lo + 0.0f, r.hi + 0.0f} : Range{0.0f, 0.0f}; }

// 255 / (hi - lo), or 0 for a flat (or infinite) range: every code is 0.
GYRE_HD float inverseStep(Range r) {
  const float range = r.hi - r.lo;
  return range > 0.0f && range < kInf ? 255.0f / range : 0.0f;
}
GYRE_HD float step(Range r) { return inverseStep(r) > 0.0f ? (r.hi - r.lo) / 255.0f : 0.0f; }

GYRE_HD uint8_t encode(float x, Range r, float inv) {
  const float q = (x - r.lo) * inv;
  if (!(q > 0.0f)) return 0;  // below the range, or NaN
  if (q >= 255.0f) return 255;
  // Round to nearest, ties to even: q is in (0, 255), so the truncation is
  // the floor.
  uint32_t i = static_cast<uint32_t>(q);
  const float frac = q - static_cast<float>(i);
  if (frac > 0.5f || (frac == 0.5f && (i & 1u))) ++i;
  return static_cast<uint8_t>(i);
}

GYRE_HD float decode(uint8_t c, Range r, float stepSize) { return r.lo + static_cast<float>(c) * stepSize; }

// ---- 1-bit sign -------------------------------------------------------------

GYRE_HD uint32_t signBit(float x) { return x < 0.0f ? 0u : 1u; }
GYRE_HD float unsign(uint32_t bit, float scale) { return bit ? scale : -scale; }
GYRE_HD float magnitude(float x) { return x < 0.0f ? -x : (x == x ? x : 0.0f); }  // NaN adds nothing
// The scale of a chunk of len elements whose |x| sum to sum.
GYRE_HD float meanOf(float sum, uint32_t len) { return len ? sum / static_cast<float>(len) : 0.0f; }

// ---- inputs -----------------------------------------------------------------

// Element i of a float32, float16 or bfloat16 array (format 0, 1, 2), as
// float32.
enum Input : uint8_t { kF32 = 0, kF16 = 1, kBf16 = 2 };
GYRE_HD float load(const void* p, Input in, size_t i) {
  if (in == kF32) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return in == kF16 ? arith::halfToFloat(h) : arith::bfloat16ToFloat(h);
}

}  // namespace gyre::kernels::codec
