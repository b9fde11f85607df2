// Variable-length batches for FlexSP (docs/harness.md, "FlexSP"): each step
// a batch of sequences of different lengths, the same on every rank.
//
// Step k's batch is drawn from Random(seed ^ mix(k)) alone, so it is a pure
// function of (seed, step), as DataLoader's is: a resumed run reads what an
// uninterrupted one does. Lengths: L = clamp(round(exp(mu + sigma z)),
// minLen, maxLen) with z standard normal (a lognormal of median exp(mu),
// long-tailed to the right), drawn one after another while the batch's
// tokens stay within `tokens`; the first length that would pass it ends the
// batch (so a batch holds at least one sequence when maxLen <= tokens).
// Each sequence is the window of L + 1 tokens at a start drawn uniformly
// over the corpus: L inputs and, one token later, their targets.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "harness/token_file.h"

namespace gyre::harness {

struct LengthDistribution {
  double mu = 4.0;     // ln of the median length
  double sigma = 1.0;  // spread of ln(length)
  int minLen = 8, maxLen = 256;
};

struct VarlenConfig {
  LengthDistribution lengths;
  int64_t tokens = 1024;  // the batch's token budget
  uint64_t seed = 0;
};

struct VarlenBatch {
  std::vector<int64_t> lengths;
  std::vector<int64_t> offsets;  // where each sequence starts in inputs/targets
  std::vector<int> inputs, targets;
  int64_t totalTokens() const { return static_cast<int64_t>(inputs.size()); }
  std::span<const int> inputsOf(size_t i) const {
    return std::span<const int>(inputs).subspan(offsets[i], lengths[i]);
  }
  std::span<const int> targetsOf(size_t i) const {
    return std::span<const int>(targets).subspan(offsets[i], lengths[i]);
  }
};

class VarlenLoader {
 public:
  // Throws std::invalid_argument naming the setting when the lengths' bounds
  // or the budget do not fit (minLen < 1, maxLen < minLen, tokens < maxLen,
  // sigma < 0), DataError when the text holds fewer than maxLen + 1 tokens.
  VarlenLoader(TokenFile tokens, const VarlenConfig& config);

  // Step's lengths alone (what the planner needs).
  std::vector<int64_t> lengths(int64_t step) const;
  // Step's whole batch, packed: sequence after sequence.
  VarlenBatch batch(int64_t step) const;

  const VarlenConfig& config() const { return config_; }

 private:
  TokenFile tokens_;
  VarlenConfig config_;
};

}  // namespace gyre::harness
