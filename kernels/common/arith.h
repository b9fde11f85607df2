// The element-wise arithmetic of every kernel, written once for the host and
// the GPU: the CPU's scalar kernels (kernels/cpu) and the CUDA kernels
// (kernels/cuda) both call these functions, so a reduction means the same
// bits wherever it runs. tests/kernels/arith_test.cc checks them against the
// CPU kernels bit for bit on every commit, where no GPU is at hand.
//
// Plain C++20 with no library templates in device code: nvcc compiles it as
// __host__ __device__ (GYRE_HD), the host compilers as inline functions. Only
// translation units built for the baseline x86-64 include it (an inline
// function compiled with -mavx512f in one file could be the copy the linker
// keeps for all; see reduce_impl.h).
//
// Semantics (reduce.h states them for callers):
// - integers wrap (two's complement): arithmetic in the unsigned type;
// - float16 and bfloat16 compute in float32 and round to nearest even once,
//   so the GPU's result equals the CPU's (the GPU's hardware conversions
//   serve every value but a NaN, which they would quiet differently);
// - max/min pick an input, never compute: a when a is NaN, else b when b is
//   NaN, else b only when strictly greater (less);
// - the average's divide: integers truncate toward zero, float types divide
//   correctly rounded (float16/bfloat16 round to 16 bits first, as the CPU
//   divides the stored sum).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GYRE_HD __host__ __device__ __forceinline__
#else
#define GYRE_HD inline
#endif

namespace gyre::kernels::arith {

template <class To, class From>
GYRE_HD constexpr To bitCast(From f) {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, f);
}

// ---- 16-bit floats ------------------------------------------------------
// Narrowing rounds to nearest, ties to even, overflows to infinity and
// underflows gradually; NaNs stay NaN, quieted with their top payload bits
// kept (what x86's F16C does, so the vector CPU kernels agree).

GYRE_HD constexpr uint16_t floatToHalf(float f) {
  const uint32_t x = bitCast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {  // NaN: keep the payload's top 9 bits, force quiet
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x1ffu));
  }
  // 0x477ff000 is 65520, halfway between 65504 (the largest half) and 65536:
  // the tie goes to the even neighbour, which is the infinity encoding.
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u) {  // a normal half (>= 2^-14)
    // Rebias the exponent (127 -> 15) and round off 13 mantissa bits; a carry
    // out of the mantissa correctly bumps the exponent.
    const uint32_t m = ax - 0x38000000u;
    return static_cast<uint16_t>(sign | ((m + 0x0fffu + ((m >> 13) & 1u)) >> 13));
  }
  // A subnormal half: value * 2^24 rounded to an integer. Below 2^-25
  // (biased exponent 102) everything rounds to zero; exactly 2^-25 ties to
  // even (0).
  const uint32_t e = ax >> 23;
  if (e < 102) return sign;
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may reach 0x400: the smallest normal
  return static_cast<uint16_t>(sign | q);
}

GYRE_HD constexpr float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) {
    const uint32_t bits = m == 0 ? 0x7f800000u : (0x7fc00000u | (m << 13));
    return bitCast<float>(sign | bits);
  }
  if (e == 0) {
    // A subnormal half: m * 2^-24 is exact in float32 (and normal there).
    const float mag = static_cast<float>(m) * 0x1p-24f;
    return sign ? -mag : mag;
  }
  return bitCast<float>(sign | ((e + 112) << 23) | (m << 13));
}

GYRE_HD constexpr uint16_t floatToBfloat16(float f) {
  const uint32_t x = bitCast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // Truncating alone could turn a NaN whose payload sits in the low 16 bits
    // into infinity; the quiet bit keeps it a NaN.
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  }
  // Adding 0x7fff plus the kept lsb rounds ties to even; a carry propagates
  // into the exponent, and past the largest finite value lands on infinity.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

GYRE_HD constexpr float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  if ((bits & 0x7fffffffu) > 0x7f800000u) bits |= 0x00400000u;  // quiet NaNs, like halfToFloat
  return bitCast<float>(bits);
}

// On the GPU the hardware converts (one instruction, where the software
// forms above cost a dozen with branches and left the float16 reduction
// compute-bound at half the memory's speed). Its conversions round exactly
// as the software forms for every value but a NaN, which the hardware would
// quiet to its canonical bits: NaNs take the software path, so the bits
// stay the CPU's.
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float halfToFloatHw(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) return halfToFloat(h);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ uint16_t floatToHalfHw(float f) {
  if ((bitCast<uint32_t>(f) & 0x7fffffffu) > 0x7f800000u) return floatToHalf(f);
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ uint16_t floatToBfloat16Hw(float f) {
#if __CUDA_ARCH__ >= 800
  if ((bitCast<uint32_t>(f) & 0x7fffffffu) > 0x7f800000u) return floatToBfloat16(f);
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  return floatToBfloat16(f);
#endif
}
#endif

// ---- Storage formats ----------------------------------------------------
// Each stored type S says how an element is computed on: S::C is the compute
// type, load() widens, store() rounds back.

template <class T>
struct Plain {
  using Elem = T;
  using C = T;
  static GYRE_HD constexpr C load(T v) { return v; }
  static GYRE_HD constexpr T store(C v) { return v; }
};

struct Half {
  using Elem = uint16_t;
  using C = float;
#if defined(__CUDA_ARCH__)
  static __device__ __forceinline__ C load(uint16_t v) { return halfToFloatHw(v); }
  static __device__ __forceinline__ uint16_t store(C v) { return floatToHalfHw(v); }
#else
  static GYRE_HD constexpr C load(uint16_t v) { return halfToFloat(v); }
  static GYRE_HD constexpr uint16_t store(C v) { return floatToHalf(v); }
#endif
};

struct Bfloat16 {
  using Elem = uint16_t;
  using C = float;
  static GYRE_HD constexpr C load(uint16_t v) { return bfloat16ToFloat(v); }
#if defined(__CUDA_ARCH__)
  static __device__ __forceinline__ uint16_t store(C v) { return floatToBfloat16Hw(v); }
#else
  static GYRE_HD constexpr uint16_t store(C v) { return floatToBfloat16(v); }
#endif
};

template <class T>
inline constexpr bool kIsInteger = static_cast<T>(3) / static_cast<T>(2) == static_cast<T>(1);
template <class T>
inline constexpr bool kIsSigned = static_cast<T>(-1) < static_cast<T>(0);

// The unsigned type of an integer's width: arithmetic in it wraps by
// definition (no undefined signed overflow, UBSan stays quiet).
template <int kBytes>
struct UnsignedOf;
template <>
struct UnsignedOf<1> {
  using type = uint8_t;
};
template <>
struct UnsignedOf<2> {
  using type = uint16_t;
};
template <>
struct UnsignedOf<4> {
  using type = uint32_t;
};
template <>
struct UnsignedOf<8> {
  using type = uint64_t;
};

// ---- The operations, on compute values ------------------------------------

template <class C>
GYRE_HD constexpr C add(C x, C y) {
  if constexpr (kIsInteger<C>) {
    using U = typename UnsignedOf<sizeof(C)>::type;
    return static_cast<C>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}

template <class C>
GYRE_HD constexpr C mul(C x, C y) {
  if constexpr (kIsInteger<C>) {
    using U = typename UnsignedOf<sizeof(C)>::type;
    // Promoted to int for 8-bit types, where 255 * 255 cannot overflow it.
    return static_cast<C>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  } else {
    return x * y;
  }
}

template <class C>
GYRE_HD constexpr C pickMax(C x, C y) {
  return (!(x >= y) && x == x) ? y : x;
}

template <class C>
GYRE_HD constexpr C pickMin(C x, C y) {
  return (!(x <= y) && x == x) ? y : x;
}

// The operations by number, in kernels::Op's order (Sum, Prod, Max, Min),
// and the copy (a alone, for the average's final divide).
enum : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kCopy = 4 };

template <int kOp, class C>
GYRE_HD constexpr C combine(C x, C y) {
  if constexpr (kOp == kSum) {
    return add(x, y);
  } else if constexpr (kOp == kProd) {
    return mul(x, y);
  } else if constexpr (kOp == kMax) {
    return pickMax(x, y);
  } else {
    return pickMin(x, y);
  }
}

// The average's divide of a finished value r (divisor > 1).
template <class S>
GYRE_HD constexpr typename S::C divide(typename S::C r, uint32_t divisor) {
  using C = typename S::C;
  if constexpr (kIsInteger<C>) {
    // The wide types make every divisor representable and -MIN / d safe.
    if constexpr (kIsSigned<C>) {
      return static_cast<C>(static_cast<int64_t>(r) / static_cast<int64_t>(divisor));
    } else {
      return static_cast<C>(static_cast<uint64_t>(r) / divisor);
    }
  } else {
    // Stored formats narrower than C round first: the CPU divides the stored
    // sum (a no-op for float and double).
    return S::load(S::store(r)) / static_cast<C>(divisor);
  }
}

// One element of a reduction, as every kernel computes it: a op b (a alone
// for kCopy) in the compute type, divided when kDivide (divisor > 1; a divide
// by one would quiet a signaling NaN that max/min must pass through), and
// rounded to the stored type once. A copy alone moves the bits untouched
// (a float16 signaling NaN stays one, as the CPU's copy leaves it).
template <class S, int kOp, bool kDivide>
GYRE_HD constexpr typename S::Elem reduceOne(typename S::Elem a, typename S::Elem b, uint32_t divisor) {
  if constexpr (kOp == kCopy && !kDivide) return a;
  typename S::C r = S::load(a);
  if constexpr (kOp != kCopy) r = combine<kOp>(r, S::load(b));
  if constexpr (kDivide) r = divide<S>(r, divisor);
  return S::store(r);
}

// PreMulSum's scaling of one element by s (the same stored type).
template <class S>
GYRE_HD constexpr typename S::Elem scaleOne(typename S::Elem x, typename S::Elem s) {
  return S::store(mul(S::load(x), S::load(s)));
}

}  // namespace gyre::kernels::arith
