// Inputs whose reduction is exact in every data type (small integers), and
// the expected results, so AllReduce output can be checked bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gyre/gyre.h"

namespace gyre::test {

size_t dtypeBytes(gyreDataType_t t);
const char* dtypeLabel(gyreDataType_t t);
const char* opLabel(gyreRedOp_t op);

// Fills buf (count elements of t) with rank's input for op.
void fillInput(void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int rank);

// Compares buf with the exact result over nranks; returns the number of wrong
// elements and describes the first in `firstBad`. firstIndex: the index of
// buf[0] in the inputs (a ReduceScatter block).
size_t countWrong(const void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int nranks,
                  std::string* firstBad, size_t firstIndex = 0);

// Data to move rather than reduce: a pattern per seed (e.g. per source rank
// and destination), exact in every dtype, so a misplaced block shows.
void fillPattern(void* buf, size_t count, gyreDataType_t t, uint64_t seed);
size_t countPatternWrong(const void* buf, size_t count, gyreDataType_t t, uint64_t seed, std::string* firstBad);

// The value fillPattern(.., seed) puts at element i; v stored as element i
// of t stores it (checks that build their expected elements one at a time).
double patternAt(size_t i, gyreDataType_t t, uint64_t seed);
void storeElement(void* buf, size_t i, gyreDataType_t t, double v);

// Every element of buf (count of t) = value (as t stores it).
void fillConstant(void* buf, size_t count, gyreDataType_t t, double value);

// Element as double (for messages and tests of other values).
double elementAsDouble(const void* buf, size_t i, gyreDataType_t t);

// ---- Lossy calls (the compressed collectives) ----
//
// Small integers would hide a codec's rounding (float16 and bfloat16 carry
// them, and their sums, exactly), so a lossy call's inputs are the values
// above plus a fraction of 20 bits that differs per element and per source.
// The exact results are computed in double from the inputs as stored
// (rounded to t), so only the call's own rounding shows in the error.

// fillInput's value plus the fraction.
void fillFractionalInput(void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int rank);
// The exact sum (gyreAvg: average) of element i over nranks of those inputs.
double fractionalExpected(size_t i, gyreDataType_t t, gyreRedOp_t op, int nranks);
// fillPattern's value plus the fraction (seed standing in for the source).
void fillFractionalPattern(void* buf, size_t count, gyreDataType_t t, uint64_t seed);
double fractionalPatternValue(size_t i, gyreDataType_t t, uint64_t seed);

// How far results are from the exact ones, element by element; merged
// across ranks by merge(). Results that are not finite (the exact values
// always are) are counted apart and left out of the error.
struct ErrorStats {
  double maxAbsErr = 0;    // max |result - exact|
  double sumSqErr = 0;     // sum of (result - exact)^2
  double maxAbsExact = 0;  // the scale errors are relative to: max |exact|
  size_t elems = 0;        // finite results compared
  size_t nonFinite = 0;    // results that are NaN or infinite

  void add(double result, double exact);
  void merge(const ErrorStats& other);
  // Relative to the largest |exact| value (absolute when every exact value
  // is 0): the largest error, and the root mean square of the errors.
  double maxRelative() const;
  double rmsRelative() const;
};

// The lossy counterparts of countWrong and countPatternWrong, against the
// fractional inputs' exact results.
ErrorStats measureError(const void* buf, size_t count, gyreDataType_t t, gyreRedOp_t op, int nranks,
                        size_t firstIndex = 0);
ErrorStats measurePatternError(const void* buf, size_t count, gyreDataType_t t, uint64_t seed);

}  // namespace gyre::test
