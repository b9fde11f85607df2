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

// Element as double (for messages and tests of other values).
double elementAsDouble(const void* buf, size_t i, gyreDataType_t t);

}  // namespace gyre::test
