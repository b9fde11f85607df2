// Hand-written expectations for the corners of reduce.h (NaN choice, signed
// zeros, infinities, wrapping, truncating divides, the float16 divide taking
// the rounded sum), plus every float16/bfloat16 encoding as an input.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/half.h"
#include "tests/kernels/reference.h"

namespace gyre::kernels::testing {
namespace {

using SpecialValues = IsaTest;

// Runs the pairs (a[k], b[k]) repeated across a buffer whose length puts each
// pair in the unrolled body, the one-register loop and the tail, and checks
// that every copy of a pair got the same bits; returns the first copy.
template <class T>
std::vector<T> apply(const IsaTest& test, DType dt, Op op, const std::vector<T>& a,
                     const std::vector<T>& b, uint32_t divisor = 1) {
  const size_t k = a.size();
  const size_t n = 13 * k + 5;
  std::vector<T> av(n), bv(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    av[i] = a[i % k];
    bv[i] = b.empty() ? T{} : b[i % k];
  }
  ReduceTask task;
  task.dtype = dt;
  task.op = op;
  task.a = av.data();
  task.b = b.empty() ? nullptr : bv.data();
  task.out0 = out.data();
  task.count = n;
  task.divisor = divisor;
  test.runTask(task);
  for (size_t i = k; i < n; ++i) {
    EXPECT_EQ(std::memcmp(&out[i], &out[i % k], sizeof(T)), 0) << "element " << i;
  }
  out.resize(k);
  return out;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float f32(uint32_t b) { return std::bit_cast<float>(b); }
uint64_t bits(double f) { return std::bit_cast<uint64_t>(f); }
double f64(uint64_t b) { return std::bit_cast<double>(b); }

TEST_P(SpecialValues, Float32MaxMinPickAnInput) {
  const float inf = INFINITY;
  // a, b, max, min (as bits: the NaN payloads and zero signs matter)
  const uint32_t cases[][4] = {
      {bits(-0.0f), bits(0.0f), bits(-0.0f), bits(-0.0f)},
      {bits(0.0f), bits(-0.0f), bits(0.0f), bits(0.0f)},
      {0x7fc00001, 0x7fc00002, 0x7fc00001, 0x7fc00001},  // both NaN: a's
      {bits(1.0f), 0xffc00002, 0xffc00002, 0xffc00002},  // b's NaN beats a number
      {0x7fc00001, bits(1.0f), 0x7fc00001, 0x7fc00001},
      {0x7f800001, bits(1.0f), 0x7f800001, 0x7f800001},  // signaling, passed through
      {bits(-inf), 0x7fc00000, 0x7fc00000, 0x7fc00000},
      {bits(inf), bits(-inf), bits(inf), bits(-inf)},
      {bits(1.0f), bits(2.0f), bits(2.0f), bits(1.0f)},
      {bits(-3.0f), bits(-2.0f), bits(-2.0f), bits(-3.0f)},
      {0x00000001, 0x80000001, 0x00000001, 0x80000001},  // subnormals compare as values
  };
  std::vector<float> a, b;
  for (const auto& c : cases) {
    a.push_back(f32(c[0]));
    b.push_back(f32(c[1]));
  }
  const std::vector<float> mx = apply(*this, DType::Float32, Op::Max, a, b);
  const std::vector<float> mn = apply(*this, DType::Float32, Op::Min, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(bits(mx[i]), cases[i][2]) << "max case " << i;
    EXPECT_EQ(bits(mn[i]), cases[i][3]) << "min case " << i;
  }
}

TEST_P(SpecialValues, Float64MaxMinPickAnInput) {
  const uint64_t nan1 = 0x7ff8000000000001, nan2 = 0xfff8000000000002;
  const uint64_t cases[][4] = {
      {bits(-0.0), bits(0.0), bits(-0.0), bits(-0.0)},
      {bits(0.0), bits(-0.0), bits(0.0), bits(0.0)},
      {nan1, nan2, nan1, nan1},
      {bits(1.0), nan2, nan2, nan2},
      {bits(INFINITY * 1.0), bits(-INFINITY * 1.0), bits(INFINITY * 1.0), bits(-INFINITY * 1.0)},
      {bits(1.0), bits(2.0), bits(2.0), bits(1.0)},
  };
  std::vector<double> a, b;
  for (const auto& c : cases) {
    a.push_back(f64(c[0]));
    b.push_back(f64(c[1]));
  }
  const std::vector<double> mx = apply(*this, DType::Float64, Op::Max, a, b);
  const std::vector<double> mn = apply(*this, DType::Float64, Op::Min, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(bits(mx[i]), cases[i][2]) << "max case " << i;
    EXPECT_EQ(bits(mn[i]), cases[i][3]) << "min case " << i;
  }
}

TEST_P(SpecialValues, FloatArithmeticCorners) {
  const float inf = INFINITY, tiny = std::numeric_limits<float>::denorm_min();
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> a = {inf, -0.0f, -0.0f, 1.0f, big, tiny, 0.0f, -0.0f};
  const std::vector<float> b = {-inf, -0.0f, 0.0f, NAN, big, tiny, inf, 5.0f};
  const std::vector<float> sum = apply(*this, DType::Float32, Op::Sum, a, b);
  EXPECT_TRUE(std::isnan(sum[0]));
  EXPECT_EQ(bits(sum[1]), bits(-0.0f));
  EXPECT_EQ(bits(sum[2]), bits(0.0f));
  EXPECT_TRUE(std::isnan(sum[3]));
  EXPECT_EQ(sum[4], inf);
  EXPECT_EQ(sum[5], 2 * tiny);  // subnormals are not flushed
  const std::vector<float> prod = apply(*this, DType::Float32, Op::Prod, a, b);
  EXPECT_TRUE(std::isnan(prod[6]));
  EXPECT_EQ(bits(prod[7]), bits(-0.0f));
  EXPECT_EQ(prod[4], inf);
}

TEST_P(SpecialValues, SixteenBitFloatCorners) {
  // float16: a, b, op, expected
  struct Case {
    uint16_t a, b;
    Op op;
    uint16_t want;
  };
  const Case half[] = {
      {0x8000, 0x0000, Op::Max, 0x8000},  {0x0000, 0x8000, Op::Max, 0x0000},
      {0x8000, 0x0000, Op::Min, 0x8000},  {0x7e01, 0x7e02, Op::Max, 0x7e01},
      {0x3c00, 0xfe02, Op::Min, 0xfe02},  {0x7d00, 0x3c00, Op::Max, 0x7f00},  // quieted
      {0x7bff, 0x7bff, Op::Sum, 0x7c00},  {0x0001, 0x0001, Op::Sum, 0x0002},
      {0x3c00, 0x1000, Op::Sum, 0x3c00},  // 1 + 2^-11: tie to even
      {0x0001, 0x3800, Op::Prod, 0x0000}, {0x0003, 0x3800, Op::Prod, 0x0002},
  };
  const Case bf16[] = {
      {0x8000, 0x0000, Op::Max, 0x8000}, {0x7f81, 0x3f80, Op::Max, 0x7fc1},
      {0x3f80, 0x3b80, Op::Sum, 0x3f80}, {0x7f7f, 0x7f7f, Op::Sum, 0x7f80},
      {0x3f80, 0x3bc0, Op::Sum, 0x3f81}, {0x0001, 0x3f00, Op::Prod, 0x0000},
  };
  for (const Case& c : half) {
    EXPECT_EQ(apply<uint16_t>(*this, DType::Float16, c.op, {c.a}, {c.b})[0], c.want)
        << std::hex << c.a << " " << opName(c.op) << " " << c.b;
  }
  for (const Case& c : bf16) {
    EXPECT_EQ(apply<uint16_t>(*this, DType::Bfloat16, c.op, {c.a}, {c.b})[0], c.want)
        << std::hex << c.a << " " << opName(c.op) << " " << c.b;
  }
}

TEST_P(SpecialValues, IntegersWrapAndDivideTowardZero) {
  using I8 = std::vector<int8_t>;
  EXPECT_EQ(apply<int8_t>(*this, DType::Int8, Op::Sum, {127, -128}, {1, -1}), (I8{-128, 127}));
  EXPECT_EQ(apply<int8_t>(*this, DType::Int8, Op::Prod, {-128, 16}, {-1, 8}), (I8{-128, -128}));
  EXPECT_EQ(apply<uint8_t>(*this, DType::Uint8, Op::Prod, {16, 255}, {16, 255}),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(apply<int8_t>(*this, DType::Int8, Op::Sum, {-7, 7, -128, -1, 127}, {}, 2),
            (I8{-3, 3, -64, 0, 63}));
  const int32_t i32min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(apply<int32_t>(*this, DType::Int32, Op::Prod, {i32min}, {-1}),
            std::vector<int32_t>{i32min});
  EXPECT_EQ(apply<int32_t>(*this, DType::Int32, Op::Sum, {i32min, -5, 5}, {}, 3),
            (std::vector<int32_t>{-715827882, -1, 1}));
  const int64_t i64min = std::numeric_limits<int64_t>::min();
  const int64_t i64max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(apply<int64_t>(*this, DType::Int64, Op::Sum, {i64max}, {1}),
            std::vector<int64_t>{i64min});
  EXPECT_EQ(apply<int64_t>(*this, DType::Int64, Op::Prod, {0x100000001ll}, {0x100000001ll}),
            std::vector<int64_t>{0x200000001ll});
  EXPECT_EQ(apply<int64_t>(*this, DType::Int64, Op::Sum, {i64min}, {}, 0xffffffffu),
            std::vector<int64_t>{-2147483648ll});
  EXPECT_EQ(apply<uint64_t>(*this, DType::Uint64, Op::Sum, {~0ull}, {}, 0xffffffffu),
            std::vector<uint64_t>{4294967297ull});
  EXPECT_EQ(apply<uint64_t>(*this, DType::Uint64, Op::Max, {1ull << 63, 5}, {5, 1ull << 63}),
            (std::vector<uint64_t>{1ull << 63, 1ull << 63}));
  EXPECT_EQ(apply<int64_t>(*this, DType::Int64, Op::Min, {-1, 5}, {5, -1}),
            (std::vector<int64_t>{-1, -1}));
}

TEST_P(SpecialValues, FloatDividesRoundOnceFromTheStoredSum) {
  EXPECT_EQ(bits(apply<float>(*this, DType::Float32, Op::Sum, {1.0f}, {}, 3)[0]), 0x3eaaaaabu);
  EXPECT_EQ(bits(apply<double>(*this, DType::Float64, Op::Sum, {0.5}, {0.5}, 3)[0]),
            bits(1.0 / 3.0));
  EXPECT_EQ(apply<uint16_t>(*this, DType::Float16, Op::Sum, {0x3c00}, {}, 3)[0], 0x3555);
  EXPECT_EQ(apply<uint16_t>(*this, DType::Bfloat16, Op::Sum, {0x3f80}, {}, 3)[0], 0x3eab);
  // 1 + 3*2^-12 rounds to 0x3c01 in float16 first; 0x3c01 / 3 is 0x3557.
  // Dividing the unrounded float32 sum would give 0x3556.
  EXPECT_EQ(apply<uint16_t>(*this, DType::Float16, Op::Sum, {0x3c00}, {0x1200}, 3)[0], 0x3557);
}

// Every float16/bfloat16 encoding as a, against assorted b values (ordinary,
// extreme, NaN) and a shuffle of all encodings, for every op and divide.
TEST_P(SpecialValues, EverySixteenBitEncoding) {
  struct Format {
    DType dt;
    std::vector<uint16_t> bs;
  };
  const Format formats[] = {
      {DType::Float16,
       {0x0000, 0x8000, 0x3c00, 0xbe00, 0x7bff, 0x0001, 0x3c01, 0x7c00, 0xfc00, 0x7e00, 0x7d00}},
      {DType::Bfloat16,
       {0x0000, 0x8000, 0x3f80, 0xbfc0, 0x7f7f, 0x0001, 0x3f81, 0x7f80, 0xff80, 0x7fc0, 0x7fa0}},
  };
  std::vector<uint16_t> all(0x10000), shuffled(0x10000), expected(0x10000), out(0x10000),
      b(0x10000);
  std::iota(all.begin(), all.end(), 0);
  shuffled = all;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  for (const Format& f : formats) {
    for (size_t which = 0; which <= f.bs.size() + 1; ++which) {
      // which < bs.size(): a constant b; == bs.size(): shuffled; last: no b.
      const bool hasB = which <= f.bs.size();
      if (which < f.bs.size()) std::fill(b.begin(), b.end(), f.bs[which]);
      if (which == f.bs.size()) b = shuffled;
      for (Op op : kAllOps) {
        if (!hasB && op != Op::Sum) continue;
        for (uint32_t divisor : {1u, 3u}) {
          ReduceTask task;
          task.dtype = f.dt;
          task.op = op;
          task.a = all.data();
          task.b = hasB ? b.data() : nullptr;
          task.out0 = out.data();
          task.count = all.size();
          task.divisor = divisor;
          runTask(task);
          referenceReduce(f.dt, op, all.data(), task.b, expected.data(), all.size(), divisor);
          ASSERT_TRUE(sameElements(f.dt, op, hasB, expected.data(), out.data(), all.size()))
              << dtypeName(f.dt) << " " << opName(op) << " b#" << which << " divisor " << divisor;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SpecialValues, ::testing::ValuesIn(kAllIsas), isaParamName);

}  // namespace
}  // namespace gyre::kernels::testing
