#include "flexsp/greedy.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace gyre::flexsp {

namespace {

struct Slot {
  int size = 1;
  int sizeIndex = 0;  // log2(size)
  int64_t tokens = 0;
  double load = 0;
  std::vector<int> sequences;
};

int log2Of(int p) {
  int r = 0;
  while ((1 << r) < p) ++r;
  return r;
}

class Greedy {
 public:
  Greedy(const std::vector<int64_t>& lengths, int world, int largest, int64_t memory,
         const SequenceTime& time)
      : lengths_(lengths),
        world_(world),
        largest_(largest),
        memory_(memory),
        order_(lengths.size()) {
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int a, int b) { return lengths[a] > lengths[b]; });
    // Every sequence's time in every group size, once: the shapes below ask
    // for them many times, and a time may be a call into gyre's cost model.
    for (int p = 1; p <= largest; p *= 2) {
      seconds_.emplace_back(lengths.size());
      for (size_t s = 0; s < lengths.size(); ++s) seconds_.back()[s] = time(lengths[s], p);
    }
  }

  std::optional<std::vector<Slot>> best() {
    std::optional<std::vector<Slot>> best;
    double bestSeconds = std::numeric_limits<double>::infinity();
    // Shapes: a base size for the short sequences, and for each sequence
    // that does not fit a base group a group of its own, as small as its
    // memory allows or twice that (while ranks last).
    for (int base = 1; base <= largest_; base *= 2)
      for (int widen : {1, 2}) {
        auto slots = assign(shape(base, widen));
        if (!slots) continue;
        improve(*slots);
        const double s = makespan(*slots);
        if (s < bestSeconds) bestSeconds = s, best = std::move(slots);
      }
    return best;
  }

 private:
  double t(int sequence, const Slot& slot) const { return seconds_[slot.sizeIndex][sequence]; }
  bool fits(int sequence, const Slot& slot) const {
    return slot.tokens + lengths_[sequence] <= int64_t{slot.size} * memory_;
  }

  std::vector<int> shape(int base, int widen) const {
    std::vector<int> sizes;
    int left = world_;
    for (int s : order_) {
      const int least = smallestGroupFor(lengths_[s], largest_, memory_);
      if (least <= base) break;  // longest first: the rest fit a base group
      const int size = std::min(largest_, least * widen);
      if (size <= left) sizes.push_back(size), left -= size;
    }
    for (; left >= base; left -= base) sizes.push_back(base);
    for (int p = base / 2; p >= 1; p /= 2)
      if (left >= p) sizes.push_back(p), left -= p;
    return sizes;
  }

  // Longest first, each where it would finish earliest (ties: the smaller
  // group, keeping large ones for the sequences that need them).
  std::optional<std::vector<Slot>> assign(const std::vector<int>& sizes) const {
    std::vector<Slot> slots;
    for (int p : sizes) slots.push_back(Slot{p, log2Of(p), 0, 0, {}});
    for (int s : order_) {
      Slot* where = nullptr;
      double finish = 0;
      for (Slot& slot : slots) {
        if (!fits(s, slot)) continue;
        const double f = slot.load + t(s, slot);
        if (!where || f < finish || (f == finish && slot.size < where->size))
          where = &slot, finish = f;
      }
      if (!where) return std::nullopt;
      where->tokens += lengths_[s];
      where->load = finish;
      where->sequences.push_back(s);
    }
    return slots;
  }

  // Moves a sequence out of the slowest group while that lowers the larger
  // of the two groups' loads below the slowest's.
  void improve(std::vector<Slot>& slots) const {
    for (size_t round = 0; round < 4 * lengths_.size() + 16; ++round) {
      Slot& worst = *std::max_element(slots.begin(), slots.end(),
                                      [](const Slot& a, const Slot& b) { return a.load < b.load; });
      double bestPeak = worst.load * (1 - 1e-12);
      size_t which = 0;
      Slot* to = nullptr;
      for (size_t i = 0; i < worst.sequences.size(); ++i) {
        const int s = worst.sequences[i];
        for (Slot& other : slots) {
          if (&other == &worst || !fits(s, other)) continue;
          const double peak = std::max(worst.load - t(s, worst), other.load + t(s, other));
          if (peak < bestPeak) bestPeak = peak, which = i, to = &other;
        }
      }
      if (!to) return;
      const int s = worst.sequences[which];
      worst.sequences.erase(worst.sequences.begin() + static_cast<long>(which));
      worst.tokens -= lengths_[s];
      worst.load -= t(s, worst);
      to->sequences.push_back(s);
      to->tokens += lengths_[s];
      to->load += t(s, *to);
    }
  }

  static double makespan(const std::vector<Slot>& slots) {
    double m = 0;
    for (const Slot& s : slots) m = std::max(m, s.load);
    return m;
  }

  const std::vector<int64_t>& lengths_;
  int world_, largest_;
  int64_t memory_;
  std::vector<int> order_;
  std::vector<std::vector<double>> seconds_;  // [log2(size)][sequence]
};

}  // namespace

std::optional<std::vector<Group>> greedyGroups(const std::vector<int64_t>& lengths, int worldSize,
                                               int largestGroup, int64_t memoryTokens,
                                               const SequenceTime& time) {
  auto slots = Greedy(lengths, worldSize, largestGroup, memoryTokens, time).best();
  if (!slots) return std::nullopt;
  std::vector<Group> groups;
  for (Slot& s : *slots) groups.push_back(Group{0, s.size, std::move(s.sequences), s.load});
  placeGroups(groups, worldSize, largestGroup);
  return groups;
}

}  // namespace gyre::flexsp
