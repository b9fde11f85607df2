#include "tests/kernels/reference.h"

#include <bit>
#include <cmath>
#include <random>
#include <type_traits>

#include "kernels/cpu/half.h"

namespace gyre::kernels::testing {
namespace {

template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void put(void* p, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(T), &v, sizeof(T));
}

// Integers: compute in 64 bits and keep the low bits, which is what two's
// complement wrapping means.
template <class T>
T intOp(T x, T y, Op op) {
  using U = std::make_unsigned_t<T>;
  const uint64_t ux = static_cast<U>(x);
  const uint64_t uy = static_cast<U>(y);
  switch (op) {
    case Op::Sum:
      return static_cast<T>(static_cast<U>(ux + uy));
    case Op::Prod:
      return static_cast<T>(static_cast<U>(ux * uy));
    case Op::Max:
      return x < y ? y : x;
    case Op::Min:
      return y < x ? y : x;
  }
  return x;
}

// Truncation toward zero spelled out on magnitudes.
template <class T>
T intDiv(T x, uint32_t d) {
  if constexpr (std::is_signed_v<T>) {
    const bool negative = x < 0;
    const uint64_t magnitude = negative ? static_cast<uint64_t>(-(static_cast<int64_t>(x) + 1)) + 1
                                        : static_cast<uint64_t>(x);
    const uint64_t q = magnitude / d;
    return static_cast<T>(negative ? -static_cast<int64_t>(q) : static_cast<int64_t>(q));
  } else {
    return static_cast<T>(static_cast<uint64_t>(x) / d);
  }
}

template <class F>
F floatOp(F x, F y, Op op) {
  switch (op) {
    case Op::Sum:
      return x + y;
    case Op::Prod:
      return x * y;
    case Op::Max:
      if (std::isnan(x)) return x;
      if (std::isnan(y)) return y;
      return y > x ? y : x;
    case Op::Min:
      if (std::isnan(x)) return x;
      if (std::isnan(y)) return y;
      return y < x ? y : x;
  }
  return x;
}

template <class T>
void intReference(Op op, const void* a, const void* b, void* out, size_t n, uint32_t divisor) {
  for (size_t i = 0; i < n; ++i) {
    T r = load<T>(a, i);
    if (b != nullptr) r = intOp<T>(r, load<T>(b, i), op);
    if (divisor > 1) r = intDiv<T>(r, divisor);
    put<T>(out, i, r);
  }
}

// The divide is a separate pass: written as "if (divisor > 1) r /= d" in one
// loop, clang turns it into "r /= (divisor > 1 ? d : 1)", which quiets a
// signaling NaN that max/min must pass through untouched.
template <class F>
void floatReference(Op op, const void* a, const void* b, void* out, size_t n, uint32_t divisor) {
  for (size_t i = 0; i < n; ++i) {
    F r = load<F>(a, i);
    if (b != nullptr) r = floatOp<F>(r, load<F>(b, i), op);
    put<F>(out, i, r);
  }
  if (divisor <= 1) return;
  for (size_t i = 0; i < n; ++i) put<F>(out, i, load<F>(out, i) / static_cast<F>(divisor));
}

// float16/bfloat16: widen, operate in float32, round; the divide applies to
// the rounded out0, as reduce.h's "out0[i] /= divisor" says.
template <float (*kWiden)(uint16_t), uint16_t (*kNarrow)(float)>
void halfReference(Op op, const void* a, const void* b, void* out, size_t n, uint32_t divisor) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t r = load<uint16_t>(a, i);
    if (b != nullptr) r = kNarrow(floatOp<float>(kWiden(r), kWiden(load<uint16_t>(b, i)), op));
    if (divisor > 1) r = kNarrow(kWiden(r) / static_cast<float>(divisor));
    put<uint16_t>(out, i, r);
  }
}

bool isNan(DType dt, const void* p, size_t i) {
  switch (dt) {
    case DType::Float16:
      return (load<uint16_t>(p, i) & 0x7fff) > 0x7c00;
    case DType::Bfloat16:
      return (load<uint16_t>(p, i) & 0x7fff) > 0x7f80;
    case DType::Float32:
      return std::isnan(load<float>(p, i));
    case DType::Float64:
      return std::isnan(load<double>(p, i));
    default:
      return false;
  }
}

std::string hexElement(DType dt, const void* p, size_t i) {
  const size_t size = dtypeSize(dt);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const unsigned char*>(p) + i * size, size);
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", static_cast<int>(2 * size),
                static_cast<unsigned long long>(bits));
  return buf;
}

}  // namespace

void referenceReduce(DType dt, Op op, const void* a, const void* b, void* out, size_t n,
                     uint32_t divisor) {
  switch (dt) {
    case DType::Int8:
      return intReference<int8_t>(op, a, b, out, n, divisor);
    case DType::Uint8:
      return intReference<uint8_t>(op, a, b, out, n, divisor);
    case DType::Int32:
      return intReference<int32_t>(op, a, b, out, n, divisor);
    case DType::Uint32:
      return intReference<uint32_t>(op, a, b, out, n, divisor);
    case DType::Int64:
      return intReference<int64_t>(op, a, b, out, n, divisor);
    case DType::Uint64:
      return intReference<uint64_t>(op, a, b, out, n, divisor);
    case DType::Float16:
      return halfReference<&halfToFloat, &floatToHalf>(op, a, b, out, n, divisor);
    case DType::Float32:
      return floatReference<float>(op, a, b, out, n, divisor);
    case DType::Float64:
      return floatReference<double>(op, a, b, out, n, divisor);
    case DType::Bfloat16:
      return halfReference<&bfloat16ToFloat, &floatToBfloat16>(op, a, b, out, n, divisor);
  }
}

::testing::AssertionResult sameElements(DType dt, Op op, bool hasB, const void* expected,
                                        const void* actual, size_t n) {
  const size_t size = dtypeSize(dt);
  const bool anyNan = hasB && (op == Op::Sum || op == Op::Prod);
  for (size_t i = 0; i < n; ++i) {
    const auto* e = static_cast<const unsigned char*>(expected) + i * size;
    const auto* g = static_cast<const unsigned char*>(actual) + i * size;
    if (std::memcmp(e, g, size) == 0) continue;
    if (anyNan && isNan(dt, expected, i) && isNan(dt, actual, i)) continue;
    return ::testing::AssertionFailure()
           << "element " << i << " of " << n << ": expected " << hexElement(dt, expected, i)
           << ", got " << hexElement(dt, actual, i);
  }
  return ::testing::AssertionSuccess();
}

std::vector<unsigned char> randomValues(DType dt, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> bytes(n * dtypeSize(dt));
  static constexpr uint32_t kF32Specials[] = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc12345, 0x7f800001,
      0x7f7fffff, 0x00800000, 0x00000001, 0x807fffff, 0x3f800000, 0xbf800000, 0x4b800000};
  static constexpr uint64_t kF64Specials[] = {
      0x0000000000000000, 0x8000000000000000, 0x7ff0000000000000, 0xfff0000000000000,
      0x7ff8000000000000, 0xfff8000000abcdef, 0x7ff0000000000001, 0x7fefffffffffffff,
      0x0010000000000000, 0x0000000000000001, 0x3ff0000000000000, 0xbff0000000000000};
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    const unsigned kind = static_cast<unsigned>(r >> 60);  // 0..15
    if (dt == DType::Float32) {
      float f;
      if (kind < 3) {
        f = std::bit_cast<float>(kF32Specials[(r >> 8) % std::size(kF32Specials)]);
      } else if (kind < 6) {
        f = static_cast<float>(static_cast<int>(r % 41) - 20);
      } else {  // a random sign and mantissa, exponent within +-2^30
        const uint32_t bits = static_cast<uint32_t>(r) & 0x807fffffu;
        f = std::bit_cast<float>(bits | ((97u + static_cast<uint32_t>((r >> 32) % 60)) << 23));
      }
      put<float>(bytes.data(), i, f);
    } else if (dt == DType::Float64) {
      double f;
      if (kind < 3) {
        f = std::bit_cast<double>(kF64Specials[(r >> 8) % std::size(kF64Specials)]);
      } else if (kind < 6) {
        f = static_cast<double>(static_cast<int>(r % 41) - 20);
      } else {
        const uint64_t bits = r & 0x800fffffffffffffull;
        f = std::bit_cast<double>(bits | ((993ull + (rng() % 60)) << 52));
      }
      put<double>(bytes.data(), i, f);
    } else {
      std::memcpy(bytes.data() + i * dtypeSize(dt), &r, dtypeSize(dt));
    }
  }
  return bytes;
}

std::string isaParamName(const ::testing::TestParamInfo<detail::Isa>& info) {
  return detail::isaName(info.param);
}

}  // namespace gyre::kernels::testing
