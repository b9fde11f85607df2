// Portable implementation: one element per "register". It is the fallback on
// CPUs without AVX2 (and on other architectures) and defines the semantics the
// vector versions are tested against.
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/cpu/half.h"

#define GYRE_KERNELS_ISA scalar
#include "kernels/cpu/reduce_impl.h"

namespace gyre::kernels::scalar {
namespace {

// The arithmetic itself is kernels/common/arith.h's, shared with the GPU.
template <class T>
struct IntV {
  using Elem = T;
  using Reg = T;
  using Packed = T;
  using Div = uint32_t;
  static constexpr size_t kLanes = 1;
  static Reg load(const T* p) { return *p; }
  static Packed pack(Reg r) { return r; }
  static void store(T* p, Packed v) { *p = v; }
  static Reg add(Reg x, Reg y) { return arith::add(x, y); }
  static Reg mul(Reg x, Reg y) { return arith::mul(x, y); }
  static Reg max(Reg x, Reg y) { return arith::pickMax(x, y); }
  static Reg min(Reg x, Reg y) { return arith::pickMin(x, y); }
  static Div makeDiv(uint32_t d) { return d; }
  static Reg div(Reg r, Div d) { return arith::divide<arith::Plain<T>>(r, d); }
};

template <class F>
struct FloatV {
  using Elem = F;
  using Reg = F;
  using Packed = F;
  using Div = F;  // float32 divides in float32, float64 in float64
  static constexpr size_t kLanes = 1;
  static Reg load(const F* p) { return *p; }
  static Packed pack(Reg r) { return r; }
  static void store(F* p, Packed v) { *p = v; }
  static Reg add(Reg x, Reg y) { return arith::add(x, y); }
  static Reg mul(Reg x, Reg y) { return arith::mul(x, y); }
  static Reg max(Reg x, Reg y) { return arith::pickMax(x, y); }
  static Reg min(Reg x, Reg y) { return arith::pickMin(x, y); }
  static Div makeDiv(uint32_t d) { return static_cast<F>(d); }
  static Reg div(Reg r, Div d) { return r / d; }
};

// float16 and bfloat16: compute in float32, round once when storing.
template <float (*kToFloat)(uint16_t), uint16_t (*kFromFloat)(float)>
struct HalfV {
  using Elem = uint16_t;
  using Reg = float;
  using Packed = uint16_t;
  using Div = float;
  static constexpr size_t kLanes = 1;
  static Reg load(const uint16_t* p) { return kToFloat(*p); }
  static Packed pack(Reg r) { return kFromFloat(r); }
  static void store(uint16_t* p, Packed v) { *p = v; }
  static Reg add(Reg x, Reg y) { return arith::add(x, y); }
  static Reg mul(Reg x, Reg y) { return arith::mul(x, y); }
  static Reg max(Reg x, Reg y) { return arith::pickMax(x, y); }
  static Reg min(Reg x, Reg y) { return arith::pickMin(x, y); }
  static Div makeDiv(uint32_t d) { return static_cast<float>(d); }
  // reduce.h divides the stored out0, so round to 16 bits before dividing.
  static Reg div(Reg r, Div d) { return kToFloat(kFromFloat(r)) / d; }
};

// Two destinations from one read of the source: each chunk is copied to dst0
// and then, still in L1, to dst1.
void copy2(void* dst0, void* dst1, const void* src, size_t bytes) {
  constexpr size_t kChunk = 8192;
  auto* d0 = static_cast<unsigned char*>(dst0);
  auto* d1 = static_cast<unsigned char*>(dst1);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < bytes; i += kChunk) {
    const size_t n = bytes - i < kChunk ? bytes - i : kChunk;
    std::memcpy(d0 + i, s + i, n);
    std::memcpy(d1 + i, s + i, n);
  }
}

// One destination without `rep movsb`: the x86-64 baseline's 16-byte
// registers (a plain loop could be turned back into a memcpy call by the
// compiler). rep movsb's crawl is x86's; elsewhere memcpy is the loop.
void copy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16 * k));
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16 * k), v[k]);
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

constexpr detail::KernelTable kTable =
    makeTable<IntV<int8_t>, IntV<uint8_t>, IntV<int32_t>, IntV<uint32_t>, IntV<int64_t>,
              IntV<uint64_t>, HalfV<&halfToFloat, &floatToHalf>, FloatV<float>, FloatV<double>,
              HalfV<&bfloat16ToFloat, &floatToBfloat16>>(detail::Isa::Scalar, &copy2, &copy);

}  // namespace
}  // namespace gyre::kernels::scalar

namespace gyre::kernels::detail {
const KernelTable& scalarTable() { return scalar::kTable; }
}  // namespace gyre::kernels::detail
