// AVX-512 (F, BW, VL) implementation, plus F16C/FMA which every such CPU has.
// Compiled with those -m flags only here; dispatch.cc selects it only when
// the CPU and OS report avx512f, avx512bw and avx512vl.

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately
// uninitialized register, and then warn about it once inlined (GCC bug
// 105593, fixed in GCC 13). The warning is about the header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#define GYRE_KERNELS_ISA avx512
#include "kernels/cpu/reduce_impl.h"

namespace gyre::kernels::avx512 {
namespace {

// Max/min as a selection, as in reduce_avx2.cc: take b where a is ordered and
// not (a >= b) [max] / not (a <= b) [min].
inline __m512 maxPs(__m512 x, __m512 y) {
  const __mmask16 m = _mm512_cmp_ps_mask(x, y, _CMP_NGE_UQ) & _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
  return _mm512_mask_blend_ps(m, x, y);
}
inline __m512 minPs(__m512 x, __m512 y) {
  const __mmask16 m = _mm512_cmp_ps_mask(x, y, _CMP_NLE_UQ) & _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
  return _mm512_mask_blend_ps(m, x, y);
}

struct F32V {
  using Elem = float;
  using Reg = __m512;
  using Packed = __m512;
  using Div = __m512;
  static constexpr size_t kLanes = 16;
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Packed pack(Reg r) { return r; }
  static void store(float* p, Packed v) { _mm512_storeu_ps(p, v); }
  static Reg add(Reg x, Reg y) { return _mm512_add_ps(x, y); }
  static Reg mul(Reg x, Reg y) { return _mm512_mul_ps(x, y); }
  static Reg max(Reg x, Reg y) { return maxPs(x, y); }
  static Reg min(Reg x, Reg y) { return minPs(x, y); }
  static Div makeDiv(uint32_t d) { return _mm512_set1_ps(static_cast<float>(d)); }
  static Reg div(Reg r, Div d) { return _mm512_div_ps(r, d); }
};

struct F64V {
  using Elem = double;
  using Reg = __m512d;
  using Packed = __m512d;
  using Div = __m512d;
  static constexpr size_t kLanes = 8;
  static Reg load(const double* p) { return _mm512_loadu_pd(p); }
  static Packed pack(Reg r) { return r; }
  static void store(double* p, Packed v) { _mm512_storeu_pd(p, v); }
  static Reg add(Reg x, Reg y) { return _mm512_add_pd(x, y); }
  static Reg mul(Reg x, Reg y) { return _mm512_mul_pd(x, y); }
  static Reg max(Reg x, Reg y) {
    const __mmask8 m = _mm512_cmp_pd_mask(x, y, _CMP_NGE_UQ) & _mm512_cmp_pd_mask(x, x, _CMP_ORD_Q);
    return _mm512_mask_blend_pd(m, x, y);
  }
  static Reg min(Reg x, Reg y) {
    const __mmask8 m = _mm512_cmp_pd_mask(x, y, _CMP_NLE_UQ) & _mm512_cmp_pd_mask(x, x, _CMP_ORD_Q);
    return _mm512_mask_blend_pd(m, x, y);
  }
  static Div makeDiv(uint32_t d) { return _mm512_set1_pd(static_cast<double>(d)); }
  static Reg div(Reg r, Div d) { return _mm512_div_pd(r, d); }
};

// Shared by float16 and bfloat16: sixteen lanes computed in float32.
template <class Conv>
struct Half16V {
  using Elem = uint16_t;
  using Reg = __m512;
  using Packed = __m256i;
  using Div = __m512;
  static constexpr size_t kLanes = 16;
  static Reg load(const uint16_t* p) {
    return Conv::widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Packed pack(Reg r) { return Conv::narrow(r); }
  static void store(uint16_t* p, Packed v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  static Reg add(Reg x, Reg y) { return _mm512_add_ps(x, y); }
  static Reg mul(Reg x, Reg y) { return _mm512_mul_ps(x, y); }
  static Reg max(Reg x, Reg y) { return maxPs(x, y); }
  static Reg min(Reg x, Reg y) { return minPs(x, y); }
  static Div makeDiv(uint32_t d) { return _mm512_set1_ps(static_cast<float>(d)); }
  static Reg div(Reg r, Div d) { return _mm512_div_ps(Conv::widen(Conv::narrow(r)), d); }
};

struct Fp16Conv {
  static __m512 widen(__m256i h) { return _mm512_cvtph_ps(h); }
  static __m256i narrow(__m512 f) {
    return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
};

struct Bf16Conv {
  // Same rounding as half.h's floatToBfloat16; see reduce_avx2.cc for why
  // widening need not quiet NaNs.
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m256i narrow(__m512 f) {
    const __m512i x = _mm512_castps_si512(f);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __m512i quietNan = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
    const __mmask16 isNan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(isNan, rounded, quietNan));
  }
};

template <class T>
struct IntV {
  using Elem = T;
  using Reg = __m512i;
  using Packed = __m512i;
  using Div = uint32_t;
  static constexpr size_t kLanes = 64 / sizeof(T);
  static constexpr bool kSigned = std::is_signed_v<T>;
  static Reg load(const T* p) { return _mm512_loadu_si512(p); }
  static Packed pack(Reg r) { return r; }
  static void store(T* p, Packed v) { _mm512_storeu_si512(p, v); }
  static Reg add(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) return _mm512_add_epi8(x, y);
    if constexpr (sizeof(T) == 4) return _mm512_add_epi32(x, y);
    if constexpr (sizeof(T) == 8) return _mm512_add_epi64(x, y);
  }
  static Reg mul(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) {
      // Even and odd bytes as 16-bit products, keeping each low byte.
      const __m512i even = _mm512_mullo_epi16(x, y);
      const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(x, 8), _mm512_srli_epi16(y, 8));
      return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0xff)),
                             _mm512_slli_epi16(odd, 8));
    }
    if constexpr (sizeof(T) == 4) return _mm512_mullo_epi32(x, y);
    // AVX-512DQ's vpmullq is not in our baseline; this is a short sequence.
    if constexpr (sizeof(T) == 8) return _mm512_mullox_epi64(x, y);
  }
  static Reg max(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) return kSigned ? _mm512_max_epi8(x, y) : _mm512_max_epu8(x, y);
    if constexpr (sizeof(T) == 4) return kSigned ? _mm512_max_epi32(x, y) : _mm512_max_epu32(x, y);
    if constexpr (sizeof(T) == 8) return kSigned ? _mm512_max_epi64(x, y) : _mm512_max_epu64(x, y);
  }
  static Reg min(Reg x, Reg y) {
    if constexpr (sizeof(T) == 1) return kSigned ? _mm512_min_epi8(x, y) : _mm512_min_epu8(x, y);
    if constexpr (sizeof(T) == 4) return kSigned ? _mm512_min_epi32(x, y) : _mm512_min_epu32(x, y);
    if constexpr (sizeof(T) == 8) return kSigned ? _mm512_min_epi64(x, y) : _mm512_min_epu64(x, y);
  }
  static Div makeDiv(uint32_t d) { return d; }
  static Reg div(Reg r, Div d) {
    alignas(64) T lanes[kLanes];
    _mm512_store_si512(lanes, r);
    for (size_t i = 0; i < kLanes; ++i) lanes[i] = divideInt(lanes[i], d);
    return _mm512_load_si512(lanes);
  }
};

// One pass over the source, 256 bytes per trip, into both destinations.
void copy2(void* dst0, void* dst1, const void* src, size_t bytes) {
  auto* d0 = static_cast<unsigned char*>(dst0);
  auto* d1 = static_cast<unsigned char*>(dst1);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    __m512i v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm512_loadu_si512(s + i + 64 * k);
    for (int k = 0; k < 4; ++k) _mm512_storeu_si512(d0 + i + 64 * k, v[k]);
    for (int k = 0; k < 4; ++k) _mm512_storeu_si512(d1 + i + 64 * k, v[k]);
  }
  if (i < bytes) {
    std::memcpy(d0 + i, s + i, bytes - i);
    std::memcpy(d1 + i, s + i, bytes - i);
  }
}

// One destination: an unaligned first and last register, aligned stores in
// between (256 bytes per trip); never `rep movsb` (see the AVX2 version).
void copy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes < 64) {
    std::memcpy(d, s, bytes);
    return;
  }
  const __m512i last = _mm512_loadu_si512(s + bytes - 64);
  _mm512_storeu_si512(d, _mm512_loadu_si512(s));
  size_t i = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
  for (; i + 256 <= bytes; i += 256) {
    __m512i v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm512_loadu_si512(s + i + 64 * k);
    for (int k = 0; k < 4; ++k) _mm512_store_si512(d + i + 64 * k, v[k]);
  }
  for (; i + 64 <= bytes; i += 64) _mm512_store_si512(d + i, _mm512_loadu_si512(s + i));
  _mm512_storeu_si512(d + bytes - 64, last);
}

constexpr detail::KernelTable kTable =
    makeTable<IntV<int8_t>, IntV<uint8_t>, IntV<int32_t>, IntV<uint32_t>, IntV<int64_t>,
              IntV<uint64_t>, Half16V<Fp16Conv>, F32V, F64V, Half16V<Bf16Conv>>(detail::Isa::Avx512,
                                                                                &copy2, &copy);

}  // namespace
}  // namespace gyre::kernels::avx512

namespace gyre::kernels::detail {
const KernelTable& avx512Table() { return avx512::kTable; }
}  // namespace gyre::kernels::detail
