#include "bench/exact_values.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/half.h"

namespace gyre::test {

namespace {

bool isUnsigned(gyreDataType_t t) { return t == gyreUint8 || t == gyreUint32 || t == gyreUint64; }
bool isFloat(gyreDataType_t t) {
  return t == gyreFloat16 || t == gyreBfloat16 || t == gyreFloat32 || t == gyreFloat64;
}

// Small integers: sums over 5 ranks stay within int8 and are exact in
// bfloat16 (8 significant bits); products stay within +-32.
long long inputValue(size_t i, int rank, gyreRedOp_t op, gyreDataType_t t) {
  const bool uns = isUnsigned(t);
  switch (op) {
    case gyreProd: {
      long long k = static_cast<long long>((i + size_t(rank)) % 3);
      if (uns) return k == 0 ? 1 : 2 - (k & 1);  // 1 or 2
      return k == 0 ? -1 : k == 1 ? 1 : 2;
    }
    case gyreMax:
    case gyreMin: {
      long long v = static_cast<long long>((i * 13 + size_t(rank) * 5) % 17);
      return uns ? v : v - 8;
    }
    default: {  // sum, avg
      long long v = static_cast<long long>((i * 7 + size_t(rank) * 3) % 9);
      return uns ? v : v - 4;
    }
  }
}

void store(void* buf, size_t i, gyreDataType_t t, double v) {
  switch (t) {
    case gyreInt8:
      static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v);
      break;
    case gyreUint8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v);
      break;
    case gyreInt32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      break;
    case gyreUint32:
      static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v);
      break;
    case gyreInt64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v);
      break;
    case gyreUint64:
      static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v);
      break;
    case gyreFloat16:
      static_cast<uint16_t*>(buf)[i] = kernels::floatToHalf(static_cast<float>(v));
      break;
    case gyreBfloat16:
      static_cast<uint16_t*>(buf)[i] = kernels::floatToBfloat16(static_cast<float>(v));
      break;
    case gyreFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case gyreFloat64:
      static_cast<double*>(buf)[i] = v;
      break;
    default:
      break;
  }
}

// The expected value, as the library must compute it: integer average
// truncates toward zero; float average is the sum divided in float32
// (float64 for doubles), rounded once to the type.
double expected(size_t i, gyreDataType_t t, gyreRedOp_t op, int nranks) {
  long long acc = inputValue(i, 0, op, t);
  for (int r = 1; r < nranks; ++r) {
    long long v = inputValue(i, r, op, t);
    switch (op) {
      case gyreProd:
        acc *= v;
        break;
      case gyreMax:
        acc = std::max(acc, v);
        break;
      case gyreMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  if (op != gyreAvg) return static_cast<double>(acc);
  if (!isFloat(t)) return static_cast<double>(acc / nranks);
  if (t == gyreFloat64) return static_cast<double>(acc) / nranks;
  float q = static_cast<float>(acc) / static_cast<float>(nranks);
  if (t == gyreFloat16) return kernels::halfToFloat(kernels::floatToHalf(q));
  if (t == gyreBfloat16) return kernels::bfloat16ToFloat(kernels::floatToBfloat16(q));
  return q;
}

}  // namespace

size_t dtypeBytes(gyreDataType_t t) {
  switch (t) {
    case gyreInt8:
    case gyreUint8:
      return 1;
    case gyreFloat16:
    case gyreBfloat16:
      return 2;
    case gyreInt32:
    case gyreUint32:
    case gyreFloat32:
      return 4;
    default:
      return 8;
  }
}

const char* dtypeLabel(gyreDataType_t t) {
  static const char* names[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                "uint64", "float16", "float32", "float64", "bfloat16"};
  return static_cast<int>(t) >= 0 && t < gyreNumTypes ? names[t] : "?";
}

const char* opLabel(gyreRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return static_cast<int>(op) >= 0 && op < gyreNumOps ? names[op] : "?";
}

void fillConstant(void* buf, size_t count, gyreDataType_t t, double value) {
  for (size_t i = 0; i < count; ++i) store(buf, i, t, value);
}

double elementAsDouble(const void* buf, size_t i, gyreDataType_t t) {
  switch (t) {
    case gyreInt8:
      return static_cast<const int8_t*>(buf)[i];
    case gyreUint8:
      return static_cast<const uint8_t*>(buf)[i];
    case gyreInt32:
      return static_cast<const int32_t*>(buf)[i];
    case gyreUint32:
      return static_cast<const uint32_t*>(buf)[i];
    case gyreInt64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case gyreUint64:
      return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case gyreFloat16:
      return kernels::halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case gyreBfloat16:
      return kernels::bfloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case gyreFloat32:
      return static_cast<const float*>(buf)[i];
    case gyreFloat64:
      return static_cast<const double*>(buf)[i];
    default:
      return NAN;
  }
}

void fillInput(void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int rank) {
  for (size_t i = 0; i < count; ++i)
    store(buf, i, t, static_cast<double>(inputValue(i, rank, op, t)));
}

size_t countWrong(const void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int nranks,
                  std::string* firstBad, size_t firstIndex) {
  size_t wrong = 0;
  // Compare bit patterns: store the expected value into a scratch element.
  alignas(8) unsigned char want[8];
  const size_t bytes = dtypeBytes(t);
  for (size_t i = 0; i < count; ++i) {
    double e = expected(firstIndex + i, t, op, nranks);
    store(want, 0, t, e);
    if (std::memcmp(want, static_cast<const unsigned char*>(buf) + i * bytes, bytes) != 0) {
      if (wrong == 0 && firstBad)
        *firstBad = "element " + std::to_string(firstIndex + i) + " is " +
                    std::to_string(elementAsDouble(buf, i, t)) + ", expected " + std::to_string(e);
      ++wrong;
    }
  }
  return wrong;
}

namespace {

// Data-movement values: small integers (exact in every dtype, bfloat16
// included) that differ between neighbouring elements and between sources.
double patternValue(size_t i, uint64_t seed, gyreDataType_t t) {
  const long long v = static_cast<long long>((i * 7 + seed * 37 + 3) % 101);
  return static_cast<double>(isUnsigned(t) ? v : v - 50);
}

}  // namespace

double patternAt(size_t i, gyreDataType_t t, uint64_t seed) { return patternValue(i, seed, t); }

void storeElement(void* buf, size_t i, gyreDataType_t t, double v) { store(buf, i, t, v); }

void fillPattern(void* buf, size_t count, gyreDataType_t t, uint64_t seed) {
  for (size_t i = 0; i < count; ++i) store(buf, i, t, patternValue(i, seed, t));
}

size_t countPatternWrong(const void* buf, size_t count, gyreDataType_t t, uint64_t seed, std::string* firstBad) {
  size_t wrong = 0;
  alignas(8) unsigned char want[8];
  const size_t bytes = dtypeBytes(t);
  for (size_t i = 0; i < count; ++i) {
    store(want, 0, t, patternValue(i, seed, t));
    if (std::memcmp(want, static_cast<const unsigned char*>(buf) + i * bytes, bytes) != 0) {
      if (wrong == 0 && firstBad)
        *firstBad = "element " + std::to_string(i) + " is " + std::to_string(elementAsDouble(buf, i, t)) +
                    ", expected " + std::to_string(patternValue(i, seed, t));
      ++wrong;
    }
  }
  return wrong;
}

// ---- Lossy calls ----

namespace {

// A fraction in [0, 1) of 20 bits, from a hash of (i, source), so that
// neighbouring elements and sources differ in most bits. Added to a
// reduction's input (|v| <= 8) it stays exact in float32 (24 significant
// bits); where it does not (larger patterns, narrower types) the exact
// results are taken from the value as stored anyway.
double fraction(size_t i, uint64_t source) {
  uint64_t h = (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^ (source + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return static_cast<double>(h >> 44) / static_cast<double>(1u << 20);
}

// v as an element of t holds it.
double roundedTo(gyreDataType_t t, double v) {
  alignas(8) unsigned char e[8];
  store(e, 0, t, v);
  return elementAsDouble(e, 0, t);
}

double fractionalInput(size_t i, int rank, gyreRedOp_t op, gyreDataType_t t) {
  return roundedTo(t, static_cast<double>(inputValue(i, rank, op, t)) + fraction(i, static_cast<uint64_t>(rank)));
}

}  // namespace

void fillFractionalInput(void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int rank) {
  for (size_t i = 0; i < count; ++i) store(buf, i, t, fractionalInput(i, rank, op, t));
}

double fractionalExpected(size_t i, gyreDataType_t t, gyreRedOp_t op, int nranks) {
  double sum = 0;  // exact: a few values of 24 significant bits
  for (int r = 0; r < nranks; ++r) sum += fractionalInput(i, r, op, t);
  return op == gyreAvg ? sum / nranks : sum;
}

void fillFractionalPattern(void* buf, size_t count, gyreDataType_t t, uint64_t seed) {
  for (size_t i = 0; i < count; ++i) store(buf, i, t, fractionalPatternValue(i, t, seed));
}

double fractionalPatternValue(size_t i, gyreDataType_t t, uint64_t seed) {
  return roundedTo(t, patternValue(i, seed, t) + fraction(i, seed));
}

void ErrorStats::add(double result, double exact) {
  maxAbsExact = std::max(maxAbsExact, std::fabs(exact));
  if (!std::isfinite(result)) {
    ++nonFinite;
    return;
  }
  const double e = std::fabs(result - exact);
  maxAbsErr = std::max(maxAbsErr, e);
  sumSqErr += e * e;
  ++elems;
}

void ErrorStats::merge(const ErrorStats& other) {
  maxAbsErr = std::max(maxAbsErr, other.maxAbsErr);
  sumSqErr += other.sumSqErr;
  maxAbsExact = std::max(maxAbsExact, other.maxAbsExact);
  elems += other.elems;
  nonFinite += other.nonFinite;
}

double ErrorStats::maxRelative() const { return maxAbsErr / (maxAbsExact > 0 ? maxAbsExact : 1); }

double ErrorStats::rmsRelative() const {
  if (elems == 0) return 0;
  return std::sqrt(sumSqErr / static_cast<double>(elems)) / (maxAbsExact > 0 ? maxAbsExact : 1);
}

ErrorStats measureError(const void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int nranks,
                        size_t firstIndex) {
  ErrorStats s;
  for (size_t i = 0; i < count; ++i)
    s.add(elementAsDouble(buf, i, t), fractionalExpected(firstIndex + i, t, op, nranks));
  return s;
}

ErrorStats measurePatternError(const void* buf, size_t count, gyreDataType_t t, uint64_t seed) {
  ErrorStats s;
  for (size_t i = 0; i < count; ++i) s.add(elementAsDouble(buf, i, t), fractionalPatternValue(i, t, seed));
  return s;
}

}  // namespace gyre::test
