#include "kernels/cpu/codec.h"

#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "kernels/common/codec.h"
#include "kernels/cpu/codec_isa.h"

namespace gyre::kernels {

namespace {

codec::Input inputOf(DType t) {
  switch (t) {
    case DType::Float32: return codec::kF32;
    case DType::Float16: return codec::kF16;
    case DType::Bfloat16: return codec::kBf16;
    default: break;
  }
  throwError(gyreInvalidArgument, "the codecs take float32, float16 and bfloat16 only");
}

// The values a chunk encodes: the input plus the residual.
struct ChunkInput {
  const void* in;
  codec::Input type;
  const float* residual;
  float operator()(size_t i) const {
    const float x = codec::load(in, type, i);
    return residual ? x + residual[i] : x;
  }
};

}  // namespace

bool codecTakes(DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::Bfloat16; }

namespace {

// The scalar codecs: codec.h's functions element by element.
void quantizeMinMaxScalar(codec::Input type, const void* in, size_t n, void* message, float* residual) {
  const ChunkInput value{in, type, residual};
  auto* ranges = static_cast<codec::Range*>(message);
  auto* codes = static_cast<uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, end = begin + codec::kChunk < n ? begin + codec::kChunk : n;
    codec::Range r = codec::emptyRange();
    for (size_t i = begin; i < end; ++i) codec::widen(r, value(i));
    r = codec::settle(r);
    std::memcpy(&ranges[c], &r, sizeof(r));
    const float inv = codec::inverseStep(r), step = codec::step(r);
    for (size_t i = begin; i < end; ++i) {
      const float v = value(i);
      codes[i] = codec::encode(v, r, inv);
      if (residual) residual[i] = v - codec::decode(codes[i], r, step);
    }
  }
}

void dequantizeMinMaxScalar(const void* message, size_t n, float* out, bool accumulate) {
  const auto* codes = static_cast<const uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    codec::Range r;
    std::memcpy(&r, static_cast<const codec::Range*>(message) + c, sizeof(r));
    const float step = codec::step(r);
    const size_t begin = c * codec::kChunk, end = begin + codec::kChunk < n ? begin + codec::kChunk : n;
    for (size_t i = begin; i < end; ++i) {
      const float d = codec::decode(codes[i], r, step);
      out[i] = accumulate ? out[i] + d : d;
    }
  }
}

void packSignsScalar(codec::Input type, const void* in, size_t n, void* message, float* residual) {
  const ChunkInput value{in, type, residual};
  auto* scales = static_cast<float*>(message);
  auto* words = reinterpret_cast<uint32_t*>(static_cast<unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  for (size_t c = 0; c < codec::chunks(n); ++c) {
    const size_t begin = c * codec::kChunk, end = begin + codec::kChunk < n ? begin + codec::kChunk : n;
    // The mean of |v| in codec.h's one order: lanes, then a tree.
    float lane[codec::kLanes];
    for (uint32_t l = 0; l < codec::kLanes; ++l) {
      float s = 0.0f;
      for (size_t i = begin + l; i < end; i += codec::kLanes) s += codec::magnitude(value(i));
      lane[l] = s;
    }
    for (uint32_t s = codec::kLanes / 2; s >= 1; s /= 2)
      for (uint32_t i = 0; i < s; ++i) lane[i] += lane[i + s];
    const float scale = codec::meanOf(lane[0], static_cast<uint32_t>(end - begin));
    scales[c] = scale;
    for (size_t w = begin / 32; w < (end + 31) / 32; ++w) {
      uint32_t bits = 0;
      for (size_t i = w * 32; i < w * 32 + 32 && i < end; ++i) {
        const float v = value(i);
        const uint32_t b = codec::signBit(v);
        bits |= b << (i % 32);
        if (residual) residual[i] = v - codec::unsign(b, scale);
      }
      words[w] = bits;
    }
  }
}

void unpackSignsScalar(const void* message, size_t n, float* out, bool accumulate) {
  const auto* scales = static_cast<const float*>(message);
  const auto* words =
      reinterpret_cast<const uint32_t*>(static_cast<const unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float d = codec::unsign((words[i / 32] >> (i % 32)) & 1u, scales[i / codec::kChunk]);
    out[i] = accumulate ? out[i] + d : d;
  }
}

constexpr detail::CodecTable kScalarCodecs{detail::Isa::Scalar, quantizeMinMaxScalar, dequantizeMinMaxScalar,
                                            packSignsScalar, unpackSignsScalar};

}  // namespace

namespace detail {

const CodecTable* codecsFor(Isa isa) {
  if (isa == Isa::Scalar) return &kScalarCodecs;
  if (!tableFor(isa)) return nullptr;  // not compiled in, or this CPU cannot run it
#ifdef GYRE_KERNELS_X86
  return &avx2Codecs();  // (AVX-512 runs AVX2's)
#else
  return nullptr;
#endif
}

const CodecTable& activeCodecs() {
  static const CodecTable& t = [&]() -> const CodecTable& {
    const CodecTable* c = codecsFor(activeTable().isa);
    return c ? *c : kScalarCodecs;
  }();
  return t;
}

}  // namespace detail

void quantizeMinMax(DType dtype, const void* in, size_t n, void* message, float* residual) {
  detail::activeCodecs().quantizeMinMax(inputOf(dtype), in, n, message, residual);
}

void dequantizeMinMax(const void* message, size_t n, float* out, bool accumulate) {
  detail::activeCodecs().dequantizeMinMax(message, n, out, accumulate);
}

void packSigns(DType dtype, const void* in, size_t n, void* message, float* residual) {
  detail::activeCodecs().packSigns(inputOf(dtype), in, n, message, residual);
}

void unpackSigns(const void* message, size_t n, float* out, bool accumulate) {
  detail::activeCodecs().unpackSigns(message, n, out, accumulate);
}

}  // namespace gyre::kernels
