#include "harness/varlen_data.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/random.h"

namespace gyre::harness {

namespace {

// A stream per (seed, step, purpose): the lengths and the windows' starts
// draw from their own, so that lengths() needs no windows.
Random streamOf(uint64_t seed, int64_t step, uint64_t purpose) {
  Random mix(seed ^ (static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ull) ^ (purpose << 56));
  return Random(mix.next());
}

}  // namespace

VarlenLoader::VarlenLoader(TokenFile tokens, const VarlenConfig& config)
    : tokens_(std::move(tokens)), config_(config) {
  const LengthDistribution& d = config.lengths;
  if (d.minLen < 1 || d.maxLen < d.minLen)
    throw std::invalid_argument("variable-length batches need 1 <= the shortest length (" +
                                std::to_string(d.minLen) + ") <= the longest (" +
                                std::to_string(d.maxLen) + ")");
  if (config.tokens < d.maxLen)
    throw std::invalid_argument("a batch of " + std::to_string(config.tokens) +
                                " tokens cannot hold a sequence of the longest length, " +
                                std::to_string(d.maxLen));
  if (!(d.sigma >= 0) || !std::isfinite(d.mu))
    throw std::invalid_argument("the length distribution needs a finite mu and sigma >= 0");
  if (tokens_.size() < static_cast<size_t>(d.maxLen) + 1)
    throw DataError("the text holds " + std::to_string(tokens_.size()) +
                    " tokens, fewer than the longest sequence's " + std::to_string(d.maxLen) +
                    " + 1");
}

std::vector<int64_t> VarlenLoader::lengths(int64_t step) const {
  const LengthDistribution& d = config_.lengths;
  Random rng = streamOf(config_.seed, step, 1);
  std::vector<int64_t> out;
  int64_t total = 0;
  for (;;) {
    const double x = std::exp(d.mu + d.sigma * static_cast<double>(rng.normal(0.0f, 1.0f)));
    const int64_t L = std::clamp<int64_t>(std::llround(std::min(x, 1e15)), d.minLen, d.maxLen);
    if (total + L > config_.tokens) break;
    out.push_back(L);
    total += L;
  }
  return out;
}

VarlenBatch VarlenLoader::batch(int64_t step) const {
  VarlenBatch b;
  b.lengths = lengths(step);
  Random rng = streamOf(config_.seed, step, 2);
  const std::span<const uint8_t> text = tokens_.tokens();
  for (int64_t L : b.lengths) {
    const uint64_t start = rng.below(text.size() - static_cast<uint64_t>(L));
    b.offsets.push_back(static_cast<int64_t>(b.inputs.size()));
    for (int64_t i = 0; i < L; ++i) {
      b.inputs.push_back(text[start + i]);
      b.targets.push_back(text[start + i + 1]);
    }
  }
  return b;
}

}  // namespace gyre::harness
