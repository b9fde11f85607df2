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
};

// The codecs of an instruction set, or nullptr when this CPU cannot run
// them. AVX-512 has none of its own yet: its table is AVX2's.
const CodecTable* codecsFor(Isa isa);
// The table of the active reduction kernels' instruction set.
const CodecTable& activeCodecs();

#ifdef GYRE_KERNELS_X86
const CodecTable& avx2Codecs();
#endif

}  // namespace gyre::kernels::detail
