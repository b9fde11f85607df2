// half.h is the reference for the 16-bit float kernels, so it is checked
// independently: known encodings, every half against a formula, every
// rounding decision boundary, and (where the CPU has F16C) the hardware.
#include "kernels/cpu/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace gyre::kernels {
namespace {

uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
float fromBits(uint32_t b) { return std::bit_cast<float>(b); }

static_assert(floatToHalf(1.0f) == 0x3c00);  // usable in constant expressions
static_assert(floatToBfloat16(1.0f) == 0x3f80);

TEST(Half, KnownEncodings) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(0.5f), 0x3800);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(NAN), 0x7e00);
  EXPECT_EQ(floatToHalf(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);
  // Rounding: ties to even, overflow to infinity, gradual underflow.
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);      // tie, down to even
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, up to even
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // tie goes to the even infinity
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);  // tie between 0 and 0x0001
  EXPECT_EQ(floatToHalf(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 ulps
  EXPECT_EQ(floatToHalf(-0x1p-26f), 0x8000);
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-25f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);

  EXPECT_EQ(bitsOf(halfToFloat(0x3c00)), bitsOf(1.0f));
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(bitsOf(halfToFloat(0xfc00)), 0xff800000u);
}

TEST(Half, NansStayQuietNans) {
  EXPECT_EQ(bitsOf(halfToFloat(0x7e00)), 0x7fc00000u);
  EXPECT_EQ(bitsOf(halfToFloat(0x7d00)), 0x7fe00000u);  // signaling: quieted, payload kept
  EXPECT_EQ(bitsOf(halfToFloat(0xfc01)), 0xffc02000u);
  EXPECT_EQ(floatToHalf(fromBits(0x7f800001)), 0x7e00);  // payload only in dropped bits
  EXPECT_EQ(floatToHalf(fromBits(0xffa00000)), 0xff00);
  EXPECT_EQ(floatToHalf(fromBits(0x7fffffff)), 0x7fff);
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x7fc0)), 0x7fc00000u);
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x7f81)), 0x7fc10000u);
  EXPECT_EQ(floatToBfloat16(fromBits(0x7f800001)), 0x7fc0);
  EXPECT_EQ(floatToBfloat16(fromBits(0xff800001)), 0xffc0);
  EXPECT_EQ(floatToBfloat16(fromBits(0x7fc00000)), 0x7fc0);
  EXPECT_EQ(floatToBfloat16(fromBits(0x7f812345)), 0x7fc1);
}

TEST(Bfloat16, KnownEncodings) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(-1.0f), 0xbf80);
  EXPECT_EQ(floatToBfloat16(3.0f), 0x4040);
  EXPECT_EQ(floatToBfloat16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBfloat16(INFINITY), 0x7f80);
  EXPECT_EQ(floatToBfloat16(-INFINITY), 0xff80);
  EXPECT_EQ(floatToBfloat16(1.0f + 0x1p-8f), 0x3f80);                     // tie, down to even
  EXPECT_EQ(floatToBfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);                 // tie, up to even
  EXPECT_EQ(floatToBfloat16(fromBits(0x3f808001)), 0x3f81);               // just past the tie
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // overflows
  EXPECT_EQ(floatToBfloat16(fromBits(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(floatToBfloat16(fromBits(0x00008000)), 0x0000);  // subnormal tie to even
  EXPECT_EQ(floatToBfloat16(fromBits(0x00018000)), 0x0002);
  EXPECT_EQ(floatToBfloat16(fromBits(0x00008001)), 0x0001);
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x3f80)), bitsOf(1.0f));
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x0001)), 0x00010000u);
}

// The value of every half from its fields, computed in double.
TEST(Half, EveryEncodingWidensExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const float f = halfToFloat(static_cast<uint16_t>(h));
    if (e == 0x1f) {
      EXPECT_TRUE(m == 0 ? std::isinf(f) : std::isnan(f)) << h;
      continue;
    }
    const double expected = sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
    ASSERT_EQ(bitsOf(f), bitsOf(static_cast<float>(expected))) << "half 0x" << std::hex << h;
    ASSERT_EQ(floatToHalf(f), h) << "round trip of 0x" << std::hex << h;
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bfloat16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(bitsOf(f), h << 16);
    ASSERT_EQ(floatToBfloat16(f), h);
  }
}

// For each pair of neighbours lo < hi (positive and negative), the exact
// midpoint must go to the even one, and the floats just either side of it to
// the nearer one. This covers every rounding decision the format can make.
template <float (*kWiden)(uint16_t), uint16_t (*kNarrow)(float)>
void checkEveryMidpoint(uint16_t largestFinite, double overflowValue) {
  for (uint32_t h = 0; h <= largestFinite; ++h) {
    const double lo = kWiden(static_cast<uint16_t>(h));
    const double hi = h == largestFinite ? overflowValue : kWiden(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: one more bit than the format
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    for (float s : {1.0f, -1.0f}) {
      const uint16_t sign = s < 0 ? 0x8000 : 0;
      ASSERT_EQ(kNarrow(s * static_cast<float>(lo)), h | sign) << h;
      ASSERT_EQ(kNarrow(s * mid), even | sign) << h;
      ASSERT_EQ(kNarrow(s * std::nextafter(mid, 0.0f)), h | sign) << h;
      ASSERT_EQ(kNarrow(s * std::nextafter(mid, INFINITY)), (h + 1) | sign) << h;
    }
  }
}

TEST(Half, EveryRoundingBoundary) {
  checkEveryMidpoint<&halfToFloat, &floatToHalf>(0x7bff, 65536.0);
}

TEST(Bfloat16, EveryRoundingBoundary) {
  checkEveryMidpoint<&bfloat16ToFloat, &floatToBfloat16>(0x7f7f, std::ldexp(1.0, 128));
}

#if defined(__x86_64__)
// The AVX2/AVX-512 kernels use F16C; half.h must agree with it exactly.
__attribute__((target("f16c"))) float hwWiden(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hwNarrow(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

TEST(Half, MatchesF16cHardware) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & bit_F16C) == 0) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 0x10000; ++h) {
    ASSERT_EQ(bitsOf(halfToFloat(static_cast<uint16_t>(h))),
              bitsOf(hwWiden(static_cast<uint16_t>(h))))
        << "half 0x" << std::hex << h;
  }
  // A stride through all float encodings (every exponent, NaN payloads
  // included) plus the low and high ends of each.
  for (uint64_t x = 0; x <= 0xffffffffull; x += 4093) {
    for (uint32_t bits : {static_cast<uint32_t>(x), static_cast<uint32_t>(x) ^ 0x1fffu}) {
      ASSERT_EQ(floatToHalf(fromBits(bits)), hwNarrow(fromBits(bits)))
          << "float 0x" << std::hex << bits;
    }
  }
}
#endif

}  // namespace
}  // namespace gyre::kernels
