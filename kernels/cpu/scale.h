// out[i] = scalar * in[i], for PreMulSum: each rank's contribution scaled
// before the sum. scalar points to one value of the same type. float16 and
// bfloat16 multiply in float32 and round once; integers wrap.
#pragma once

#include <cstddef>

#include "kernels/cpu/reduce.h"

namespace gyre::kernels {

void scale(DType t, void* out, const void* in, size_t count, const void* scalar);

}  // namespace gyre::kernels
