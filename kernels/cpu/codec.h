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

}  // namespace gyre::kernels
