#include "bench/exact_values.h"

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

}  // namespace gyre::test
