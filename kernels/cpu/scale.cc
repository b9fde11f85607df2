#include "kernels/cpu/scale.h"

#include <cstdint>
#include <cstring>

#include "kernels/common/arith.h"

namespace gyre::kernels {

namespace {

// One element at a time through arith::scaleOne, the GPU's arithmetic too.
template <class S>
void scaleAs(void* out, const void* in, size_t n, const void* scalar) {
  using T = typename S::Elem;
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  for (size_t i = 0; i < n; ++i) y[i] = arith::scaleOne<S>(x[i], s);
}

}  // namespace

void scale(DType t, void* out, const void* in, size_t count, const void* scalar) {
  switch (t) {
    case DType::Int8: return scaleAs<arith::Plain<int8_t>>(out, in, count, scalar);
    case DType::Uint8: return scaleAs<arith::Plain<uint8_t>>(out, in, count, scalar);
    case DType::Int32: return scaleAs<arith::Plain<int32_t>>(out, in, count, scalar);
    case DType::Uint32: return scaleAs<arith::Plain<uint32_t>>(out, in, count, scalar);
    case DType::Int64: return scaleAs<arith::Plain<int64_t>>(out, in, count, scalar);
    case DType::Uint64: return scaleAs<arith::Plain<uint64_t>>(out, in, count, scalar);
    case DType::Float16: return scaleAs<arith::Half>(out, in, count, scalar);
    case DType::Float32: return scaleAs<arith::Plain<float>>(out, in, count, scalar);
    case DType::Float64: return scaleAs<arith::Plain<double>>(out, in, count, scalar);
    case DType::Bfloat16: return scaleAs<arith::Bfloat16>(out, in, count, scalar);
  }
}

}  // namespace gyre::kernels
