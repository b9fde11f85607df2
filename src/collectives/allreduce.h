// AllReduce plan builders.
#pragma once

#include <string>

#include "collectives/plan.h"

namespace gyre::collectives {

enum class AllReduceAlgo { Ring, RecursiveDoubling };

const char* allReduceAlgoName(AllReduceAlgo a);
// Throws Error(gyreInvalidArgument) listing the valid names.
AllReduceAlgo parseAllReduceAlgo(const std::string& name);

// Ring: reduce-scatter then all-gather around rank order, pipelined in pieces
// of at most chunkElems. Each piece's reduction runs once, in ring order, and
// is then copied to every rank: bitwise-identical results everywhere.
void buildRingAllReduce(Plan& plan, int rank, int nranks, size_t count, size_t chunkElems,
                        size_t elemSize);

// Recursive doubling (latency-bound sizes): log2(n) exchanges of the whole
// vector; ranks beyond the largest power of two fold into a partner first.
// Each pair reduces with the lower rank's data on the left, so both get the
// same bits.
void buildRecursiveDoublingAllReduce(Plan& plan, int rank, int nranks, size_t count,
                                     size_t chunkElems);

}  // namespace gyre::collectives
