// The codecs with AVX2 and F16C (kernels/cpu/codec_isa.h): the same bytes as
// the scalar code, eight elements at a time. What keeps them equal:
// - the input widens exactly (F16C; bfloat16 by a shift, NaNs quieted as
//   arith.h's bfloat16ToFloat does), and x + residual is one add either way;
// - a range's min and max skip NaNs (min_ps(x, lo) keeps lo when x is NaN,
//   as codec::widen) and settle() makes a zero end +0.0, so the order the
//   lanes are merged in cannot show;
// - the code is round-to-nearest-even of (x - lo) * inv (one subtract, one
//   multiply, no fused operation), clamped as codec::encode clamps it;
// - the mean's sum runs in codec.h's order: lane l of the 256 adds its
//   elements in turn, then the same tree;
// - float16 narrows with F16C's round to nearest even (from the immediate,
//   not MXCSR), which is arith.h's floatToHalf for every float32, NaNs,
//   infinities and subnormals included (checked over all 2^32 inputs), and
//   widens with F16C, which quiets a signaling NaN as halfToFloat does;
//   bfloat16 narrows with floatToBfloat16's integer rounding, lane by lane.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/common/codec.h"
#include "kernels/cpu/codec_isa.h"

namespace gyre::kernels::detail {

namespace {

// Eight elements of the input, widened to float32.
inline __m256 load8(const void* p, codec::Input in, size_t i) {
  if (in == codec::kF32) return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
  if (in == codec::kF16) return _mm256_cvtph_ps(h);
  const __m256 x = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_or_ps(x, _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000))));
}

// While a chunk is encoded from buf (no memory traffic of its own), the
// next chunk's input and residual are fetched: bytes [at, at + 128) of each
// past this chunk's start, for the encode loop's element at (of 32 a turn).
inline void prefetchNext(const void* in, codec::Input type, const float* residual, size_t nextBegin, size_t at,
                         size_t n) {
  if (nextBegin + at >= n) return;
  const size_t esz = type == codec::kF32 ? 4 : 2;
  const char* p = static_cast<const char*>(in) + (nextBegin + at) * esz;
  _mm_prefetch(p, _MM_HINT_T0);
  if (esz == 4) _mm_prefetch(p + 64, _MM_HINT_T0);
  if (residual) {
    _mm_prefetch(reinterpret_cast<const char*>(residual + nextBegin + at), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(residual + nextBegin + at) + 64, _MM_HINT_T0);
  }
}

// The chunk's values (input plus residual) into buf[0, len), each also
// handed to vec(i, eight values at i) or, past the last whole eight,
// one(i, value): the chunk's first pass (its range, or its mean) rides on
// the load instead of reading buf again.
template <class Vec, class One>
void valuesOf(const void* in, codec::Input type, const float* residual, size_t begin, size_t len, float* buf,
              Vec&& vec, One&& one) {
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    __m256 v = load8(in, type, begin + i);
    if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + begin + i));
    _mm256_store_ps(buf + i, v);
    vec(i, v);
  }
  for (; i < len; ++i) {
    const float x = codec::load(in, type, begin + i);
    buf[i] = residual ? x + residual[begin + i] : x;
    one(i, buf[i]);
  }
}

void quantizeMinMaxAvx2(codec::Input type, const void* in, size_t n, void* message, float* residual) {
  alignas(32) float buf[codec::kChunk];
  auto* ranges = static_cast<codec::Range*>(message);
  auto* codes = static_cast<uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, len = begin + codec::kChunk < n ? codec::kChunk : n - begin;
    __m256 lo = _mm256_set1_ps(codec::kInf), hi = _mm256_set1_ps(-codec::kInf);
    codec::Range r = codec::emptyRange();
    valuesOf(
        in, type, residual, begin, len, buf,
        [&](size_t, __m256 v) {
          lo = _mm256_min_ps(v, lo);
          hi = _mm256_max_ps(v, hi);
        },
        [&](size_t, float x) { codec::widen(r, x); });
    alignas(32) float los[8], his[8];
    _mm256_store_ps(los, lo);
    _mm256_store_ps(his, hi);
    for (int k = 0; k < 8; ++k) codec::merge(r, codec::Range{los[k], his[k]});
    r = codec::settle(r);
    size_t i = 0;
    std::memcpy(&ranges[c], &r, sizeof(r));
    const float inv = codec::inverseStep(r), stepSize = codec::step(r);
    const __m256 vlo = _mm256_set1_ps(r.lo), vinv = _mm256_set1_ps(inv), vstep = _mm256_set1_ps(stepSize);
    uint8_t* out = codes + begin;
    // One code per element: 0 unless (x - lo) * inv > 0 (NaN is not),
    // else that rounded to nearest even, at most 255.
    auto codeOf = [&](__m256 v) {
      const __m256 q = _mm256_mul_ps(_mm256_sub_ps(v, vlo), vinv);
      const __m256 rounded = _mm256_min_ps(_mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), top);
      return _mm256_and_ps(rounded, _mm256_cmp_ps(q, zero, _CMP_GT_OQ));
    };
    auto keepResidual = [&](size_t at, __m256 v, __m256 code) {
      if (residual)
        _mm256_storeu_ps(residual + begin + at, _mm256_sub_ps(v, _mm256_add_ps(vlo, _mm256_mul_ps(code, vstep))));
    };
    for (; i + 32 <= len; i += 32) {
      prefetchNext(in, type, residual, begin + codec::kChunk, i, n);
      __m256i words[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_load_ps(buf + i + 8 * k);
        const __m256 code = codeOf(v);
        keepResidual(i + 8 * k, v, code);
        words[k] = _mm256_cvttps_epi32(code);
      }
      const __m256i ab = _mm256_packus_epi32(words[0], words[1]), cd = _mm256_packus_epi32(words[2], words[3]);
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
    }
    for (; i < len; ++i) {
      out[i] = codec::encode(buf[i], r, inv);
      if (residual) residual[begin + i] = buf[i] - codec::decode(out[i], r, stepSize);
    }
  }
}

void dequantizeMinMaxAvx2(const void* message, size_t n, float* out, bool accumulate) {
  const auto* codes = static_cast<const uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    codec::Range r;
    std::memcpy(&r, static_cast<const codec::Range*>(message) + c, sizeof(r));
    const float stepSize = codec::step(r);
    const __m256 vlo = _mm256_set1_ps(r.lo), vstep = _mm256_set1_ps(stepSize);
    const size_t begin = c * codec::kChunk, end = begin + codec::kChunk < n ? begin + codec::kChunk : n;
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
      const __m256i c32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
      const __m256 d = _mm256_add_ps(vlo, _mm256_mul_ps(_mm256_cvtepi32_ps(c32), vstep));
      _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), d) : d);
    }
    for (; i < end; ++i) {
      const float d = codec::decode(codes[i], r, stepSize);
      out[i] = accumulate ? out[i] + d : d;
    }
  }
}

void packSignsAvx2(codec::Input type, const void* in, size_t n, void* message, float* residual) {
  alignas(32) float buf[codec::kChunk];
  alignas(32) float lane[codec::kLanes];
  auto* scales = static_cast<float*>(message);
  auto* words = reinterpret_cast<uint32_t*>(static_cast<unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, len = begin + codec::kChunk < n ? codec::kChunk : n - begin;
    // The mean of |v|: lane l adds v[l], v[l + 256], ... in turn (element
    // i is lane i % 256's, and comes after the lane's earlier ones).
    for (uint32_t l = 0; l < codec::kLanes; l += 8) _mm256_store_ps(lane + l, zero);
    valuesOf(
        in, type, residual, begin, len, buf,
        [&](size_t at, __m256 x) {
          // |x| as codec::magnitude: -x below zero, x otherwise (-0.0
          // too), and +0.0 for NaN.
          __m256 m = _mm256_blendv_ps(x, _mm256_xor_ps(x, sign), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
          m = _mm256_andnot_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), m);
          float* l = lane + at % codec::kLanes;
          _mm256_store_ps(l, _mm256_add_ps(_mm256_load_ps(l), m));
        },
        [&](size_t at, float x) { lane[at % codec::kLanes] += codec::magnitude(x); });
    for (uint32_t s = codec::kLanes / 2; s >= 1; s /= 2)
      for (uint32_t i = 0; i < s; ++i) lane[i] += lane[i + s];
    const float scale = codec::meanOf(lane[0], static_cast<uint32_t>(len));
    scales[c] = scale;
    const __m256 plus = _mm256_set1_ps(scale), minus = _mm256_set1_ps(-scale);
    uint32_t* out = words + begin / 32;
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
      uint32_t negative = 0;
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_load_ps(buf + i + 8 * k);
        const __m256 neg = _mm256_cmp_ps(v, zero, _CMP_LT_OQ);
        negative |= static_cast<uint32_t>(_mm256_movemask_ps(neg)) << (8 * k);
        if (residual)
          _mm256_storeu_ps(residual + begin + i + 8 * k, _mm256_sub_ps(v, _mm256_blendv_ps(plus, minus, neg)));
      }
      out[i / 32] = ~negative;
    }
    if (i < len) {  // the last, partial word: bits past the end stay 0
      uint32_t bits = 0;
      for (size_t k = i; k < len; ++k) {
        const uint32_t b = codec::signBit(buf[k]);
        bits |= b << (k % 32);
        if (residual) residual[begin + k] = buf[k] - codec::unsign(b, scale);
      }
      out[i / 32] = bits;
    }
  }
}

void unpackSignsAvx2(const void* message, size_t n, float* out, bool accumulate) {
  const auto* scales = static_cast<const float*>(message);
  const auto* words =
      reinterpret_cast<const uint32_t*>(static_cast<const unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  const __m256i bitOf = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, end = begin + codec::kChunk < n ? begin + codec::kChunk : n;
    const __m256 plus = _mm256_set1_ps(scales[c]), minus = _mm256_set1_ps(-scales[c]);
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
      const __m256i byte = _mm256_set1_epi32(static_cast<int>((words[i / 32] >> (i % 32)) & 0xffu));
      const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(byte, bitOf), bitOf);
      const __m256 d = _mm256_blendv_ps(minus, plus, _mm256_castsi256_ps(set));
      _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), d) : d);
    }
    for (; i < end; ++i) {
      const float d = codec::unsign((words[i / 32] >> (i % 32)) & 1u, scales[c]);
      out[i] = accumulate ? out[i] + d : d;
    }
  }
}

// ---- The plain wire formats: float32, float16, bfloat16 -------------------

// floatToBfloat16 per 32-bit lane, the result in the low 16 bits (the
// reduction kernels' Bf16x16V::round).
inline __m256i roundBf16(__m256 f) {
  const __m256i x = _mm256_castps_si256(f);
  const __m256i hi = _mm256_srli_epi32(x, 16);
  const __m256i bias = _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
  const __m256i quietNan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
  const __m256i isNan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quietNan, isNan);
}
// Rounded lanes hold at most 0xffff, so the saturating pack is exact. It
// works within 128-bit halves (a0-3 b0-3 | a4-7 b4-7); the permute restores
// the order. Sixteen at a time: one shuffle pair per sixteen, not per eight.
inline __m256i packBf16(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
}
inline __m128i packBf16(__m256i a) {
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(a, a), 0x08));
}
// A rounded lane as the float32 it stands for (NaNs not quieted: callers
// only ask whether it is finite, or store it).
inline __m256 bf16Value(__m256i rounded) { return _mm256_castsi256_ps(_mm256_slli_epi32(rounded, 16)); }

inline __m128i narrowHalf(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

template <codec::Input kWire>
inline uint16_t narrowOne(float v) {
  if constexpr (kWire == codec::kF16) return arith::floatToHalf(v);
  return arith::floatToBfloat16(v);
}

template <codec::Input kWire, codec::Input kType>
void encodeFloatsAs(const void* in, size_t n, void* message, float* residual) {
  // Eight elements of v, input plus residual.
  auto value8 = [&](size_t at) {
    const __m256 x = load8(in, kType, at);
    return residual ? _mm256_add_ps(x, _mm256_loadu_ps(residual + at)) : x;
  };
  size_t i = 0;
  if constexpr (kWire == codec::kF32) {
    auto* out = static_cast<float*>(message);
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(out + i, value8(i));
      if (residual) _mm256_storeu_ps(residual + i, _mm256_setzero_ps());
    }
    for (; i < n; ++i) {
      const float x = codec::load(in, kType, i);
      out[i] = residual ? x + residual[i] : x;
      if (residual) residual[i] = 0.0f;
    }
  } else {
    auto* out = static_cast<uint16_t*>(message);
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(codec::kInf);
    // The new residual of eight elements: v - d where d, the value stored,
    // is finite, else 0.
    auto keep8 = [&](size_t at, __m256 v, __m256 d) {
      const __m256 finite = _mm256_cmp_ps(_mm256_and_ps(d, magnitude), inf, _CMP_LT_OQ);
      _mm256_storeu_ps(residual + at, _mm256_and_ps(_mm256_sub_ps(v, d), finite));
    };
    if constexpr (kWire == codec::kBf16) {
      for (; i + 16 <= n; i += 16) {
        const __m256 v0 = value8(i), v1 = value8(i + 8);
        const __m256i r0 = roundBf16(v0), r1 = roundBf16(v1);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packBf16(r0, r1));
        if (residual) {
          keep8(i, v0, bf16Value(r0));
          keep8(i + 8, v1, bf16Value(r1));
        }
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 v = value8(i);
      if constexpr (kWire == codec::kF16) {
        const __m128i h = narrowHalf(v);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
        if (residual) keep8(i, v, _mm256_cvtph_ps(h));
      } else {
        const __m256i r = roundBf16(v);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packBf16(r));
        if (residual) keep8(i, v, bf16Value(r));
      }
    }
    for (; i < n; ++i) {
      const float x = codec::load(in, kType, i);
      const float v = residual ? x + residual[i] : x;
      out[i] = narrowOne<kWire>(v);
      if (residual) {
        const float d = codec::load(out, kWire, i);
        residual[i] = d < codec::kInf && d > -codec::kInf ? v - d : 0.0f;
      }
    }
  }
}

template <codec::Input kWire>
void encodeFloatsFrom(codec::Input type, const void* in, size_t n, void* message, float* residual) {
  switch (type) {
    case codec::kF32: return encodeFloatsAs<kWire, codec::kF32>(in, n, message, residual);
    case codec::kF16: return encodeFloatsAs<kWire, codec::kF16>(in, n, message, residual);
    case codec::kBf16: return encodeFloatsAs<kWire, codec::kBf16>(in, n, message, residual);
  }
}

void encodeFloatsAvx2(codec::Input wire, codec::Input type, const void* in, size_t n, void* message,
                      float* residual) {
  switch (wire) {
    case codec::kF32: return encodeFloatsFrom<codec::kF32>(type, in, n, message, residual);
    case codec::kF16: return encodeFloatsFrom<codec::kF16>(type, in, n, message, residual);
    case codec::kBf16: return encodeFloatsFrom<codec::kBf16>(type, in, n, message, residual);
  }
}

template <codec::Input kType>
void widenFrom(const void* in, size_t n, float* out, bool accumulate) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = load8(in, kType, i);
    _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), d) : d);
  }
  for (; i < n; ++i) {
    const float d = codec::load(in, kType, i);
    out[i] = accumulate ? out[i] + d : d;
  }
}

void widenAvx2(codec::Input type, const void* in, size_t n, float* out, bool accumulate) {
  switch (type) {
    case codec::kF32: return widenFrom<codec::kF32>(in, n, out, accumulate);
    case codec::kF16: return widenFrom<codec::kF16>(in, n, out, accumulate);
    case codec::kBf16: return widenFrom<codec::kBf16>(in, n, out, accumulate);
  }
}

void narrowAvx2(codec::Input type, const float* in, size_t n, void* out) {
  auto* o = static_cast<uint16_t*>(out);
  size_t i = 0;
  if (type == codec::kF16) {
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), narrowHalf(_mm256_loadu_ps(in + i)));
    for (; i < n; ++i) o[i] = narrowOne<codec::kF16>(in[i]);
    return;
  }
  for (; i + 16 <= n; i += 16) {
    const __m256i r0 = roundBf16(_mm256_loadu_ps(in + i)), r1 = roundBf16(_mm256_loadu_ps(in + i + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), packBf16(r0, r1));
  }
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), packBf16(roundBf16(_mm256_loadu_ps(in + i))));
  for (; i < n; ++i) o[i] = narrowOne<codec::kBf16>(in[i]);
}

constexpr CodecTable kAvx2Codecs{Isa::Avx2,       quantizeMinMaxAvx2, dequantizeMinMaxAvx2,
                                  packSignsAvx2,   unpackSignsAvx2,    encodeFloatsAvx2,
                                  widenAvx2,       narrowAvx2};

}  // namespace

const CodecTable& avx2Codecs() { return kAvx2Codecs; }

}  // namespace gyre::kernels::detail
