#include "kernels/cpu/scale.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/half.h"

namespace gyre::kernels {

namespace {

template <class T>
void scaleAs(void* out, const void* in, size_t n, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  if constexpr (std::is_integral_v<T>) {
    // In the unsigned type: wraps, as every gyre integer operation does.
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < n; ++i) y[i] = static_cast<T>(static_cast<U>(x[i]) * static_cast<U>(s));
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = x[i] * s;
  }
}

template <float (*kToFloat)(uint16_t), uint16_t (*kFromFloat)(float)>
void scaleHalf(void* out, const void* in, size_t n, const void* scalar) {
  uint16_t raw;
  std::memcpy(&raw, scalar, sizeof(raw));
  const float s = kToFloat(raw);
  const uint16_t* x = static_cast<const uint16_t*>(in);
  uint16_t* y = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < n; ++i) y[i] = kFromFloat(kToFloat(x[i]) * s);
}

}  // namespace

void scale(DType t, void* out, const void* in, size_t count, const void* scalar) {
  switch (t) {
    case DType::Int8: return scaleAs<int8_t>(out, in, count, scalar);
    case DType::Uint8: return scaleAs<uint8_t>(out, in, count, scalar);
    case DType::Int32: return scaleAs<int32_t>(out, in, count, scalar);
    case DType::Uint32: return scaleAs<uint32_t>(out, in, count, scalar);
    case DType::Int64: return scaleAs<int64_t>(out, in, count, scalar);
    case DType::Uint64: return scaleAs<uint64_t>(out, in, count, scalar);
    case DType::Float16: return scaleHalf<&halfToFloat, &floatToHalf>(out, in, count, scalar);
    case DType::Float32: return scaleAs<float>(out, in, count, scalar);
    case DType::Float64: return scaleAs<double>(out, in, count, scalar);
    case DType::Bfloat16: return scaleHalf<&bfloat16ToFloat, &floatToBfloat16>(out, in, count, scalar);
  }
}

}  // namespace gyre::kernels
