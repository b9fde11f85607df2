// A deliberately plain, element-at-a-time model of reduce.h's contract that
// the kernels are compared against. It shares nothing with the kernels except
// half.h (itself tested against known bit patterns and the hardware).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/reduce.h"

namespace gyre::kernels::testing {

// What run() must write to out0 (b may be nullptr: the copy form).
void referenceReduce(DType dt, Op op, const void* a, const void* b, void* out, size_t n,
                     uint32_t divisor);

// Bitwise equality, except that a NaN sum or product may carry either
// input's payload (reduce.h leaves that open; only max/min name the NaN).
::testing::AssertionResult sameElements(DType dt, Op op, bool hasB, const void* expected,
                                        const void* actual, size_t n);

// Bytes of random test values for a dtype: random bits for integers and
// 16-bit floats (so every encoding, NaNs included, turns up), and for
// float32/float64 a mix of ordinary values, small integers and specials.
std::vector<unsigned char> randomValues(DType dt, size_t n, uint64_t seed);

// Tests are instantiated for every instruction set; those this CPU cannot
// run show up as skipped.
inline constexpr detail::Isa kAllIsas[detail::kNumIsas] = {detail::Isa::Scalar, detail::Isa::Avx2,
                                                           detail::Isa::Avx512};
std::string isaParamName(const ::testing::TestParamInfo<detail::Isa>& info);

class IsaTest : public ::testing::TestWithParam<detail::Isa> {
 public:
  void runTask(const ReduceTask& task) const { detail::runWith(*table_, task); }
  const detail::KernelTable& table() const { return *table_; }

 protected:
  void SetUp() override {
    table_ = detail::tableFor(GetParam());
    if (table_ == nullptr) GTEST_SKIP() << detail::isaName(GetParam()) << " not supported here";
  }

 private:
  const detail::KernelTable* table_ = nullptr;
};

inline constexpr DType kAllDTypes[kNumDTypes] = {
    DType::Int8,   DType::Uint8,   DType::Int32,   DType::Uint32,  DType::Int64,
    DType::Uint64, DType::Float16, DType::Float32, DType::Float64, DType::Bfloat16};
inline constexpr Op kAllOps[kNumOps] = {Op::Sum, Op::Prod, Op::Max, Op::Min};

}  // namespace gyre::kernels::testing
