// kernels/common/arith.h is the GPU kernels' arithmetic. No GPU runs in CI,
// so the same functions are checked here against the CPU kernels of every
// instruction set, element by element, for every dtype, op and divide: what
// the GPU computes per element is what the CPU computes, bit for bit (up to
// the NaN payload of a sum or product, which reduce.h leaves open).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/common/formats.h"
#include "kernels/cpu/scale.h"
#include "tests/kernels/reference.h"

namespace gyre::kernels::testing {
namespace {

using SharedArithmetic = IsaTest;

// What a GPU kernel writes for (a, b): arith::reduceOne per element.
std::vector<unsigned char> elementwise(DType dt, Op op, bool hasB, const void* a, const void* b, size_t n,
                                       uint32_t divisor) {
  std::vector<unsigned char> out(n * dtypeSize(dt));
  arith::withFormat(dt, [&](auto s) {
    using S = decltype(s);
    using T = typename S::Elem;
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    T* o = reinterpret_cast<T*>(out.data());
    arith::withOp(op, [&](auto tag) {
      constexpr int kOp = decltype(tag)::value;
      for (size_t i = 0; i < n; ++i) {
        if (!hasB) {
          o[i] = divisor > 1 ? arith::reduceOne<S, arith::kCopy, true>(x[i], T{}, divisor)
                             : arith::reduceOne<S, arith::kCopy, false>(x[i], T{}, divisor);
        } else {
          o[i] = divisor > 1 ? arith::reduceOne<S, kOp, true>(x[i], y[i], divisor)
                             : arith::reduceOne<S, kOp, false>(x[i], y[i], divisor);
        }
      }
    });
  });
  return out;
}

TEST_P(SharedArithmetic, EveryDtypeOpAndDivideMatchesTheCpuKernels) {
  constexpr size_t n = 1031;  // the unrolled body, the one-register loop and a tail
  uint64_t seed = 7;
  for (DType dt : kAllDTypes) {
    const auto a = randomValues(dt, n, ++seed);
    const auto b = randomValues(dt, n, ++seed);
    for (Op op : kAllOps) {
      for (bool hasB : {true, false}) {
        for (uint32_t divisor : {1u, 3u, 8u}) {
          std::vector<unsigned char> out(a.size());
          ReduceTask task;
          task.dtype = dt;
          task.op = op;
          task.a = a.data();
          task.b = hasB ? b.data() : nullptr;
          task.out0 = out.data();
          task.count = n;
          task.divisor = divisor;
          runTask(task);
          const auto expected = elementwise(dt, op, hasB, a.data(), b.data(), n, divisor);
          EXPECT_TRUE(sameElements(dt, op, hasB, expected.data(), out.data(), n))
              << dtypeName(dt) << " " << opName(op) << (hasB ? "" : " (copy)") << " divisor " << divisor;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SharedArithmetic, ::testing::ValuesIn(kAllIsas), isaParamName);

TEST(SharedArithmeticScale, PreMulSumScalingMatchesTheCpuKernel) {
  constexpr size_t n = 517;
  uint64_t seed = 100;
  for (DType dt : kAllDTypes) {
    const auto x = randomValues(dt, n, ++seed);
    const auto s = randomValues(dt, 4, ++seed);  // its first element is the scalar
    std::vector<unsigned char> got(x.size()), want(x.size());
    scale(dt, got.data(), x.data(), n, s.data());
    arith::withFormat(dt, [&](auto f) {
      using S = decltype(f);
      using T = typename S::Elem;
      T sv;
      std::memcpy(&sv, s.data(), sizeof(T));
      for (size_t i = 0; i < n; ++i) {
        T xi;
        std::memcpy(&xi, x.data() + i * sizeof(T), sizeof(T));
        const T yi = arith::scaleOne<S>(xi, sv);
        std::memcpy(want.data() + i * sizeof(T), &yi, sizeof(T));
      }
    });
    EXPECT_TRUE(sameElements(dt, Op::Prod, true, want.data(), got.data(), n)) << dtypeName(dt);
  }
}

}  // namespace
}  // namespace gyre::kernels::testing
