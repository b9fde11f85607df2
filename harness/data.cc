#include "harness/data.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "harness/random.h"

namespace gyre::harness {
namespace {

// One generator per (seed, epoch), independent of every other pair's: two
// rounds of splitmix64's mixing, so that neighbouring seeds or epochs do not
// give overlapping streams (Random(seed + 1) would be Random(seed) shifted).
uint64_t epochSeed(uint64_t seed, uint64_t epoch) {
  Random first(seed);
  Random second(first.next() ^ epoch);
  return second.next();
}

}  // namespace

double unigramEntropy(std::span<const uint8_t> tokens) {
  std::array<uint64_t, 256> counts{};
  for (uint8_t t : tokens) ++counts[t];
  const double n = static_cast<double>(tokens.size());
  double h = 0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / n;
    h -= p * std::log(p);
  }
  return h;
}

DataLoader::DataLoader(TokenFile tokens, const LoaderConfig& config)
    : tokens_(std::move(tokens)), config_(config) {
  const LoaderConfig& c = config_;
  if (c.batch <= 0 || c.seq <= 0 || c.ranks <= 0 || c.rank < 0 || c.rank >= c.ranks)
    throw std::invalid_argument("DataLoader: need batch > 0, seq > 0 and 0 <= rank < ranks");
  if (c.batch % c.ranks != 0)
    throw std::invalid_argument("DataLoader: the global batch of " + std::to_string(c.batch) +
                                " sequences does not split evenly over " + std::to_string(c.ranks) +
                                " ranks");
  const uint64_t n = tokens_.size();
  const auto T = static_cast<uint64_t>(c.seq);
  if (n < T + 1)
    throw DataError("harness data: '" + tokens_.name() + "': the text has " + std::to_string(n) +
                    " tokens; a sequence of " + std::to_string(T) + " needs at least " +
                    std::to_string(T + 1));
  // Windows of T + 1 tokens starting every T: each token is a target once
  // per epoch, and the last window still ends inside the text.
  windows_ = (n - 1) / T;
  if (windows_ > UINT32_MAX)
    throw DataError("harness data: '" + tokens_.name() + "': too many windows for seq");
}

const std::vector<uint32_t>& DataLoader::order(uint64_t epoch) {
  if (epoch == cachedEpoch_) return order_;
  order_.resize(windows_);
  for (uint64_t i = 0; i < windows_; ++i) order_[i] = static_cast<uint32_t>(i);
  Random rng(epochSeed(config_.seed, epoch));
  for (uint64_t i = windows_ - 1; i > 0; --i)
    std::swap(order_[i], order_[rng.below(i + 1)]);  // Fisher-Yates
  cachedEpoch_ = epoch;
  return order_;
}

uint64_t DataLoader::sequenceStart(int64_t step, int i) {
  if (step < 0 || i < 0 || i >= config_.batch)
    throw std::invalid_argument("DataLoader: need step >= 0 and 0 <= i < batch");
  const uint64_t global =
      static_cast<uint64_t>(step) * static_cast<uint64_t>(config_.batch) + static_cast<uint64_t>(i);
  return uint64_t{order(global / windows_)[global % windows_]} * static_cast<uint64_t>(config_.seq);
}

void DataLoader::batch(int64_t step, std::span<int> inputs, std::span<int> targets) {
  const int T = config_.seq;
  const size_t want = static_cast<size_t>(localBatch()) * static_cast<size_t>(T);
  if (inputs.size() != want || targets.size() != want)
    throw std::invalid_argument(
        "DataLoader::batch: inputs and targets must hold (batch / ranks) * seq tokens");
  const std::span<const uint8_t> text = tokens_.tokens();
  for (int b = 0; b < localBatch(); ++b) {
    const uint64_t start = sequenceStart(step, config_.rank * localBatch() + b);
    for (int t = 0; t < T; ++t) {
      inputs[static_cast<size_t>(b * T + t)] = text[start + static_cast<uint64_t>(t)];
      targets[static_cast<size_t>(b * T + t)] = text[start + static_cast<uint64_t>(t) + 1];
    }
  }
}

}  // namespace gyre::harness
