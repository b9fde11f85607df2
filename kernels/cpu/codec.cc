#include "kernels/cpu/codec.h"

#include <cmath>
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

// v in a 16-bit wire format (kF16 or kBf16), rounded to nearest even.
uint16_t narrowOne(codec::Input wire, float v) {
  return wire == codec::kF16 ? arith::floatToHalf(v) : arith::floatToBfloat16(v);
}

void encodeFloatsScalar(codec::Input wire, codec::Input type, const void* in, size_t n, void* message,
                        float* residual) {
  const ChunkInput value{in, type, residual};
  if (wire == codec::kF32) {
    auto* out = static_cast<float*>(message);
    for (size_t i = 0; i < n; ++i) {
      out[i] = value(i);
      if (residual) residual[i] = 0.0f;  // all of v was sent
    }
    return;
  }
  auto* out = static_cast<uint16_t*>(message);
  for (size_t i = 0; i < n; ++i) {
    const float v = value(i);
    out[i] = narrowOne(wire, v);
    if (residual) {
      // v - d is exact (d is v with its low bits rounded off), so the sum
      // of what was sent and what is kept is v itself. An overflow or a NaN
      // has nothing to carry over: an infinite residual would poison every
      // later call.
      const float d = codec::load(out, wire, i);
      residual[i] = std::fabs(d) < codec::kInf ? v - d : 0.0f;
    }
  }
}

void widenScalar(codec::Input type, const void* in, size_t n, float* out, bool accumulate) {
  for (size_t i = 0; i < n; ++i) {
    const float d = codec::load(in, type, i);
    out[i] = accumulate ? out[i] + d : d;
  }
}

void narrowScalar(codec::Input type, const float* in, size_t n, void* out) {
  auto* o = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < n; ++i) o[i] = narrowOne(type, in[i]);
}

constexpr detail::CodecTable kScalarCodecs{detail::Isa::Scalar, quantizeMinMaxScalar, dequantizeMinMaxScalar,
                                            packSignsScalar,     unpackSignsScalar,      encodeFloatsScalar,
                                            widenScalar,         narrowScalar};

}  // namespace

namespace detail {

const CodecTable* codecsFor(Isa isa) {
  if (isa == Isa::Scalar) return &kScalarCodecs;
  if (!tableFor(isa)) return nullptr;  // not compiled in, or this CPU cannot run it
#ifdef GYRE_KERNELS_X86
  return isa == Isa::Avx512 ? &avx512Codecs() : &avx2Codecs();
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

// ---- One interface over every wire format ---------------------------------

namespace {

// The plain formats' element type, as codec::Input names it; int8 and
// 1-bit have none (kF32 for them, unused).
codec::Input wireOf(Codec c) { return c == Codec::Fp16 ? codec::kF16 : c == Codec::Bf16 ? codec::kBf16 : codec::kF32; }

Codec checked(Codec c) {
  if (static_cast<int>(c) >= kCodecs) throwError(gyreInvalidArgument, "unknown codec");
  return c;
}

// Decodes elements [begin, begin + len) of an n-element message (len <=
// kChunk, begin a multiple of kChunk) into block, in float32. An int8 or
// 1-bit chunk is copied out as a one-chunk message of its own (its scale
// and its codes or words, 4 KiB at most), so the table's decoders, vector
// code included, serve the narrow outputs too.
void decodeChunk(const detail::CodecTable& t, Codec c, const void* message, size_t n, size_t begin, size_t len,
                 float* block) {
  const auto* bytes = static_cast<const unsigned char*>(message);
  const size_t chunk = begin / codec::kChunk;
  switch (c) {
    case Codec::Int8: {
      alignas(codec::Range) unsigned char part[sizeof(codec::Range) + codec::kChunk];
      std::memcpy(part, bytes + chunk * sizeof(codec::Range), sizeof(codec::Range));
      std::memcpy(part + sizeof(codec::Range), bytes + codec::chunks(n) * sizeof(codec::Range) + begin, len);
      return t.dequantizeMinMax(part, len, block, false);
    }
    case Codec::OneBit: {
      alignas(uint32_t) unsigned char part[sizeof(float) + codec::kChunk / 8];
      std::memcpy(part, bytes + chunk * sizeof(float), sizeof(float));
      std::memcpy(part + sizeof(float), bytes + codec::chunks(n) * sizeof(float) + begin / 8,
                  codec::signWords(len) * sizeof(uint32_t));
      return t.unpackSigns(part, len, block, false);
    }
    default: {
      const size_t esz = wireOf(c) == codec::kF32 ? sizeof(float) : sizeof(uint16_t);
      return t.widen(wireOf(c), bytes + begin * esz, len, block, false);
    }
  }
}

}  // namespace

const char* codecName(Codec c) {
  switch (c) {
    case Codec::None: return "none";
    case Codec::Fp16: return "fp16";
    case Codec::Bf16: return "bf16";
    case Codec::Int8: return "int8";
    case Codec::OneBit: return "onebit";
  }
  return "unknown";
}

size_t messageBytes(Codec c, size_t n) {
  switch (checked(c)) {
    case Codec::None: return n * sizeof(float);
    case Codec::Fp16:
    case Codec::Bf16: return n * sizeof(uint16_t);
    case Codec::Int8: return codec::minMaxBytes(n);
    case Codec::OneBit: return codec::signBytes(n);
  }
  return 0;
}

void encode(Codec c, DType dtype, const void* in, size_t n, void* message, float* residual) {
  const codec::Input type = inputOf(dtype);
  const detail::CodecTable& t = detail::activeCodecs();
  switch (checked(c)) {
    case Codec::Int8: return t.quantizeMinMax(type, in, n, message, residual);
    case Codec::OneBit: return t.packSigns(type, in, n, message, residual);
    default: return t.encodeFloats(wireOf(c), type, in, n, message, residual);
  }
}

void decode(Codec c, const void* message, size_t n, DType dtype, void* out, bool accumulate) {
  const codec::Input type = inputOf(dtype);
  if (accumulate && type != codec::kF32) throwError(gyreInvalidArgument, "the codecs accumulate into float32 only");
  const detail::CodecTable& t = detail::activeCodecs();
  if (type == codec::kF32) {
    switch (checked(c)) {
      case Codec::Int8: return t.dequantizeMinMax(message, n, static_cast<float*>(out), accumulate);
      case Codec::OneBit: return t.unpackSigns(message, n, static_cast<float*>(out), accumulate);
      default: return t.widen(wireOf(c), message, n, static_cast<float*>(out), accumulate);
    }
  }
  if (checked(c) == Codec::None) return t.narrow(type, static_cast<const float*>(message), n, out);
  // The decoded float32 values a chunk at a time (16 KiB, in L1), each
  // narrowed once. An fp16 message into float16 comes out as its own bits,
  // but for signaling NaNs, which come out quieted (as halfToFloat and
  // floatToHalf make them); encode() never writes one.
  alignas(32) float block[codec::kChunk];
  for (size_t begin = 0; begin < n; begin += codec::kChunk) {
    const size_t len = n - begin < codec::kChunk ? n - begin : codec::kChunk;
    decodeChunk(t, c, message, n, begin, len, block);
    t.narrow(type, block, len, static_cast<unsigned char*>(out) + begin * sizeof(uint16_t));
  }
}

void widen(DType dtype, const void* in, size_t n, float* out, bool accumulate) {
  detail::activeCodecs().widen(inputOf(dtype), in, n, out, accumulate);
}

void divideBy(float* x, size_t n, uint32_t divisor) {
  // The reduction kernels' own divide (a true divide, per element, in the
  // active instruction set), so a compressed average rounds as an
  // uncompressed one does. A divisor of 1 or 0 leaves x as it is, as there.
  ReduceTask task;
  task.dtype = DType::Float32;
  task.a = x;
  task.out0 = x;
  task.count = n;
  task.divisor = divisor;
  run(task);
}

}  // namespace gyre::kernels
