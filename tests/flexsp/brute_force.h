// The optimum of a small batch by exhaustion, for the planner's tests:
// every multiset of power-of-two group sizes (up to the largest allowed)
// within the world, every
// assignment of sequences to those groups within memory (empty groups of
// one size being interchangeable, a sequence opens only the first of
// them), pruned by the best makespan so far.
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include "flexsp/plan.h"

namespace gyre::flexsp::test {

class BruteForce {
 public:
  BruteForce(const Problem& p, const SequenceTime& t) : p_(p), t_(t) {}

  double optimum() {
    best_ = std::numeric_limits<double>::infinity();
    std::vector<int> sizes;
    sizesFrom(p_.largestGroup(), p_.worldSize, sizes);
    return best_;
  }

 private:
  // Multisets of sizes (non-increasing) adding up to at most `left`.
  void sizesFrom(int largest, int left, std::vector<int>& sizes) {
    if (!sizes.empty()) assign(sizes);
    for (int s = largest; s >= 1; s /= 2) {
      if (s > left) continue;
      sizes.push_back(s);
      sizesFrom(s, left - s, sizes);
      sizes.pop_back();
    }
  }

  void assign(const std::vector<int>& sizes) {
    sizes_ = sizes;
    load_.assign(sizes.size(), 0);
    tokens_.assign(sizes.size(), 0);
    place(0);
  }

  void place(size_t s) {
    if (s == p_.lengths.size()) {
      best_ = std::min(best_, *std::max_element(load_.begin(), load_.end()));
      return;
    }
    const int64_t l = p_.lengths[s];
    for (size_t g = 0; g < sizes_.size(); ++g) {
      // An empty group like an earlier empty one of the same size: the same branch.
      bool twin = false;
      for (size_t h = 0; h < g && !twin; ++h)
        twin = sizes_[h] == sizes_[g] && tokens_[h] == 0 && tokens_[g] == 0;
      if (twin || tokens_[g] + l > int64_t{sizes_[g]} * p_.memoryTokens) continue;
      const double add = t_(l, sizes_[g]);
      if (load_[g] + add >= best_) continue;
      load_[g] += add, tokens_[g] += l;
      place(s + 1);
      load_[g] -= add, tokens_[g] -= l;
    }
  }

  const Problem& p_;
  const SequenceTime& t_;
  double best_ = 0;
  std::vector<int> sizes_;
  std::vector<double> load_;
  std::vector<int64_t> tokens_;
};

}  // namespace gyre::flexsp::test
