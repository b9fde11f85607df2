// The codecs with AVX-512 (F, BW, VL) and F16C (kernels/cpu/codec_isa.h):
// the same bytes as the scalar code, by codec_avx2.cc's rules (its header
// says what keeps them equal), sixteen elements at a time. Two things AVX2
// cannot do make the encoders cheaper here:
// - the 1-bit codec's 256 partial sums of |x| fit in sixteen of the 32
//   registers, so the pass that fetches a chunk adds into them instead of
//   loading and storing a table of lanes for every vector;
// - compares give bit masks: sign bits are two masks side by side, and an
//   unpacked word's sixteen bits select +scale or -scale directly.
// Only AVX-512 F, BW and VL are used (not DQ: bitwise float operations go
// through integer casts), the extensions dispatch.cc checks for.

// GCC 12's AVX-512 intrinsics start from a deliberately uninitialized
// register and warn about it once inlined (reduce_avx512.cc says more).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/common/codec.h"
#include "kernels/cpu/codec_isa.h"

namespace gyre::kernels::detail {

namespace {

constexpr size_t kVec = 16;  // float32 lanes of a register

inline __m512 asFloats(__m512i x) { return _mm512_castsi512_ps(x); }
inline __m512i asInts(__m512 x) { return _mm512_castps_si512(x); }
inline __m512 absOf(__m512 x) { return asFloats(_mm512_and_epi32(asInts(x), _mm512_set1_epi32(0x7fffffff))); }

// Sixteen elements of the input, widened to float32 (bfloat16's NaNs
// quieted as arith.h's bfloat16ToFloat does).
inline __m512 load16(const void* p, codec::Input in, size_t i) {
  if (in == codec::kF32) return _mm512_loadu_ps(static_cast<const float*>(p) + i);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i));
  if (in == codec::kF16) return _mm512_cvtph_ps(h);
  const __m512i x = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(asFloats(x), asFloats(x), _CMP_UNORD_Q);
  return asFloats(_mm512_mask_or_epi32(x, nan, x, _mm512_set1_epi32(0x00400000)));
}

// Sixteen elements of v = input + residual (or the input alone).
inline __m512 value16(const void* in, codec::Input type, const float* residual, size_t at) {
  const __m512 x = load16(in, type, at);
  return residual ? _mm512_add_ps(x, _mm512_loadu_ps(residual + at)) : x;
}

// While a chunk is encoded from its buffer in L1, the next chunk's input
// and residual for elements [at, at + 64) are fetched (the encode loops
// take 64 a turn), so the memory does not idle during the second pass.
inline void prefetchNext(const void* in, codec::Input type, const float* residual, size_t nextBegin, size_t at,
                         size_t n) {
  if (nextBegin + at >= n) return;
  const size_t esz = type == codec::kF32 ? 4 : 2;
  const char* p = static_cast<const char*>(in) + (nextBegin + at) * esz;
  for (size_t b = 0; b < 64 * esz; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
  if (residual)
    for (size_t b = 0; b < 64 * sizeof(float); b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(residual + nextBegin + at) + b, _MM_HINT_T0);
}

// ---- int8 min-max -----------------------------------------------------------

void quantizeMinMaxAvx512(codec::Input type, const void* in, size_t n, void* message, float* residual) {
  alignas(64) float buf[codec::kChunk];
  auto* ranges = static_cast<codec::Range*>(message);
  auto* codes = static_cast<uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.0f);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, len = begin + codec::kChunk < n ? codec::kChunk : n - begin;
    // First pass: the values into buf, their range riding on the load.
    // min_ps(v, lo) keeps lo where v is NaN, as codec::widen passes it over.
    __m512 lo = _mm512_set1_ps(codec::kInf), hi = _mm512_set1_ps(-codec::kInf);
    codec::Range r = codec::emptyRange();
    size_t i = 0;
    for (; i + kVec <= len; i += kVec) {
      const __m512 v = value16(in, type, residual, begin + i);
      _mm512_store_ps(buf + i, v);
      lo = _mm512_min_ps(v, lo);
      hi = _mm512_max_ps(v, hi);
    }
    for (; i < len; ++i) {
      const float x = codec::load(in, type, begin + i);
      buf[i] = residual ? x + residual[begin + i] : x;
      codec::widen(r, buf[i]);
    }
    alignas(64) float los[kVec], his[kVec];
    _mm512_store_ps(los, lo);
    _mm512_store_ps(his, hi);
    for (size_t k = 0; k < kVec; ++k) codec::merge(r, codec::Range{los[k], his[k]});
    r = codec::settle(r);  // (so the order lanes merged in cannot show)
    std::memcpy(&ranges[c], &r, sizeof(r));
    const float inv = codec::inverseStep(r), stepSize = codec::step(r);
    const __m512 vlo = _mm512_set1_ps(r.lo), vinv = _mm512_set1_ps(inv), vstep = _mm512_set1_ps(stepSize);
    uint8_t* out = codes + begin;
    // Second pass, from buf: a code per element, 0 unless (x - lo) * inv > 0
    // (NaN is not), else that rounded to nearest even, at most 255; the new
    // residual x - (lo + code * step), multiply and add apart as the scalar
    // code rounds them.
    i = 0;
    for (; i + 4 * kVec <= len; i += 4 * kVec) {
      prefetchNext(in, type, residual, begin + codec::kChunk, i, n);
      for (size_t k = 0; k < 4; ++k) {
        const __m512 v = _mm512_load_ps(buf + i + kVec * k);
        const __m512 q = _mm512_mul_ps(_mm512_sub_ps(v, vlo), vinv);
        const __m512 rounded =
            _mm512_min_ps(_mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), top);
        const __m512 code = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(q, zero, _CMP_GT_OQ), rounded);
        if (residual)
          _mm512_storeu_ps(residual + begin + i + kVec * k,
                           _mm512_sub_ps(v, _mm512_add_ps(vlo, _mm512_mul_ps(code, vstep))));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + kVec * k),
                         _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(code)));
      }
    }
    for (; i < len; ++i) {
      out[i] = codec::encode(buf[i], r, inv);
      if (residual) residual[begin + i] = buf[i] - codec::decode(out[i], r, stepSize);
    }
  }
}

void dequantizeMinMaxAvx512(const void* message, size_t n, float* out, bool accumulate) {
  const auto* codes = static_cast<const uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    codec::Range r;
    std::memcpy(&r, static_cast<const codec::Range*>(message) + c, sizeof(r));
    const float stepSize = codec::step(r);
    const __m512 vlo = _mm512_set1_ps(r.lo), vstep = _mm512_set1_ps(stepSize);
    const size_t begin = c * codec::kChunk, end = begin + codec::kChunk < n ? begin + codec::kChunk : n;
    size_t i = begin;
    for (; i + kVec <= end; i += kVec) {
      const __m512i c32 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
      const __m512 d = _mm512_add_ps(vlo, _mm512_mul_ps(_mm512_cvtepi32_ps(c32), vstep));
      _mm512_storeu_ps(out + i, accumulate ? _mm512_add_ps(_mm512_loadu_ps(out + i), d) : d);
    }
    for (; i < end; ++i) {
      const float d = codec::decode(codes[i], r, stepSize);
      out[i] = accumulate ? out[i] + d : d;
    }
  }
}

// ---- 1-bit sign -------------------------------------------------------------

// |x| as codec::magnitude: -x below zero, x otherwise (-0.0 stays -0.0),
// and +0.0 for NaN.
inline __m512 magnitude16(__m512 x) {
  const __m512 m = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), absOf(x));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), m);
}

// The first pass of a chunk for the 1-bit codec: its values into buf, and
// the sum of their |v| in codec.h's order (lane l adds v[l], v[l + 256],
// ... in turn, then the tree). Whole blocks of 256 keep the lanes in
// registers; a short last chunk goes on in memory.
float magnitudeSum(const void* in, codec::Input type, const float* residual, size_t begin, size_t len,
                   float* buf) {
  constexpr size_t kRegs = codec::kLanes / kVec;
  static_assert(kRegs == 16);
  __m512 acc[kRegs];
  for (auto& a : acc) a = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + codec::kLanes <= len; i += codec::kLanes) {
#pragma GCC unroll 16
    for (size_t k = 0; k < kRegs; ++k) {
      const __m512 v = value16(in, type, residual, begin + i + kVec * k);
      _mm512_store_ps(buf + i + kVec * k, v);
      acc[k] = _mm512_add_ps(acc[k], magnitude16(v));
    }
  }
  if (i < len) {
    alignas(64) float lane[codec::kLanes];
    for (size_t k = 0; k < kRegs; ++k) _mm512_store_ps(lane + kVec * k, acc[k]);
    for (; i + kVec <= len; i += kVec) {
      const __m512 v = value16(in, type, residual, begin + i);
      _mm512_store_ps(buf + i, v);
      float* l = lane + i % codec::kLanes;
      _mm512_store_ps(l, _mm512_add_ps(_mm512_load_ps(l), magnitude16(v)));
    }
    for (; i < len; ++i) {
      const float x = codec::load(in, type, begin + i);
      buf[i] = residual ? x + residual[begin + i] : x;
      lane[i % codec::kLanes] += codec::magnitude(buf[i]);
    }
    for (size_t k = 0; k < kRegs; ++k) acc[k] = _mm512_load_ps(lane + kVec * k);
  }
  // The tree: partial[i] += partial[i + s] for s = 128, 64, 32, 16 a
  // register at a time, then within the first register.
  for (size_t s = kRegs / 2; s >= 1; s /= 2)
    for (size_t k = 0; k < s; ++k) acc[k] = _mm512_add_ps(acc[k], acc[k + s]);
  alignas(64) float last[kVec];
  _mm512_store_ps(last, acc[0]);
  for (size_t s = kVec / 2; s >= 1; s /= 2)
    for (size_t k = 0; k < s; ++k) last[k] += last[k + s];
  return last[0];
}

void packSignsAvx512(codec::Input type, const void* in, size_t n, void* message, float* residual) {
  alignas(64) float buf[codec::kChunk];
  auto* scales = static_cast<float*>(message);
  auto* words = reinterpret_cast<uint32_t*>(static_cast<unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  const __m512 zero = _mm512_setzero_ps();
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, len = begin + codec::kChunk < n ? codec::kChunk : n - begin;
    const float scale = codec::meanOf(magnitudeSum(in, type, residual, begin, len, buf), static_cast<uint32_t>(len));
    scales[c] = scale;
    const __m512 plus = _mm512_set1_ps(scale), minus = _mm512_set1_ps(-scale);
    uint32_t* out = words + begin / 32;
    // A word's bit is 1 where the value is not negative: the complement of
    // two compare masks. The residual: v - (+scale or -scale).
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
      const __m512 v0 = _mm512_load_ps(buf + i), v1 = _mm512_load_ps(buf + i + kVec);
      const __mmask16 n0 = _mm512_cmp_ps_mask(v0, zero, _CMP_LT_OQ), n1 = _mm512_cmp_ps_mask(v1, zero, _CMP_LT_OQ);
      out[i / 32] = ~(static_cast<uint32_t>(n0) | static_cast<uint32_t>(n1) << 16);
      if (residual) {
        _mm512_storeu_ps(residual + begin + i, _mm512_sub_ps(v0, _mm512_mask_blend_ps(n0, plus, minus)));
        _mm512_storeu_ps(residual + begin + i + kVec, _mm512_sub_ps(v1, _mm512_mask_blend_ps(n1, plus, minus)));
      }
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

void unpackSignsAvx512(const void* message, size_t n, float* out, bool accumulate) {
  const auto* scales = static_cast<const float*>(message);
  const auto* words =
      reinterpret_cast<const uint32_t*>(static_cast<const unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, end = begin + codec::kChunk < n ? begin + codec::kChunk : n;
    const __m512 plus = _mm512_set1_ps(scales[c]), minus = _mm512_set1_ps(-scales[c]);
    size_t i = begin;  // (a multiple of 16: half a word)
    for (; i + kVec <= end; i += kVec) {
      const auto set = static_cast<__mmask16>(words[i / 32] >> (i % 32));
      const __m512 d = _mm512_mask_blend_ps(set, minus, plus);
      _mm512_storeu_ps(out + i, accumulate ? _mm512_add_ps(_mm512_loadu_ps(out + i), d) : d);
    }
    for (; i < end; ++i) {
      const float d = codec::unsign((words[i / 32] >> (i % 32)) & 1u, scales[c]);
      out[i] = accumulate ? out[i] + d : d;
    }
  }
}

// ---- The plain wire formats: float32, float16, bfloat16 -------------------

// floatToBfloat16 per 32-bit lane, the result in the low 16 bits.
inline __m512i roundBf16(__m512 f) {
  const __m512i x = asInts(f);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_and_epi32(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
  const __mmask16 isNan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, isNan, hi, _mm512_set1_epi32(0x40));  // quieted
}
// A rounded lane as the float32 it stands for.
inline __m512 bf16Value(__m512i rounded) { return asFloats(_mm512_slli_epi32(rounded, 16)); }
inline __m256i narrowHalf(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

template <codec::Input kWire>
inline uint16_t narrowOne(float v) {
  if constexpr (kWire == codec::kF16) return arith::floatToHalf(v);
  return arith::floatToBfloat16(v);
}

template <codec::Input kWire, codec::Input kType>
void encodeFloatsAs(const void* in, size_t n, void* message, float* residual) {
  size_t i = 0;
  if constexpr (kWire == codec::kF32) {
    auto* out = static_cast<float*>(message);
    for (; i + kVec <= n; i += kVec) {
      _mm512_storeu_ps(out + i, value16(in, kType, residual, i));
      if (residual) _mm512_storeu_ps(residual + i, _mm512_setzero_ps());
    }
    for (; i < n; ++i) {
      const float x = codec::load(in, kType, i);
      out[i] = residual ? x + residual[i] : x;
      if (residual) residual[i] = 0.0f;
    }
  } else {
    auto* out = static_cast<uint16_t*>(message);
    const __m512 inf = _mm512_set1_ps(codec::kInf);
    for (; i + kVec <= n; i += kVec) {
      const __m512 v = value16(in, kType, residual, i);
      __m256i stored;
      __m512 d;  // the value stored, as float32
      if constexpr (kWire == codec::kF16) {
        stored = narrowHalf(v);
        d = _mm512_cvtph_ps(stored);
      } else {
        const __m512i r = roundBf16(v);
        stored = _mm512_cvtepi32_epi16(r);  // (lanes hold at most 0xffff)
        d = bf16Value(r);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), stored);
      // The new residual: v - d where d is finite, else 0.
      if (residual)
        _mm512_storeu_ps(residual + i,
                         _mm512_maskz_sub_ps(_mm512_cmp_ps_mask(absOf(d), inf, _CMP_LT_OQ), v, d));
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

void encodeFloatsAvx512(codec::Input wire, codec::Input type, const void* in, size_t n, void* message,
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
  for (; i + kVec <= n; i += kVec) {
    const __m512 d = load16(in, kType, i);
    _mm512_storeu_ps(out + i, accumulate ? _mm512_add_ps(_mm512_loadu_ps(out + i), d) : d);
  }
  for (; i < n; ++i) {
    const float d = codec::load(in, kType, i);
    out[i] = accumulate ? out[i] + d : d;
  }
}

void widenAvx512(codec::Input type, const void* in, size_t n, float* out, bool accumulate) {
  switch (type) {
    case codec::kF32: return widenFrom<codec::kF32>(in, n, out, accumulate);
    case codec::kF16: return widenFrom<codec::kF16>(in, n, out, accumulate);
    case codec::kBf16: return widenFrom<codec::kBf16>(in, n, out, accumulate);
  }
}

void narrowAvx512(codec::Input type, const float* in, size_t n, void* out) {
  auto* o = static_cast<uint16_t*>(out);
  size_t i = 0;
  for (; i + kVec <= n; i += kVec) {
    const __m512 v = _mm512_loadu_ps(in + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i),
                        type == codec::kF16 ? narrowHalf(v) : _mm512_cvtepi32_epi16(roundBf16(v)));
  }
  for (; i < n; ++i) o[i] = type == codec::kF16 ? narrowOne<codec::kF16>(in[i]) : narrowOne<codec::kBf16>(in[i]);
}

constexpr CodecTable kAvx512Codecs{Isa::Avx512,       quantizeMinMaxAvx512, dequantizeMinMaxAvx512,
                                    packSignsAvx512,   unpackSignsAvx512,    encodeFloatsAvx512,
                                    widenAvx512,       narrowAvx512};

}  // namespace

const CodecTable& avx512Codecs() { return kAvx512Codecs; }

}  // namespace gyre::kernels::detail
