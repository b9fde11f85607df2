// Every dtype x op x instruction set against the reference, over counts that
// hit the vector body, the single-register loop and the tail, at aligned and
// misaligned addresses, with and without aliasing, out1 and the divisor.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/kernels/reference.h"

namespace gyre::kernels::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 2, 7, 15, 16, 17, 31, 33, 1000, 4099};
constexpr unsigned char kCanary = 0xa5;
constexpr size_t kGuardBytes = 64;

// A buffer of `offset` canary elements, then n elements, then (for outputs)
// a canary guard. Inputs end exactly at the data so ASan sees any over-read.
struct Buffer {
  Buffer(size_t n, size_t size, size_t offset, bool guard)
      : bytes((offset + n) * size + (guard ? kGuardBytes : 0), kCanary),
        start(offset * size),
        length(n * size) {}
  unsigned char* data() { return bytes.data() + start; }
  bool canariesIntact() const {
    for (size_t i = 0; i < bytes.size(); ++i) {
      if ((i < start || i >= start + length) && bytes[i] != kCanary) return false;
    }
    return true;
  }
  std::vector<unsigned char> bytes;
  size_t start;
  size_t length;
};

enum class Alias { None, Out0IsA, Out0IsB, Out1IsB };

struct Variant {
  const char* name;
  Alias alias;
  bool out1;
  uint32_t divisor;
};

constexpr Variant kVariants[] = {
    {"plain", Alias::None, false, 1},
    {"out1", Alias::None, true, 1},
    {"divide", Alias::None, false, 3},
    {"divide+out1", Alias::None, true, 7},
    {"out0=a", Alias::Out0IsA, false, 1},
    {"out0=a+divide+out1", Alias::Out0IsA, true, 2},
    {"out0=b+divide", Alias::Out0IsB, false, 5},
    {"out1=b", Alias::Out1IsB, true, 1},
};

using ReduceMatrix = IsaTest;

// hasB = false is the b == nullptr form; op is then irrelevant but kept.
void checkOne(const ReduceMatrix& test, DType dt, Op op, bool hasB, size_t n, size_t offset,
              const Variant& v, uint64_t seed) {
  const size_t size = dtypeSize(dt);
  const std::vector<unsigned char> av = randomValues(dt, n, seed);
  const std::vector<unsigned char> bv = randomValues(dt, n, seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<unsigned char> expected(n * size + 1);
  referenceReduce(dt, op, av.data(), hasB ? bv.data() : nullptr, expected.data(), n, v.divisor);

  Buffer a(n, size, offset, false), b(n, size, offset, false);
  Buffer out0(n, size, offset, true), out1(n, size, offset, true);
  if (n > 0) {
    std::memcpy(a.data(), av.data(), n * size);
    std::memcpy(b.data(), bv.data(), n * size);
  }
  ReduceTask task;
  task.dtype = dt;
  task.op = op;
  task.a = a.data();
  task.b = hasB ? b.data() : nullptr;
  task.out0 = v.alias == Alias::Out0IsA   ? a.data()
              : v.alias == Alias::Out0IsB ? b.data()
                                          : out0.data();
  task.out1 = !v.out1 ? nullptr : v.alias == Alias::Out1IsB ? b.data() : out1.data();
  task.count = n;
  task.divisor = v.divisor;
  test.runTask(task);

  ASSERT_TRUE(sameElements(dt, op, hasB, expected.data(), task.out0, n)) << "out0";
  if (task.out1 != nullptr) {
    ASSERT_TRUE(sameElements(dt, op, hasB, expected.data(), task.out1, n)) << "out1";
  }
  // Inputs that are not outputs stay as they were; nothing outside is touched.
  if (task.out0 != a.data() && task.out1 != a.data()) {
    ASSERT_TRUE(n == 0 || std::memcmp(a.data(), av.data(), n * size) == 0) << "a changed";
  }
  if (task.out0 != b.data() && task.out1 != b.data()) {
    ASSERT_TRUE(n == 0 || std::memcmp(b.data(), bv.data(), n * size) == 0) << "b changed";
  }
  for (const Buffer* buf : {&a, &b, &out0, &out1}) {
    ASSERT_TRUE(buf->canariesIntact()) << "wrote outside its elements";
  }
}

TEST_P(ReduceMatrix, MatchesReference) {
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    for (int column = 0; column <= kNumOps; ++column) {
      const bool hasB = column < kNumOps;
      const Op op = hasB ? kAllOps[column] : Op::Sum;
      for (size_t n : kCounts) {
        for (size_t offset : {0, 1}) {
          for (const Variant& v : kVariants) {
            if (!hasB && (v.alias == Alias::Out0IsB || v.alias == Alias::Out1IsB)) continue;
            SCOPED_TRACE(::testing::Message()
                         << dtypeName(dt) << " " << (hasB ? opName(op) : "copy-form") << " n=" << n
                         << " offset=" << offset << " " << v.name);
            checkOne(*this, dt, op, hasB, n, offset, v, ++seed);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Divisors from 2 to the largest uint32 (which float32 rounds to 2^32), and
// 0, which like 1 means no divide.
TEST_P(ReduceMatrix, EveryDivisorForEveryDtype) {
  constexpr uint32_t kDivisors[] = {0, 2, 3, 5, 8, 255, 1000, 65535, (1u << 24) + 1, 0xffffffffu};
  uint64_t seed = 1000;
  for (DType dt : kAllDTypes) {
    for (uint32_t d : kDivisors) {
      for (bool hasB : {true, false}) {
        SCOPED_TRACE(::testing::Message() << dtypeName(dt) << " divisor=" << d << " b=" << hasB);
        checkOne(*this, dt, Op::Sum, hasB, 67, 0, Variant{"divisor", Alias::None, false, d},
                 ++seed);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, ReduceMatrix, ::testing::ValuesIn(kAllIsas), isaParamName);

// runAll against a chain of run()s, the bits the direct_multi plans must
// give (the host's chain of pairwise reductions): every dtype and op, one to
// five inputs, counts across its chunks, the divisor, and an output that is
// one of the inputs.
TEST(ReduceAll, GivesTheBitsOfAChainOfPairwiseReductions) {
  uint64_t seed = 7;
  for (DType dt : kAllDTypes) {
    const size_t size = dtypeSize(dt);
    for (Op op : kAllOps) {
      for (int nin : {1, 2, 3, 5}) {
        for (size_t n : {size_t{1}, size_t{13}, size_t{40000}}) {
          for (uint32_t divisor : {1u, 3u}) {
            SCOPED_TRACE(::testing::Message() << dtypeName(dt) << " " << opName(op) << " nin=" << nin << " n=" << n
                                              << " divisor=" << divisor);
            std::vector<std::vector<unsigned char>> in;
            for (int k = 0; k < nin; ++k) in.push_back(randomValues(dt, n, ++seed));
            std::vector<unsigned char> want(n * size);
            ReduceTask t;
            t.dtype = dt;
            t.op = op;
            t.count = n;
            t.out0 = want.data();
            t.a = in[0].data();
            if (nin == 1) {
              t.divisor = divisor;
              run(t);
            }
            for (int k = 1; k < nin; ++k) {
              t.b = in[static_cast<size_t>(k)].data();
              t.divisor = k == nin - 1 ? divisor : 1;
              run(t);
              t.a = want.data();
            }
            std::vector<unsigned char> other(n * size);
            ReduceAllTask all;
            all.dtype = dt;
            all.op = op;
            all.count = n;
            all.divisor = divisor;
            all.nin = nin;
            for (int k = 0; k < nin; ++k) all.in[k] = in[static_cast<size_t>(k)].data();
            all.nout = 2;
            all.out[0] = other.data();
            all.out[1] = in.back().data();  // in place over the last input
            runAll(all);
            ASSERT_EQ(0, std::memcmp(want.data(), other.data(), want.size()));
            ASSERT_EQ(0, std::memcmp(want.data(), in.back().data(), want.size()));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace gyre::kernels::testing
