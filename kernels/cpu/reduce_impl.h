// The element-wise loop shared by every instruction set.
//
// Each reduce_<isa>.cc defines GYRE_KERNELS_ISA (a namespace name), includes
// this file, then defines its vector types and builds its table with
// makeTable(). Everything here lands in gyre::kernels::<isa>, so code compiled
// with -mavx512f never shares a symbol (an inline function, a template
// instantiation) with code compiled for plain x86-64: the linker would be free
// to keep either copy, and the scalar path could end up executing AVX-512.
// For the same reason this file uses no std:: templates.
//
// A vector type V provides:
//   Elem                  the stored element type
//   Reg, Packed           the compute register and the stored-format register
//                         (they differ for float16/bfloat16: compute in float32)
//   kLanes                elements per register
//   load(const Elem*) -> Reg, pack(Reg) -> Packed, store(Elem*, Packed)
//   add, mul, max, min    the documented semantics (max/min pick a or b)
//   Div, makeDiv(uint32_t), div(Reg, Div)  the finishing divide; for
//                         float16/bfloat16 it first rounds to the stored
//                         format, because reduce.h divides the stored out0.
//
// No #pragma once: a translation unit includes it exactly once, by design.
#ifndef GYRE_KERNELS_ISA
#error "define GYRE_KERNELS_ISA before including reduce_impl.h"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa.h"

namespace gyre::kernels::GYRE_KERNELS_ISA {

enum : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kCopy = detail::kOpCopy };

// Integer divide for the average: the quotient truncates toward zero (C++'s
// rule); the wide types make every divisor representable and -MIN / d safe.
template <class T>
inline T divideInt(T x, uint32_t d) {
  if constexpr (static_cast<T>(-1) < static_cast<T>(0)) {
    return static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(d));
  } else {
    return static_cast<T>(static_cast<uint64_t>(x) / d);
  }
}

template <class V, int kOp>
inline typename V::Reg combine(typename V::Reg x, typename V::Reg y) {
  if constexpr (kOp == kSum) {
    return V::add(x, y);
  } else if constexpr (kOp == kProd) {
    return V::mul(x, y);
  } else if constexpr (kOp == kMax) {
    return V::max(x, y);
  } else {
    return V::min(x, y);
  }
}

// One register's worth: load, combine, finish, store. Loads come before the
// stores, so out0/out1 may be a or b (the same elements, never shifted).
// kDivide is a template parameter, not a run-time flag, on purpose: given
// "if (divide) r /= d", clang emits "r /= (divide ? d : 1)", and dividing by
// one quiets a signaling NaN that max/min must pass through bit for bit.
template <class V, int kOp, bool kDivide>
inline void step(const typename V::Elem* a, const typename V::Elem* b, typename V::Elem* out0,
                 typename V::Elem* out1, const typename V::Div& d) {
  typename V::Reg r;
  if constexpr (kOp == kCopy) {
    r = V::load(a);
  } else {
    r = combine<V, kOp>(V::load(a), V::load(b));
  }
  if constexpr (kDivide) r = V::div(r, d);
  const typename V::Packed p = V::pack(r);
  V::store(out0, p);
  if (out1 != nullptr) V::store(out1, p);
}

// The loop over all elements; out1 may be null (a well-predicted branch, and
// a constant one where the caller passes nullptr).
template <class V, int kOp, bool kDivide>
inline void loop(const typename V::Elem* a, const typename V::Elem* b, typename V::Elem* out0,
                 typename V::Elem* out1, size_t n, const typename V::Div& d) {
  using T = typename V::Elem;
  constexpr size_t L = V::kLanes;
  // b is only read when kOp != kCopy; for kCopy it may be null, so never
  // form b + i there (pointer arithmetic on null is UB).
  auto bAt = [b](size_t k) {
    if constexpr (kOp == kCopy) {
      return b;
    } else {
      return b + k;
    }
  };
  auto o1At = [out1](size_t k) { return out1 != nullptr ? out1 + k : nullptr; };

  size_t i = 0;
  // Four registers per trip keep several loads in flight on small, cached
  // buffers; on large ones memory bandwidth rules and this costs nothing.
  for (; i + 4 * L <= n; i += 4 * L) {
    step<V, kOp, kDivide>(a + i, bAt(i), out0 + i, o1At(i), d);
    step<V, kOp, kDivide>(a + i + L, bAt(i + L), out0 + i + L, o1At(i + L), d);
    step<V, kOp, kDivide>(a + i + 2 * L, bAt(i + 2 * L), out0 + i + 2 * L, o1At(i + 2 * L), d);
    step<V, kOp, kDivide>(a + i + 3 * L, bAt(i + 3 * L), out0 + i + 3 * L, o1At(i + 3 * L), d);
  }
  for (; i + L <= n; i += L) step<V, kOp, kDivide>(a + i, bAt(i), out0 + i, o1At(i), d);
  if constexpr (L > 1) {
    // The tail goes through the same vector code on a zero-padded copy, so it
    // cannot disagree with the body, and nothing reads past the buffers.
    if (i < n) {
      const size_t bytes = (n - i) * sizeof(T);
      T ta[L] = {};
      T tb[L] = {};
      T t0[L];
      std::memcpy(ta, a + i, bytes);
      if (kOp != kCopy) std::memcpy(tb, b + i, bytes);
      step<V, kOp, kDivide>(ta, tb, t0, nullptr, d);
      std::memcpy(out0 + i, t0, bytes);
      if (out1 != nullptr) std::memcpy(out1 + i, t0, bytes);
    }
  }
}

// kExtra = false is the hot case (no divisor, no out1) with nothing to test;
// kExtra = true picks the divide once per call.
template <class V, int kOp, bool kExtra>
void reduce(const void* va, const void* vb, void* vout0, void* vout1, size_t n, uint32_t divisor) {
  using T = typename V::Elem;
  const T* a = static_cast<const T*>(va);
  const T* b = static_cast<const T*>(vb);
  T* out0 = static_cast<T*>(vout0);
  const typename V::Div d = V::makeDiv(divisor);
  if constexpr (!kExtra) {
    loop<V, kOp, false>(a, b, out0, nullptr, n, d);
  } else if (divisor > 1) {
    loop<V, kOp, true>(a, b, out0, static_cast<T*>(vout1), n, d);
  } else {
    loop<V, kOp, false>(a, b, out0, static_cast<T*>(vout1), n, d);
  }
}

template <class V>
constexpr void fillRow(detail::ReduceFn (&row)[kNumOps + 1][2]) {
  row[kSum][0] = &reduce<V, kSum, false>;
  row[kSum][1] = &reduce<V, kSum, true>;
  row[kProd][0] = &reduce<V, kProd, false>;
  row[kProd][1] = &reduce<V, kProd, true>;
  row[kMax][0] = &reduce<V, kMax, false>;
  row[kMax][1] = &reduce<V, kMax, true>;
  row[kMin][0] = &reduce<V, kMin, false>;
  row[kMin][1] = &reduce<V, kMin, true>;
  row[kCopy][0] = &reduce<V, kCopy, false>;
  row[kCopy][1] = &reduce<V, kCopy, true>;
}

// The vector type of each dtype, in DType order (gyreDataType_t's).
template <class I8, class U8, class I32, class U32, class I64, class U64, class F16, class F32,
          class F64, class BF16>
constexpr detail::KernelTable makeTable(detail::Isa isa, detail::Copy2Fn copy2, detail::CopyFn copy) {
  detail::KernelTable t{};
  t.isa = isa;
  t.copy2 = copy2;
  t.copy = copy;
  fillRow<I8>(t.reduce[static_cast<int>(DType::Int8)]);
  fillRow<U8>(t.reduce[static_cast<int>(DType::Uint8)]);
  fillRow<I32>(t.reduce[static_cast<int>(DType::Int32)]);
  fillRow<U32>(t.reduce[static_cast<int>(DType::Uint32)]);
  fillRow<I64>(t.reduce[static_cast<int>(DType::Int64)]);
  fillRow<U64>(t.reduce[static_cast<int>(DType::Uint64)]);
  fillRow<F16>(t.reduce[static_cast<int>(DType::Float16)]);
  fillRow<F32>(t.reduce[static_cast<int>(DType::Float32)]);
  fillRow<F64>(t.reduce[static_cast<int>(DType::Float64)]);
  fillRow<BF16>(t.reduce[static_cast<int>(DType::Bfloat16)]);
  return t;
}

}  // namespace gyre::kernels::GYRE_KERNELS_ISA
