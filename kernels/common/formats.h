// From a run-time dtype to arith.h's storage format, for code that picks a
// kernel per call (the GPU launchers, the tests).
#pragma once

#include <cstdint>

#include "kernels/common/arith.h"
#include "kernels/cpu/reduce.h"

namespace gyre::kernels::arith {

// Calls f(S{}) with the format of dt.
template <class F>
decltype(auto) withFormat(DType dt, F&& f) {
  switch (dt) {
    case DType::Int8: return f(Plain<int8_t>{});
    case DType::Uint8: return f(Plain<uint8_t>{});
    case DType::Int32: return f(Plain<int32_t>{});
    case DType::Uint32: return f(Plain<uint32_t>{});
    case DType::Int64: return f(Plain<int64_t>{});
    case DType::Uint64: return f(Plain<uint64_t>{});
    case DType::Float16: return f(Half{});
    case DType::Float32: return f(Plain<float>{});
    case DType::Float64: return f(Plain<double>{});
    case DType::Bfloat16: break;
  }
  return f(Bfloat16{});
}

// Calls f(std::integral_constant-like tag) with kOp as a compile-time value.
template <int kOp>
struct OpTag {
  static constexpr int value = kOp;
};
template <class F>
decltype(auto) withOp(Op op, F&& f) {
  switch (op) {
    case Op::Sum: return f(OpTag<kSum>{});
    case Op::Prod: return f(OpTag<kProd>{});
    case Op::Max: return f(OpTag<kMax>{});
    case Op::Min: break;
  }
  return f(OpTag<kMin>{});
}

}  // namespace gyre::kernels::arith
