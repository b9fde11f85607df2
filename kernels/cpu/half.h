// Scalar conversions between float32 and the two 16-bit float formats.
//
// These are the reference every vector path must match bit for bit: plain
// C++ (no intrinsics, no reliance on the FPU's rounding mode), constexpr, and
// shared with the GPU kernels (kernels/common/arith.h holds them; its header
// comment states the rounding and NaN rules).
#pragma once

#include "kernels/common/arith.h"

namespace gyre::kernels {

using arith::bfloat16ToFloat;
using arith::floatToBfloat16;
using arith::floatToHalf;
using arith::halfToFloat;

}  // namespace gyre::kernels
