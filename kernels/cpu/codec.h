// The compression codecs on the host: int8 min-max quantization and 1-bit
// sign packing of float32, float16 and bfloat16 arrays, with the message
// layouts and arithmetic of kernels/common/codec.h (the GPU's kernels,
// kernels/cuda, make the same bytes). Scalar and AVX2 (codec_avx2.cc; the
// same bytes), chosen with the reduction kernels (GYRE_CPU_ISA).
//
// Error feedback: with a residual (n float32 values, zero at first), each
// element encoded is x + residual, and the residual becomes what the
// message loses of it (x + residual - decoded), so nothing is lost over
// calls, only delayed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/reduce.h"

namespace gyre::kernels {

// message: codec::minMaxBytes(n) bytes. dtype: float32, float16 or bfloat16.
void quantizeMinMax(DType dtype, const void* in, size_t n, void* message, float* residual);
// out[i] = decoded element i (accumulate: out[i] += it), in float32.
void dequantizeMinMax(const void* message, size_t n, float* out, bool accumulate);

// message: codec::signBytes(n) bytes.
void packSigns(DType dtype, const void* in, size_t n, void* message, float* residual);
void unpackSigns(const void* message, size_t n, float* out, bool accumulate);

// True for the types the codecs take (float32, float16, bfloat16).
bool codecTakes(DType dtype);

// ---- One interface over every wire format (compressed collectives) --------

// What a compressed collective sends (gyreCodec_t's values, gyre.h).
enum class Codec : uint8_t { None = 0, Fp16 = 1, Bf16 = 2, Int8 = 3, OneBit = 4 };
constexpr int kCodecs = 5;
// "none", "fp16", "bf16", "int8", "onebit"; "unknown" for anything else.
const char* codecName(Codec c);
// Bytes of one message of n elements: None n float32, Fp16/Bf16 n 16-bit
// values, Int8 codec::minMaxBytes(n), OneBit codec::signBytes(n).
size_t messageBytes(Codec c, size_t n);
// Encodes n elements of `in` (dtype: float32, float16 or bfloat16) as one
// message of messageBytes(c, n) bytes. fp16 and bf16 round to nearest, ties
// to even (arith.h's floatToHalf / floatToBfloat16); None writes float32.
// residual: null, or n floats of error feedback as above, for every codec;
// for None, Fp16 and Bf16, where the decoded value is not finite (an fp16
// overflow, a NaN), that element's new residual is 0 (Int8 and OneBit keep
// quantizeMinMax's and packSigns' residual, the GPU's too).
void encode(Codec c, DType dtype, const void* in, size_t n, void* message, float* residual);
// Decodes a message of n elements into out, of type dtype (float32,
// float16, bfloat16; narrower types round to nearest even once, from the
// decoded float32). accumulate: out += decoded, float32 only.
void decode(Codec c, const void* message, size_t n, DType dtype, void* out, bool accumulate);
// out = in as float32 (accumulate: out += it); in is float32, float16 or
// bfloat16.
void widen(DType dtype, const void* in, size_t n, float* out, bool accumulate);
// x[i] = x[i] / divisor, as the reduction kernels' average divides.
void divideBy(float* x, size_t n, uint32_t divisor);

}  // namespace gyre::kernels
