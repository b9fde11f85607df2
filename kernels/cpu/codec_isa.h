// Internal view of the codecs (kernels/cpu/codec.h): one table per
// instruction set, chosen with the reduction kernels' (GYRE_CPU_ISA, isa.h),
// so tests and benchmarks can run each one the CPU supports.
#pragma once

#include <cstddef>

#include "kernels/common/codec.h"
#include "kernels/cpu/isa.h"

namespace gyre::kernels::detail {

struct CodecTable {
  Isa isa;
  void (*quantizeMinMax)(codec::Input type, const void* in, size_t n, void* message, float* residual);
  void (*dequantizeMinMax)(const void* message, size_t n, float* out, bool accumulate);
  void (*packSigns)(codec::Input type, const void* in, size_t n, void* message, float* residual);
  void (*unpackSigns)(const void* message, size_t n, float* out, bool accumulate);
  // The plain wire formats (Codec None, Fp16, Bf16 as `wire` kF32, kF16,
  // kBf16): v = input (+ residual) stored in wire's type, rounded to nearest
  // even; the residual becomes v - stored, or 0 where stored is not finite.
  void (*encodeFloats)(codec::Input wire, codec::Input type, const void* in, size_t n, void* message,
                       float* residual);
  // out = in as float32 (accumulate: out += it): exact, NaNs quieted as
  // arith.h's halfToFloat and bfloat16ToFloat quiet them.
  void (*widen)(codec::Input type, const void* in, size_t n, float* out, bool accumulate);
  // out = in rounded to type (kF16 or kBf16), to nearest even.
  void (*narrow)(codec::Input type, const float* in, size_t n, void* out);
};

// The codecs of an instruction set, or nullptr when this CPU cannot run
// them (or they are not compiled in).
const CodecTable* codecsFor(Isa isa);
// The table of the active reduction kernels' instruction set.
const CodecTable& activeCodecs();

#ifdef GYRE_KERNELS_X86
const CodecTable& avx2Codecs();
const CodecTable& avx512Codecs();
#endif

}  // namespace gyre::kernels::detail
