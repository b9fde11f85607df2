// The compression codecs on the CPU (kernels/cpu/codec.h): message sizes,
// the rounding and range of int8 min-max, the mean and bits of 1-bit sign,
// NaN and flat chunks, every input type, counts around chunk and word
// boundaries, the decoders' accumulate form, and error feedback's
// invariant (what the message carries plus the new residual is the input
// plus the old one); then the one interface over every wire format (none,
// fp16, bf16, int8, 1-bit: encode, decode into each type, widen, divideBy)
// against element-by-element references, and every instruction set's
// tables against the scalar code's bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/arith.h"
#include "kernels/common/codec.h"
#include "kernels/cpu/codec.h"
#include "kernels/cpu/codec_isa.h"
#include "tests/kernels/reference.h"

#include "base/error.h"

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

// ---- One interface over every wire format (encode, decode, widen) ----------

constexpr Codec kAllCodecs[] = {Codec::None, Codec::Fp16, Codec::Bf16, Codec::Int8, Codec::OneBit};
constexpr DType kCodecTypes[] = {DType::Float32, DType::Float16, DType::Bfloat16};

bool plainFormat(Codec c) { return c == Codec::None || c == Codec::Fp16 || c == Codec::Bf16; }

std::string nameOf(Codec c, DType t, size_t n) {
  return std::string(codecName(c)) + ", " + dtypeName(t) + ", n " + std::to_string(n);
}

// Equal bits, or both NaN: where a float add meets a NaN, which payload
// survives is the compiler's choice of operand order, not the codec's.
bool sameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || arith::bitCast<uint32_t>(a) == arith::bitCast<uint32_t>(b);
}

// Where the plain formats round at their edges: past float16's and
// bfloat16's largest values (to infinity), float16's largest, its halfway
// points and subnormals, float32 subnormals, NaNs and infinities.
const std::vector<float>& edgeValues() {
  static const std::vector<float> v = {
      1e5f,     -7e4f,   65504.0f,  65519.0f, 65520.0f, 3.4e38f,       3e-6f,
      -6e-8f,   0x1p-25f, 0x1.8p-25f, 1e-40f,  -0.0f,    1.00390625f,   1.00048828125f,
      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::infinity()};
  return v;
}

// Test values for codec c: ordinary ones, and for the plain formats every
// seventh an edge value. Int8 and 1-bit get ordinary values only (an
// infinity spoils a whole chunk's range or mean; the tests above cover it).
std::vector<float> valuesFor(Codec c, size_t n, unsigned seed) {
  std::vector<float> v = randomFloats(n, seed);
  if (!plainFormat(c)) return v;
  for (size_t i = 0, k = 0; i < n; i += 7, ++k) v[i] = edgeValues()[k % edgeValues().size()];
  return v;
}

// What encode must write, element by element with arith.h for the plain
// formats; int8 and 1-bit are quantizeMinMax's and packSigns' bytes (the
// tests above hold those to codec.h's definitions).
struct Encoded {
  std::vector<unsigned char> message;
  std::vector<float> residual;  // empty: none
};
Encoded referenceEncode(Codec c, DType t, const Input& in, const std::vector<float>& residual) {
  const size_t n = in.values.size();
  Encoded e{std::vector<unsigned char>(messageBytes(c, n)), residual};
  float* r = residual.empty() ? nullptr : e.residual.data();
  if (c == Codec::Int8) {
    quantizeMinMax(t, in.bytes.data(), n, e.message.data(), r);
  } else if (c == Codec::OneBit) {
    packSigns(t, in.bytes.data(), n, e.message.data(), r);
  } else {
    for (size_t i = 0; i < n; ++i) {
      const float v = r ? in.values[i] + r[i] : in.values[i];
      float d = v;
      if (c == Codec::None) {
        std::memcpy(e.message.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = c == Codec::Fp16 ? arith::floatToHalf(v) : arith::floatToBfloat16(v);
        std::memcpy(e.message.data() + 2 * i, &h, 2);
        d = c == Codec::Fp16 ? arith::halfToFloat(h) : arith::bfloat16ToFloat(h);
      }
      if (r) r[i] = c != Codec::None && std::isfinite(d) ? v - d : 0.0f;
    }
  }
  return e;
}

// The float32 values a message stands for.
std::vector<float> referenceDecode(Codec c, const std::vector<unsigned char>& message, size_t n) {
  std::vector<float> d(n);
  if (c == Codec::Int8) {
    dequantizeMinMax(message.data(), n, d.data(), false);
  } else if (c == Codec::OneBit) {
    unpackSigns(message.data(), n, d.data(), false);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      if (c == Codec::None) {
        std::memcpy(&d[i], message.data() + 4 * i, 4);
      } else {
        std::memcpy(&h, message.data() + 2 * i, 2);
        d[i] = c == Codec::Fp16 ? arith::halfToFloat(h) : arith::bfloat16ToFloat(h);
      }
    }
  }
  return d;
}

TEST(Codecs, NamesAndMessageBytes) {
  const char* names[] = {"none", "fp16", "bf16", "int8", "onebit"};
  for (int c = 0; c < kCodecs; ++c) EXPECT_STREQ(codecName(static_cast<Codec>(c)), names[c]);
  EXPECT_STREQ(codecName(static_cast<Codec>(kCodecs)), "unknown");
  for (size_t n : kCounts) {
    const size_t chunks = (n + kChunk - 1) / kChunk;
    EXPECT_EQ(messageBytes(Codec::None, n), 4 * n) << n;
    EXPECT_EQ(messageBytes(Codec::Fp16, n), 2 * n) << n;
    EXPECT_EQ(messageBytes(Codec::Bf16, n), 2 * n) << n;
    EXPECT_EQ(messageBytes(Codec::Int8, n), 8 * chunks + n) << n;
    EXPECT_EQ(messageBytes(Codec::OneBit, n), 4 * chunks + (n + 31) / 32 * 4) << n;
  }
}

// Every codec, input type and count: the message and the new residual are
// the reference's bytes; decoding gives the reference's values, added to
// float32 with accumulate, and rounded once into float16 and bfloat16.
TEST(Codecs, EncodeAndDecodeFollowTheReference) {
  for (Codec c : kAllCodecs)
    for (DType t : kCodecTypes)
      for (size_t n : kCounts)
        for (bool withResidual : {false, true}) {
          const unsigned seed = static_cast<unsigned>(n * 5 + static_cast<unsigned>(c));
          const Input in = asType(t, valuesFor(c, n, seed));
          const std::vector<float> oldResidual = withResidual ? randomFloats(n, seed + 1, 0.5f) : std::vector<float>();
          const Encoded want = referenceEncode(c, t, in, oldResidual);
          const std::string what = nameOf(c, t, n) + (withResidual ? ", residual" : "");

          std::vector<unsigned char> message(messageBytes(c, n), 0xEE);
          std::vector<float> residual = oldResidual;
          encode(c, t, in.bytes.data(), n, message.data(), withResidual ? residual.data() : nullptr);
          ASSERT_EQ(0, n ? std::memcmp(message.data(), want.message.data(), message.size()) : 0) << "message: " << what;
          if (withResidual) {
            ASSERT_EQ(0, n ? std::memcmp(residual.data(), want.residual.data(), n * 4) : 0) << "residual: " << what;
          }

          const std::vector<float> decoded = referenceDecode(c, want.message, n);
          std::vector<float> out(n, 7.0f), acc = randomFloats(n, seed + 2, 1.0f);
          const std::vector<float> accBefore = acc;
          decode(c, message.data(), n, DType::Float32, out.data(), false);
          decode(c, message.data(), n, DType::Float32, acc.data(), true);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_TRUE(sameFloat(out[i], decoded[i])) << "element " << i << ": " << what;
            ASSERT_TRUE(sameFloat(acc[i], accBefore[i] + decoded[i])) << "accumulated, element " << i << ": " << what;
          }
          for (DType narrow : {DType::Float16, DType::Bfloat16}) {
            std::vector<uint16_t> got(n, 0xEEEE);
            decode(c, message.data(), n, narrow, got.data(), false);
            for (size_t i = 0; i < n; ++i) {
              const uint16_t h =
                  narrow == DType::Float16 ? arith::floatToHalf(decoded[i]) : arith::floatToBfloat16(decoded[i]);
              ASSERT_EQ(got[i], h) << "into " << dtypeName(narrow) << ", element " << i << ": " << what;
            }
            // A message in the output's own format comes back as its bits
            // (encode writes no signaling NaN, the one thing decoding changes).
            if ((c == Codec::Fp16 && narrow == DType::Float16) || (c == Codec::Bf16 && narrow == DType::Bfloat16)) {
              ASSERT_EQ(0, n ? std::memcmp(got.data(), message.data(), 2 * n) : 0) << "same format: " << what;
            }
          }
        }
}

// Error feedback: what a message decodes to plus the new residual is the
// input plus the old residual: exactly for the plain formats (v - d is
// exact when d is v rounded), to one rounding for int8 and 1-bit. Where
// the plain formats decode to no number, nothing is carried over.
TEST(Codecs, EncodeKeepsWhatTheMessageLoses) {
  for (Codec c : kAllCodecs)
    for (DType t : kCodecTypes)
      for (size_t n : kCounts) {
        const unsigned seed = static_cast<unsigned>(n * 3 + static_cast<unsigned>(c) + 50);
        const Input in = asType(t, valuesFor(c, n, seed));
        const std::vector<float> before = randomFloats(n, seed + 1, 0.5f);
        std::vector<float> residual = before, decoded(n);
        std::vector<unsigned char> message(messageBytes(c, n));
        encode(c, t, in.bytes.data(), n, message.data(), residual.data());
        decode(c, message.data(), n, DType::Float32, decoded.data(), false);
        for (size_t i = 0; i < n; ++i) {
          const float v = in.values[i] + before[i];
          const std::string what = nameOf(c, t, n) + ", element " + std::to_string(i);
          if (!plainFormat(c)) {
            ASSERT_NEAR(decoded[i] + residual[i], v, 1e-6f * (1 + std::fabs(v))) << what;
          } else if (c == Codec::None || !std::isfinite(decoded[i])) {
            ASSERT_EQ(arith::bitCast<uint32_t>(residual[i]), 0u) << what;  // +0.0
            if (c == Codec::None) {
              ASSERT_TRUE(sameFloat(decoded[i], v)) << what;
            }
          } else {
            ASSERT_EQ(decoded[i] + residual[i], v) << what;
          }
        }
      }
  // Over calls, fp16 and bf16 send everything given, but what is held back.
  for (Codec c : {Codec::Fp16, Codec::Bf16}) {
    const size_t n = kChunk + 33;
    std::vector<float> residual(n, 0.0f), sentTotal(n, 0.0f), inputTotal(n, 0.0f), sent(n);
    std::vector<unsigned char> message(messageBytes(c, n));
    for (int call = 0; call < 20; ++call) {
      const std::vector<float> v = randomFloats(n, 300 + call, 1.0f);
      encode(c, DType::Float32, v.data(), n, message.data(), residual.data());
      decode(c, message.data(), n, DType::Float32, sent.data(), false);
      for (size_t i = 0; i < n; ++i) sentTotal[i] += sent[i], inputTotal[i] += v[i];
    }
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(sentTotal[i] + residual[i], inputTotal[i], 1e-5f * (1 + std::fabs(inputTotal[i])))
          << codecName(c) << " element " << i;
  }
}

// Whether f throws gyre's invalid-argument error, naming the rule.
template <class F>
::testing::AssertionResult refusedAsInvalid(F&& f, const char* rule) {
  try {
    f();
  }
  catch (const gyre::Error& e) {
    if (e.code() == gyreInvalidArgument && std::strstr(e.what(), rule)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "code " << e.code() << ": " << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

TEST(Codecs, EncodeAndDecodeRefuseOtherTypesAndNarrowAccumulation) {
  std::vector<int32_t> ints(40, 1);
  std::vector<unsigned char> message(messageBytes(Codec::None, 40));
  std::vector<uint16_t> halves(40);
  std::vector<float> floats(40);
  const char* types = "float32, float16 and bfloat16 only";
  for (Codec c : kAllCodecs) {
    EXPECT_TRUE(refusedAsInvalid([&] { encode(c, DType::Int32, ints.data(), 40, message.data(), nullptr); }, types))
        << codecName(c);
    EXPECT_TRUE(refusedAsInvalid([&] { decode(c, message.data(), 40, DType::Int32, ints.data(), false); }, types))
        << codecName(c);
    for (DType t : {DType::Float16, DType::Bfloat16})
      EXPECT_TRUE(refusedAsInvalid([&] { decode(c, message.data(), 40, t, halves.data(), true); },
                                   "accumulate into float32 only"))
          << codecName(c) << " into " << dtypeName(t);
  }
  EXPECT_TRUE(refusedAsInvalid([&] { widen(DType::Float64, ints.data(), 20, floats.data(), false); }, types));
  const auto unknown = static_cast<Codec>(kCodecs);
  EXPECT_TRUE(refusedAsInvalid([&] { encode(unknown, DType::Float32, floats.data(), 40, message.data(), nullptr); },
                               "unknown codec"));
  EXPECT_TRUE(refusedAsInvalid([&] { decode(unknown, message.data(), 40, DType::Float32, floats.data(), false); },
                               "unknown codec"));
  EXPECT_TRUE(refusedAsInvalid([&] { (void)messageBytes(unknown, 40); }, "unknown codec"));
}

TEST(Codecs, WidenIsExactAndDivideByIsTheAveragesDivide) {
  for (DType t : kCodecTypes)
    for (size_t n : kCounts) {
      const std::vector<unsigned char> in = randomValues(t, n, n + 17);  // every 16-bit encoding turns up
      const codec::Input type = t == DType::Float32 ? codec::kF32 : t == DType::Float16 ? codec::kF16 : codec::kBf16;
      std::vector<float> out(n, 7.0f), acc = randomFloats(n, 4, 1.0f);
      const std::vector<float> accBefore = acc;
      widen(t, in.data(), n, out.data(), false);
      widen(t, in.data(), n, acc.data(), true);
      for (size_t i = 0; i < n; ++i) {
        const float x = codec::load(in.data(), type, i);
        ASSERT_EQ(arith::bitCast<uint32_t>(out[i]), arith::bitCast<uint32_t>(x)) << dtypeName(t) << " " << i;
        ASSERT_TRUE(sameFloat(acc[i], accBefore[i] + x)) << dtypeName(t) << " accumulated " << i;
      }
    }
  for (uint32_t divisor : {0u, 1u, 2u, 3u, 7u, 8u, 10u, 1000u, 4294967295u})
    for (size_t n : kCounts) {
      std::vector<float> x(n);
      const std::vector<unsigned char> bytes = randomValues(DType::Float32, n, n + divisor);
      if (n) std::memcpy(x.data(), bytes.data(), 4 * n);
      const std::vector<float> before = x;
      divideBy(x.data(), n, divisor);
      for (size_t i = 0; i < n; ++i) {
        // As run() with an average: no divide at all by 1 (or 0).
        const float want = divisor > 1 ? before[i] / static_cast<float>(divisor) : before[i];
        const bool same = divisor > 1 ? sameFloat(x[i], want)
                                      : arith::bitCast<uint32_t>(x[i]) == arith::bitCast<uint32_t>(want);
        ASSERT_TRUE(same)
            << "divisor " << divisor << ", element " << i << " of " << n;
      }
    }
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

// The plain formats' table entries (encode, widen, narrow) make the scalar
// code's bytes on every input: random bits for the 16-bit types (every
// NaN payload, signaling ones too, subnormals, infinities), and float32
// values with specials and float16's edges, with and without a residual.
TEST_P(CodecIsas, PlainFormatsMakeTheScalarCodesBytes) {
  const detail::CodecTable* t = detail::codecsFor(GetParam());
  if (!t) GTEST_SKIP() << "this CPU cannot run " << detail::isaName(GetParam());
  const detail::CodecTable& ref = *detail::codecsFor(detail::Isa::Scalar);
  const std::vector<size_t> counts = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 255, kChunk - 1, kChunk + 9, 3 * kChunk + 77};
  const codec::Input formats[] = {codec::kF32, codec::kF16, codec::kBf16};
  auto dtypeOf = [](codec::Input f) {
    return f == codec::kF32 ? DType::Float32 : f == codec::kF16 ? DType::Float16 : DType::Bfloat16;
  };
  for (size_t n : counts)
    for (codec::Input type : formats) {
      const std::vector<unsigned char> in =
          type == codec::kF32 ? asType(DType::Float32, valuesFor(Codec::Fp16, n, static_cast<unsigned>(n))).bytes
                              : randomValues(dtypeOf(type), n, n + 3);
      const std::string what =
          std::string(detail::isaName(GetParam())) + ", n " + std::to_string(n) + ", " + dtypeName(dtypeOf(type));
      for (codec::Input wire : formats)
        for (bool withResidual : {false, true}) {
          const size_t bytes = n * (wire == codec::kF32 ? 4 : 2);
          std::vector<unsigned char> want(bytes, 0xEE), got(bytes, 0xEE);
          std::vector<float> rWant = randomFloats(n, 99, 0.5f), rGot = rWant;
          ref.encodeFloats(wire, type, in.data(), n, want.data(), withResidual ? rWant.data() : nullptr);
          t->encodeFloats(wire, type, in.data(), n, got.data(), withResidual ? rGot.data() : nullptr);
          const std::string w = what + " as " + dtypeName(dtypeOf(wire)) + (withResidual ? ", residual" : "");
          ASSERT_EQ(0, n ? std::memcmp(want.data(), got.data(), bytes) : 0) << "message: " << w;
          ASSERT_EQ(0, n ? std::memcmp(rWant.data(), rGot.data(), n * sizeof(float)) : 0) << "residual: " << w;
        }
      for (bool accumulate : {false, true}) {
        std::vector<float> want = randomFloats(n, 5, 1.0f), got = want;
        ref.widen(type, in.data(), n, want.data(), accumulate);
        t->widen(type, in.data(), n, got.data(), accumulate);
        ASSERT_EQ(0, n ? std::memcmp(want.data(), got.data(), n * sizeof(float)) : 0)
            << "widened" << (accumulate ? " (accumulated): " : ": ") << what;
      }
      if (type == codec::kF32) continue;
      // Narrowing: random float32 bits (NaN payloads, subnormals, ...),
      // every fifth one an edge value.
      const std::vector<unsigned char> bits = randomValues(DType::Uint32, n, n + 11);
      std::vector<float> values(n);
      if (n) std::memcpy(values.data(), bits.data(), 4 * n);
      for (size_t i = 0; i < n; i += 5) values[i] = edgeValues()[(i / 5) % edgeValues().size()];
      std::vector<uint16_t> want(n, 0xEEEE), got(n, 0xEEEE);
      ref.narrow(type, values.data(), n, want.data());
      t->narrow(type, values.data(), n, got.data());
      ASSERT_EQ(0, n ? std::memcmp(want.data(), got.data(), 2 * n) : 0) << "narrowed: " << what;
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, CodecIsas, ::testing::ValuesIn(kAllIsas), isaParamName);

}  // namespace
}  // namespace gyre::kernels::testing
