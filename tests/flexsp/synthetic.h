// Test helpers: a time model of the planner's shape without a communicator
// (compute falling as 1/P, an all-to-all cost growing with P), and random
// long-tailed batches.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "flexsp/plan.h"

namespace gyre::flexsp::test {

inline double syntheticSeconds(int64_t length, int ranks) {
  const double l = double(length);
  const double compute = (1e-7 * l * l + 1e-3 * l) / ranks;
  const double comm = ranks == 1 ? 0 : 0.02 * std::log2(double(ranks)) + 1e-4 * l / ranks;
  return compute + comm;
}

inline SequenceTime synthetic() { return syntheticSeconds; }

// Lognormal lengths around `median`, clamped to [16, longest].
inline std::vector<int64_t> randomLengths(std::mt19937_64& rng, int n, double median, double sigma,
                                          int64_t longest) {
  std::lognormal_distribution<double> d(std::log(median), sigma);
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    int64_t l = std::llround(d(rng));
    out.push_back(l < 16 ? 16 : l > longest ? longest : l);
  }
  return out;
}

// Drops sequences from the end until the batch fits the world's memory.
inline Problem fitted(std::vector<int64_t> lengths, int world, int64_t memory) {
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  while (total > int64_t{world} * memory) total -= lengths.back(), lengths.pop_back();
  return Problem{std::move(lengths), world, memory};
}

}  // namespace gyre::flexsp::test
