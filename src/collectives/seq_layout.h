// The layout of DeepSpeed-Ulysses' exchanges (gyreSeqToHeads,
// gyreHeadsToSeq; docs/sequence-parallel.md): which heads each rank holds
// once the sequence is head-sharded, and how wide a token is on either side.
// Pure functions of the layout and the rank count, so every rank computes
// the same shares without a message, and core sizes the buffers with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gyre::collectives {

// Which of attention's tensors a token holds (gyreSeqPart_t's values), in
// the order q, k, v.
enum SeqPart : uint8_t { kSeqQ = 1, kSeqK = 2, kSeqV = 4, kSeqAll = 7 };

struct SeqLayout {
  uint32_t heads = 0;          // query heads
  uint32_t kvHeads = 0;        // key/value heads; heads % kvHeads == 0
  size_t headDim = 0;          // elements per head
  uint8_t parts = 0;           // SeqPart bits
  std::vector<size_t> tokens;  // per rank, in sequence order
};

// The heads rank r holds after the exchange to heads: query heads
// [qFirst, qFirst + qCount), dealt out as evenly as possible (the first
// heads % n ranks take one more), and the key/value heads those query heads
// use, [kvFirst, kvFirst + kvCount): with grouped-query attention a
// key/value head serves heads / kvHeads consecutive query heads, so one
// that straddles two ranks' shares is held by both.
struct HeadShare {
  uint32_t qFirst = 0, qCount = 0, kvFirst = 0, kvCount = 0;
};
HeadShare headShare(const SeqLayout& l, int nranks, int rank);

// Heads per token on the sequence side (every head of the parts held) and
// on the head side (the share's).
size_t tokenHeads(const SeqLayout& l);
size_t shareHeads(const SeqLayout& l, const HeadShare& s);

// Where a token's part starts on the sequence side, in heads.
size_t partOffset(const SeqLayout& l, SeqPart p);

// The layout as one number, for the call's tag, so that ranks that
// disagree are told both layouts by name: heads and kvHeads (12 bits each),
// parts (3), headDim (20) and a 17-bit fingerprint of the tokens, so that
// a rank whose tokens differ anywhere fails on every peer's message, not
// only on the blocks whose own count differs (the API refuses layouts past
// kMaxSeqHeads, kMaxSeqHeadDim).
constexpr uint32_t kMaxSeqHeads = (1u << 12) - 1;
constexpr size_t kMaxSeqHeadDim = (size_t{1} << 20) - 1;
uint64_t seqLayoutCode(const SeqLayout& l);
// Whether two codes differ in their tokens' fingerprint only.
bool seqTokensDiffer(uint64_t a, uint64_t b);
// "8 heads, 2 kv heads, head dim 64, q+k+v, tokens 1a2b3" from a code.
std::string describeSeqLayout(uint64_t code);

}  // namespace gyre::collectives
