// gyre-bench's sequence exchanges (seqtoheads, headstoseq: gyreSeqToHeads,
// gyreHeadsToSeq): a row of N bytes is N / (width x headDim) tokens per
// rank, every rank holding as many (layout->tokens NULL), so a row moves
// what an AllToAll of the same row does when the heads divide evenly; the
// layout comes from --heads, --kv-heads, --head-dim and --parts.
#pragma once

#include <string>

#include "bench/gyre_bench/collectives.h"

namespace gyre::bench {

// The row's layout (c.tokens per rank).
gyreSeqLayout_t seqLayoutOf(const Call& c);
// "heads 32, kv heads 32, head dim 128, parts q" for the table and the results.
std::string describeSeqOptions(const Options& o);

void shapeSeqToHeads(Call& c, size_t elems);
void shapeHeadsToSeq(Call& c, size_t elems);
// Seq to heads: rank r's tokens hold the whole sequence's pattern (by token,
// head and element), each rank's share must then be that pattern's heads.
void fillSeqToHeads(Call& c);
size_t wrongSeqToHeads(Call& c);
gyreResult_t runSeqToHeads(Call& c);
// Heads to seq: the pattern again, but a key/value head that several ranks
// hold gets small integers per holder, whose sum is exact in every type.
void fillHeadsToSeq(Call& c);
size_t wrongHeadsToSeq(Call& c);
gyreResult_t runHeadsToSeq(Call& c);

}  // namespace gyre::bench
