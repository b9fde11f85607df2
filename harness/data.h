// The data loader: which tokens each data-parallel rank trains on at a step.
//
// A step's global batch is B sequences of T + 1 tokens (the inputs and, one
// token later, the targets). The corpus of n tokens is cut into
// S = (n - 1) / T windows starting at 0, T, 2T, ...; each epoch visits all S
// in an order shuffled by (seed, epoch), and the global batch of step k takes
// the windows numbered k*B to k*B + B - 1 of that endless sequence of epochs.
// Rank r of R takes the r-th of R equal, consecutive parts of the B.
//
// So what a rank reads is a pure function of (seed, step, R, r): no state
// carries from one step to the next, a run resumed at step k reads what an
// uninterrupted one reads there, and the ranks' parts put side by side in
// rank order are exactly the batch one rank would train on, which is what
// lets every parallel run be checked against the single-rank one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "harness/token_file.h"

namespace gyre::harness {

struct LoaderConfig {
  int batch = 8;  // B: sequences in the global batch, over all ranks
  int seq = 64;   // T: tokens per input sequence
  uint64_t seed = 0;
  int rank = 0;  // this rank's place among the data-parallel ranks
  int ranks = 1;
};

// The entropy of the tokens' unigram distribution, in nats per token:
// -sum p(b) ln p(b) over the byte values b with p(b) their share of the
// tokens (0 for no tokens). It is the cross-entropy of the best model that
// ignores context, so a loss well below it is a model that learned from
// context, not just the letters' frequencies.
double unigramEntropy(std::span<const uint8_t> tokens);

class DataLoader {
 public:
  // Throws DataError naming the text when it holds fewer than T + 1 tokens,
  // and std::invalid_argument when B is not a multiple of R or rank is out of
  // range.
  DataLoader(TokenFile tokens, const LoaderConfig& config);

  // Fills this rank's part of step's global batch: [B/R, T] inputs and the
  // targets, each the input's next token.
  void batch(int64_t step, std::span<int> inputs, std::span<int> targets);

  // Where the i-th sequence of step's global batch starts in the corpus.
  uint64_t sequenceStart(int64_t step, int i);

  int localBatch() const { return config_.batch / config_.ranks; }
  uint64_t sequencesPerEpoch() const { return windows_; }
  const TokenFile& tokens() const { return tokens_; }

 private:
  // The shuffled window order of `epoch`, kept for the next call: a batch
  // rarely crosses into the next epoch, so it is recomputed once per epoch.
  const std::vector<uint32_t>& order(uint64_t epoch);

  TokenFile tokens_;
  LoaderConfig config_;
  uint64_t windows_ = 0;
  uint64_t cachedEpoch_ = UINT64_MAX;
  std::vector<uint32_t> order_;
};

}  // namespace gyre::harness
