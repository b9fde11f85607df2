// Scalar conversions between float32 and the two 16-bit float formats.
//
// These are the reference every vector path must match bit for bit, so they
// are plain C++ (no intrinsics, no reliance on the FPU's rounding mode) and
// constexpr. Narrowing rounds to nearest, ties to even, with overflow to
// infinity and gradual underflow to subnormals. NaNs stay NaN and come out
// quiet (the quiet bit is forced, the top payload bits are kept), which is what
// x86's F16C instructions do, so the vector kernels agree with them.
#pragma once

#include <bit>
#include <cstdint>

namespace gyre::kernels {

constexpr uint16_t floatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {  // NaN: keep the payload's top 9 bits, force quiet
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x1ffu));
  }
  // 0x477ff000 is 65520, halfway between 65504 (the largest half) and 65536:
  // the tie goes to the even neighbour, which is the infinity encoding.
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u) {  // result is a normal half (>= 2^-14)
    // Rebias the exponent (127 -> 15) and round off 13 mantissa bits; a carry
    // out of the mantissa correctly bumps the exponent.
    const uint32_t m = ax - 0x38000000u;
    return static_cast<uint16_t>(sign | ((m + 0x0fffu + ((m >> 13) & 1u)) >> 13));
  }
  // Subnormal half: value * 2^24 rounded to an integer. Below 2^-25 (biased
  // exponent 102) everything rounds to zero; exactly 2^-25 ties to even (0).
  const uint32_t e = ax >> 23;
  if (e < 102) return sign;
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may reach 0x400: smallest normal
  return static_cast<uint16_t>(sign | q);
}

constexpr float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) {
    const uint32_t bits = m == 0 ? 0x7f800000u : (0x7fc00000u | (m << 13));
    return std::bit_cast<float>(sign | bits);
  }
  if (e == 0) {
    // Subnormal half: m * 2^-24 is exact in float32 (and normal there).
    const float mag = static_cast<float>(m) * 0x1p-24f;
    return sign ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

constexpr uint16_t floatToBfloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // Truncating alone could turn a NaN whose payload sits in the low 16 bits
    // into infinity; the quiet bit keeps it a NaN.
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  }
  // Adding 0x7fff plus the kept lsb rounds ties to even; a carry propagates
  // into the exponent, and past the largest finite value it lands on infinity.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

constexpr float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  if ((bits & 0x7fffffffu) > 0x7f800000u) bits |= 0x00400000u;  // quiet NaNs, like halfToFloat
  return std::bit_cast<float>(bits);
}

}  // namespace gyre::kernels
