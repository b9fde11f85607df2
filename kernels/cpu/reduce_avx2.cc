// AVX2 + F16C + FMA implementation (compiled with those -m flags only here;
// dispatch.cc selects it only when the CPU reports all three).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#define GYRE_KERNELS_ISA avx2
#include "kernels/cpu/reduce_impl.h"

namespace gyre::kernels::avx2 {
namespace {

// Lane-wise max/min as a selection (see reduce.h): take b where a is not NaN
// and not (a >= b) [max] / not (a <= b) [min]. The unordered predicates make a
// NaN b win over a number a; the ordered check keeps a NaN a.
inline __m256 selectPs(__m256 x, __m256 y, __m256 notKeepA) {
  return _mm256_blendv_ps(x, y, _mm256_and_ps(notKeepA, _mm256_cmp_ps(x, x, _CMP_ORD_Q)));
}
inline __m256 maxPs(__m256 x, __m256 y) { return selectPs(x, y, _mm256_cmp_ps(x, y, _CMP_NGE_UQ)); }
inline __m256 minPs(__m256 x, __m256 y) { return selectPs(x, y, _mm256_cmp_ps(x, y, _CMP_NLE_UQ)); }

struct F32V {
  using Elem = float;
  using Reg = __m256;
  using Packed = __m256;
  using Div = __m256;
  static constexpr size_t kLanes = 8;
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Packed pack(Reg r) { return r; }
  static void store(float* p, Packed v) { _mm256_storeu_ps(p, v); }
  static Reg add(Reg x, Reg y) { return _mm256_add_ps(x, y); }
  static Reg mul(Reg x, Reg y) { return _mm256_mul_ps(x, y); }
  static Reg max(Reg x, Reg y) { return maxPs(x, y); }
  static Reg min(Reg x, Reg y) { return minPs(x, y); }
  static Div makeDiv(uint32_t d) { return _mm256_set1_ps(static_cast<float>(d)); }
  static Reg div(Reg r, Div d) { return _mm256_div_ps(r, d); }
};

struct F64V {
  using Elem = double;
  using Reg = __m256d;
  using Packed = __m256d;
  using Div = __m256d;
  static constexpr size_t kLanes = 4;
  static Reg load(const double* p) { return _mm256_loadu_pd(p); }
  static Packed pack(Reg r) { return r; }
  static void store(double* p, Packed v) { _mm256_storeu_pd(p, v); }
  static Reg add(Reg x, Reg y) { return _mm256_add_pd(x, y); }
  static Reg mul(Reg x, Reg y) { return _mm256_mul_pd(x, y); }
  static Reg select(Reg x, Reg y, Reg notKeepA) {
    return _mm256_blendv_pd(x, y, _mm256_and_pd(notKeepA, _mm256_cmp_pd(x, x, _CMP_ORD_Q)));
  }
  static Reg max(Reg x, Reg y) { return select(x, y, _mm256_cmp_pd(x, y, _CMP_NGE_UQ)); }
  static Reg min(Reg x, Reg y) { return select(x, y, _mm256_cmp_pd(x, y, _CMP_NLE_UQ)); }
  static Div makeDiv(uint32_t d) { return _mm256_set1_pd(static_cast<double>(d)); }
  static Reg div(Reg r, Div d) { return _mm256_div_pd(r, d); }
};

// Eight float16 lanes computed in float32. F16C rounds to nearest even from
// the immediate, not from MXCSR, and quiets NaNs exactly as half.h does.
struct F16V {
  using Elem = uint16_t;
  using Reg = __m256;
  using Packed = __m128i;
  using Div = __m256;
  static constexpr size_t kLanes = 8;
  static Reg load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Packed pack(Reg r) {
    return _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static void store(uint16_t* p, Packed v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
  static Reg add(Reg x, Reg y) { return _mm256_add_ps(x, y); }
  static Reg mul(Reg x, Reg y) { return _mm256_mul_ps(x, y); }
  static Reg max(Reg x, Reg y) { return maxPs(x, y); }
  static Reg min(Reg x, Reg y) { return minPs(x, y); }
  static Div makeDiv(uint32_t d) { return _mm256_set1_ps(static_cast<float>(d)); }
  static Reg div(Reg r, Div d) { return _mm256_div_ps(_mm256_cvtph_ps(pack(r)), d); }
};

// bfloat16 is the top half of a float32, so widening is a shift; sixteen
// lanes are handled as two float32 registers. Interleaving with zeros widens
// without crossing 128-bit halves (lo gets elements 0-3 and 8-11, hi 4-7 and
// 12-15), and packus_epi32 restores exactly that order, so unlike
// cvtepu16_epi32 + packus this needs no lane-crossing permute.
// Widening leaves signaling NaNs signaling (half.h quiets them), which no
// result can show: every path ends in round(), which quiets.
struct Bf16x16V {
  using Elem = uint16_t;
  struct Reg {
    __m256 lo, hi;
  };
  using Packed = __m256i;
  using Div = __m256;
  static constexpr size_t kLanes = 16;
  static Reg widen(__m256i v) {
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v))};
  }
  // floatToBfloat16 per 32-bit lane, the result in the low 16 bits.
  static __m256i round(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i bias =
        _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i quietNan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i isNan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, quietNan, isNan);
  }
  static Reg load(const uint16_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // Values are <= 0xffff, so the saturating pack is exact.
  static Packed pack(Reg r) { return _mm256_packus_epi32(round(r.lo), round(r.hi)); }
  static void store(uint16_t* p, Packed v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  static Reg add(Reg x, Reg y) { return {_mm256_add_ps(x.lo, y.lo), _mm256_add_ps(x.hi, y.hi)}; }
  static Reg mul(Reg x, Reg y) { return {_mm256_mul_ps(x.lo, y.lo), _mm256_mul_ps(x.hi, y.hi)}; }
  static Reg max(Reg x, Reg y) { return {maxPs(x.lo, y.lo), maxPs(x.hi, y.hi)}; }
  static Reg min(Reg x, Reg y) { return {minPs(x.lo, y.lo), minPs(x.hi, y.hi)}; }
  static Div makeDiv(uint32_t d) { return _mm256_set1_ps(static_cast<float>(d)); }
  static Reg div(Reg r, Div d) {
    const Reg stored = widen(pack(r));
    return {_mm256_div_ps(stored.lo, d), _mm256_div_ps(stored.hi, d)};
  }
};

template <class T>
struct IntV {
  using Elem = T;
  using Reg = __m256i;
  using Packed = __m256i;
  using Div = uint32_t;
  static constexpr size_t kLanes = 32 / sizeof(T);
  static constexpr bool kSigned = std::is_signed_v<T>;
  static Reg load(const T* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static Packed pack(Reg r) { return r; }
  static void store(T* p, Packed v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static Reg add(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) return _mm256_add_epi8(x, y);
    if constexpr (sizeof(T) == 4) return _mm256_add_epi32(x, y);
    if constexpr (sizeof(T) == 8) return _mm256_add_epi64(x, y);
  }
  static Reg mul(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) {
      // No byte multiply: multiply the even and odd bytes as 16-bit lanes and
      // keep each product's low byte.
      const __m256i even = _mm256_mullo_epi16(x, y);
      const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(x, 8), _mm256_srli_epi16(y, 8));
      return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)),
                             _mm256_slli_epi16(odd, 8));
    }
    if constexpr (sizeof(T) == 4) return _mm256_mullo_epi32(x, y);
    if constexpr (sizeof(T) == 8) {
      // Low 64 bits of the product: lo*lo + ((lo*hi + hi*lo) << 32).
      const __m256i lo = _mm256_mul_epu32(x, y);
      const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), y),
                                             _mm256_mul_epu32(x, _mm256_srli_epi64(y, 32)));
      return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
    }
  }
  // 64-bit lanes have only a signed greater-than; flipping the sign bit turns
  // unsigned order into signed order.
  static __m256i greater64(__m256i x, __m256i y) {
    if constexpr (!kSigned) {
      const __m256i bias = _mm256_set1_epi64x(INT64_MIN);
      x = _mm256_xor_si256(x, bias);
      y = _mm256_xor_si256(y, bias);
    }
    return _mm256_cmpgt_epi64(x, y);
  }
  static Reg max(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) return kSigned ? _mm256_max_epi8(x, y) : _mm256_max_epu8(x, y);
    if constexpr (sizeof(T) == 4) return kSigned ? _mm256_max_epi32(x, y) : _mm256_max_epu32(x, y);
    if constexpr (sizeof(T) == 8) return _mm256_blendv_epi8(x, y, greater64(y, x));
  }
  static Reg min(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) return kSigned ? _mm256_min_epi8(x, y) : _mm256_min_epu8(x, y);
    if constexpr (sizeof(T) == 4) return kSigned ? _mm256_min_epi32(x, y) : _mm256_min_epu32(x, y);
    if constexpr (sizeof(T) == 8) return _mm256_blendv_epi8(x, y, greater64(x, y));
  }
  static Div makeDiv(uint32_t d) { return d; }
  // No vector integer divide; the average of integers is rare enough that a
  // scalar divide per lane is fine.
  static Reg div(Reg r, Div d) {
    alignas(32) T lanes[kLanes];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), r);
    for (size_t i = 0; i < kLanes; ++i) lanes[i] = divideInt(lanes[i], d);
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  }
};

// One pass over the source, 128 bytes per trip, into both destinations.
void copy2(void* dst0, void* dst1, const void* src, size_t bytes) {
  auto* d0 = static_cast<unsigned char*>(dst0);
  auto* d1 = static_cast<unsigned char*>(dst1);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    __m256i v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32 * k));
    for (int k = 0; k < 4; ++k)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d0 + i + 32 * k), v[k]);
    for (int k = 0; k < 4; ++k)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d1 + i + 32 * k), v[k]);
  }
  if (i < bytes) {
    std::memcpy(d0 + i, s + i, bytes - i);
    std::memcpy(d1 + i, s + i, bytes - i);
  }
}

// One destination: an unaligned first and last register, aligned stores in
// between (128 bytes per trip). Loads and stores of registers, never
// `rep movsb`, so no distance between dst and src slows it down.
void copy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes < 32) {
    std::memcpy(d, s, bytes);
    return;
  }
  const __m256i last = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + bytes - 32));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  size_t i = (32 - (reinterpret_cast<uintptr_t>(d) & 31)) & 31;
  for (; i + 128 <= bytes; i += 128) {
    __m256i v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32 * k));
    for (int k = 0; k < 4; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(d + i + 32 * k), v[k]);
  }
  for (; i + 32 <= bytes; i += 32)
    _mm256_store_si256(reinterpret_cast<__m256i*>(d + i),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + bytes - 32), last);
}

constexpr detail::KernelTable kTable =
    makeTable<IntV<int8_t>, IntV<uint8_t>, IntV<int32_t>, IntV<uint32_t>, IntV<int64_t>,
              IntV<uint64_t>, F16V, F32V, F64V, Bf16x16V>(detail::Isa::Avx2, &copy2, &copy);

}  // namespace
}  // namespace gyre::kernels::avx2

namespace gyre::kernels::detail {
const KernelTable& avx2Table() { return avx2::kTable; }
}  // namespace gyre::kernels::detail
