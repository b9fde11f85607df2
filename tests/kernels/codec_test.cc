// The compression codecs on the CPU (kernels/cpu/codec.h): message sizes,
// the rounding and range of int8 min-max, the mean and bits of 1-bit sign,
// NaN and flat chunks, every input type, counts around chunk and word
// boundaries, the decoders' accumulate form, and error feedback's
// invariant (what the message carries plus the new residual is the input
// plus the old one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/common/arith.h"
#include "kernels/common/codec.h"
#include "kernels/cpu/codec.h"
#include "kernels/cpu/codec_isa.h"
#include "tests/kernels/reference.h"

namespace gyre::kernels::testing {
namespace {

using codec::kChunk;

const std::vector<size_t> kCounts = {0, 1, 31, 32, 33, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk + 77};

std::vector<float> randomFloats(size_t n, unsigned seed, float scale = 10.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.5f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// The input in `dtype`'s storage, and the float values it holds.
struct Input {
  std::vector<unsigned char> bytes;
  std::vector<float> values;
};
Input asType(DType t, const std::vector<float>& v) {
  Input in;
  in.values.resize(v.size());
  if (t == DType::Float32) {
    in.bytes.resize(v.size() * 4);
    if (!v.empty()) std::memcpy(in.bytes.data(), v.data(), in.bytes.size());  // no null memcpy (UBSan)
    in.values = v;
    return in;
  }
  in.bytes.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = t == DType::Float16 ? arith::floatToHalf(v[i]) : arith::floatToBfloat16(v[i]);
    std::memcpy(in.bytes.data() + 2 * i, &h, 2);
    in.values[i] = t == DType::Float16 ? arith::halfToFloat(h) : arith::bfloat16ToFloat(h);
  }
  return in;
}

codec::Range rangeOf(const std::vector<unsigned char>& msg, size_t c) {
  codec::Range r;
  std::memcpy(&r, msg.data() + c * sizeof(r), sizeof(r));
  return r;
}

TEST(Codecs, MessageSizes) {
  EXPECT_EQ(codec::minMaxBytes(0), 0u);
  EXPECT_EQ(codec::minMaxBytes(1), 8u + 1u);
  EXPECT_EQ(codec::minMaxBytes(kChunk + 1), 16u + kChunk + 1);
  EXPECT_EQ(codec::signBytes(1), 4u + 4u);
  EXPECT_EQ(codec::signBytes(kChunk), 4u + kChunk / 8);
  EXPECT_EQ(codec::signBytes(kChunk + 33), 8u + (kChunk + 64) / 8);
  EXPECT_TRUE(codecTakes(DType::Float32) && codecTakes(DType::Float16) && codecTakes(DType::Bfloat16));
  EXPECT_FALSE(codecTakes(DType::Float64) || codecTakes(DType::Int32));
}

TEST(Codecs, MinMaxKeepsEveryChunksRangeAndRoundsToTheNearestCode) {
  for (DType t : {DType::Float32, DType::Float16, DType::Bfloat16})
    for (size_t n : kCounts) {
      const Input in = asType(t, randomFloats(n, static_cast<unsigned>(n) + 7));
      std::vector<unsigned char> msg(codec::minMaxBytes(n));
      quantizeMinMax(t, in.bytes.data(), n, msg.data(), nullptr);
      std::vector<float> out(n);
      dequantizeMinMax(msg.data(), n, out.data(), false);
      for (size_t c = 0; c < codec::chunks(n); ++c) {
        const codec::Range r = rangeOf(msg, c);
        float lo = INFINITY, hi = -INFINITY;
        for (size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) lo = std::min(lo, in.values[i]), hi = std::max(hi, in.values[i]);
        ASSERT_EQ(r.lo, lo) << n << " chunk " << c;
        ASSERT_EQ(r.hi, hi) << n << " chunk " << c;
        const float step = (hi - lo) / 255.0f;
        for (size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i)
          ASSERT_LE(std::fabs(out[i] - in.values[i]), step * 0.5f * 1.001f + 1e-6f)
              << "element " << i << " of " << n << ", type " << static_cast<int>(t);
      }
      // The extremes are exact: code 0 is lo, code 255 is hi (to rounding).
      if (n) {
        const auto lo = std::min_element(in.values.begin(), in.values.end()) - in.values.begin();
        EXPECT_EQ(msg[codec::chunks(n) * 8 + static_cast<size_t>(lo)], 0) << n;
      }
    }
}

TEST(Codecs, MinMaxTiesGoToEvenAndFlatOrEmptyChunksAreExact) {
  // lo 0, hi 255: the step is 1, and x.5 ties go to the even code.
  std::vector<float> v = {0.0f, 255.0f, 2.5f, 3.5f, 4.4f, 4.6f};
  std::vector<unsigned char> msg(codec::minMaxBytes(v.size()));
  quantizeMinMax(DType::Float32, v.data(), v.size(), msg.data(), nullptr);
  const uint8_t* codes = msg.data() + 8;
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 255);
  EXPECT_EQ(codes[2], 2);
  EXPECT_EQ(codes[3], 4);
  EXPECT_EQ(codes[4], 4);
  EXPECT_EQ(codes[5], 5);
  // A flat chunk decodes exactly; NaNs are left out of the range and code 0.
  std::vector<float> flat(100, -3.25f);
  flat[7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<unsigned char> m2(codec::minMaxBytes(flat.size()));
  quantizeMinMax(DType::Float32, flat.data(), flat.size(), m2.data(), nullptr);
  EXPECT_EQ(rangeOf(m2, 0).lo, -3.25f);
  EXPECT_EQ(rangeOf(m2, 0).hi, -3.25f);
  std::vector<float> out(flat.size());
  dequantizeMinMax(m2.data(), flat.size(), out.data(), false);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], -3.25f) << i;
  // A chunk of NaNs only is [0, 0]; -0.0 and 0.0 ends are +0.0.
  std::vector<float> nans(5, std::numeric_limits<float>::quiet_NaN()), zeros = {-0.0f, 0.0f, -0.0f};
  std::vector<unsigned char> m3(codec::minMaxBytes(5)), m4(codec::minMaxBytes(3));
  quantizeMinMax(DType::Float32, nans.data(), 5, m3.data(), nullptr);
  quantizeMinMax(DType::Float32, zeros.data(), 3, m4.data(), nullptr);
  EXPECT_EQ(rangeOf(m3, 0).lo, 0.0f);
  EXPECT_FALSE(std::signbit(rangeOf(m4, 0).lo));
  EXPECT_FALSE(std::signbit(rangeOf(m4, 0).hi));
}

TEST(Codecs, SignsCarryEachElementsSignAndTheChunksMeanMagnitude) {
  for (DType t : {DType::Float32, DType::Float16, DType::Bfloat16})
    for (size_t n : kCounts) {
      const Input in = asType(t, randomFloats(n, static_cast<unsigned>(n) + 11));
      std::vector<unsigned char> msg(codec::signBytes(n));
      packSigns(t, in.bytes.data(), n, msg.data(), nullptr);
      std::vector<float> out(n);
      unpackSigns(msg.data(), n, out.data(), false);
      for (size_t c = 0; c < codec::chunks(n); ++c) {
        const size_t end = std::min(n, (c + 1) * kChunk);
        double sum = 0;
        for (size_t i = c * kChunk; i < end; ++i) sum += std::fabs(in.values[i]);
        float scale;
        std::memcpy(&scale, msg.data() + 4 * c, 4);
        EXPECT_NEAR(scale, sum / double(end - c * kChunk), 1e-4 * (1 + sum / double(end - c * kChunk))) << n;
        for (size_t i = c * kChunk; i < end; ++i)
          ASSERT_EQ(out[i], in.values[i] < 0 ? -scale : scale) << "element " << i << " of " << n;
      }
      // Bits past the end of the last word are 0.
      if (n % 32) {
        uint32_t last;
        std::memcpy(&last, msg.data() + codec::chunks(n) * 4 + (codec::signWords(n) - 1) * 4, 4);
        EXPECT_EQ(last >> (n % 32), 0u) << n;
      }
    }
}

TEST(Codecs, DecodersAccumulateInFloat32) {
  const size_t n = kChunk + 5;
  const std::vector<float> v = randomFloats(n, 3);
  std::vector<unsigned char> mm(codec::minMaxBytes(n)), sg(codec::signBytes(n));
  quantizeMinMax(DType::Float32, v.data(), n, mm.data(), nullptr);
  packSigns(DType::Float32, v.data(), n, sg.data(), nullptr);
  std::vector<float> once(n), acc(n, 1.5f), signs(n), sacc(n, -2.0f);
  dequantizeMinMax(mm.data(), n, once.data(), false);
  dequantizeMinMax(mm.data(), n, acc.data(), true);
  unpackSigns(sg.data(), n, signs.data(), false);
  unpackSigns(sg.data(), n, sacc.data(), true);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(acc[i], 1.5f + once[i]) << i;
    ASSERT_EQ(sacc[i], -2.0f + signs[i]) << i;
  }
}

// What each call sends plus its new residual is its input plus the old
// residual, to one rounding; over calls, the residual stays bounded.
TEST(Codecs, ErrorFeedbackLosesNothingOverCalls) {
  for (bool oneBit : {false, true})
    for (DType t : {DType::Float32, DType::Bfloat16}) {
      const size_t n = 2 * kChunk + 9;
      std::vector<float> residual(n, 0.0f), sentTotal(n, 0.0f), inputTotal(n, 0.0f);
      for (int call = 0; call < 20; ++call) {
        const Input in = asType(t, randomFloats(n, 100 + call, 1.0f));
        const std::vector<float> before = residual;
        std::vector<unsigned char> msg(oneBit ? codec::signBytes(n) : codec::minMaxBytes(n));
        std::vector<float> sent(n);
        if (oneBit) {
          packSigns(t, in.bytes.data(), n, msg.data(), residual.data());
          unpackSigns(msg.data(), n, sent.data(), false);
        } else {
          quantizeMinMax(t, in.bytes.data(), n, msg.data(), residual.data());
          dequantizeMinMax(msg.data(), n, sent.data(), false);
        }
        for (size_t i = 0; i < n; ++i) {
          const float v = in.values[i] + before[i];
          ASSERT_NEAR(sent[i] + residual[i], v, 1e-6f * (1 + std::fabs(v)))
              << (oneBit ? "1-bit" : "int8") << " call " << call << " element " << i;
          sentTotal[i] += sent[i];
          inputTotal[i] += in.values[i];
        }
      }
      // Everything sent, plus what is still held back, is everything given.
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(sentTotal[i] + residual[i], inputTotal[i], 1e-3f * (1 + std::fabs(inputTotal[i]))) << i;
    }
}

TEST(Codecs, OtherTypesAreRefused) {
  std::vector<double> d(4, 1.0);
  std::vector<unsigned char> msg(codec::minMaxBytes(4));
  EXPECT_THROW(quantizeMinMax(DType::Float64, d.data(), 4, msg.data(), nullptr), std::exception);
  EXPECT_THROW(packSigns(DType::Int32, d.data(), 4, msg.data(), nullptr), std::exception);
}

// Every instruction set's codecs make the scalar code's bytes: the
// messages, the residuals and the decoded floats (plain and accumulated),
// for every input type, counts around vectors, words and chunks, inputs
// with NaNs, infinities, signed zeros, flat chunks and huge ranges, with
// and without a residual.
class CodecIsas : public ::testing::TestWithParam<detail::Isa> {};

TEST_P(CodecIsas, MakeTheScalarCodesBytes) {
  const detail::CodecTable* t = detail::codecsFor(GetParam());
  if (!t) GTEST_SKIP() << "this CPU cannot run " << detail::isaName(GetParam());
  const detail::CodecTable& ref = *detail::codecsFor(detail::Isa::Scalar);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<size_t> counts = {0, 1, 7, 8, 9, 31, 32, 33, 255, 256, 257, kChunk - 1, kChunk, kChunk + 9,
                                      2 * kChunk + 40, 3 * kChunk + 77};
  for (int pattern = 0; pattern < 4; ++pattern)
    for (size_t n : counts)
      for (DType dt : {DType::Float32, DType::Float16, DType::Bfloat16}) {
        std::vector<float> v = randomFloats(n, static_cast<unsigned>(n * 7 + pattern), pattern == 3 ? 1e30f : 10.0f);
        if (pattern == 1)  // specials sprinkled in
          for (size_t i = 0; i < n; i += 13) v[i] = (i / 13) % 4 == 0 ? nan : (i / 13) % 4 == 1 ? -0.0f : (i / 13) % 4 == 2 ? inf : -inf;
        if (pattern == 2)  // flat chunks, and some all-NaN ones
          for (size_t i = 0; i < n; ++i) v[i] = (i / kChunk) % 2 ? nan : 3.0f;
        const Input in = asType(dt, v);
        const codec::Input type = dt == DType::Float32 ? codec::kF32 : dt == DType::Float16 ? codec::kF16 : codec::kBf16;
        const std::string what = std::string(detail::isaName(GetParam())) + ", n " + std::to_string(n) +
                                 ", type " + std::to_string(int(dt)) + ", pattern " + std::to_string(pattern);
        for (bool withResidual : {false, true})
          for (int codecKind = 0; codecKind < 2; ++codecKind) {
            const size_t bytes = codecKind ? codec::signBytes(n) : codec::minMaxBytes(n);
            std::vector<unsigned char> want(bytes, 0xEE), got(bytes, 0xEE);
            std::vector<float> rWant = randomFloats(n, 99, 0.5f), rGot = rWant;
            float* rw = withResidual ? rWant.data() : nullptr;
            float* rg = withResidual ? rGot.data() : nullptr;
            (codecKind ? ref.packSigns : ref.quantizeMinMax)(type, in.bytes.data(), n, want.data(), rw);
            (codecKind ? t->packSigns : t->quantizeMinMax)(type, in.bytes.data(), n, got.data(), rg);
            const std::string w = what + (codecKind ? ", 1-bit" : ", int8") + (withResidual ? ", residual" : "");
            ASSERT_EQ(0, bytes ? std::memcmp(want.data(), got.data(), bytes) : 0) << "message: " << w;  // (UBSan: no null memcmp)
            ASSERT_EQ(0, n ? std::memcmp(rWant.data(), rGot.data(), n * sizeof(float)) : 0) << "residual: " << w;
            for (bool accumulate : {false, true}) {
              std::vector<float> dWant = randomFloats(n, 5, 1.0f), dGot = dWant;
              (codecKind ? ref.unpackSigns : ref.dequantizeMinMax)(want.data(), n, dWant.data(), accumulate);
              (codecKind ? t->unpackSigns : t->dequantizeMinMax)(want.data(), n, dGot.data(), accumulate);
              ASSERT_EQ(0, n ? std::memcmp(dWant.data(), dGot.data(), n * sizeof(float)) : 0)
                  << "decoded" << (accumulate ? " (accumulated): " : ": ") << w;
            }
          }
      }
}

INSTANTIATE_TEST_SUITE_P(Isas, CodecIsas, ::testing::ValuesIn(kAllIsas), isaParamName);

}  // namespace
}  // namespace gyre::kernels::testing
