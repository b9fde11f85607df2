// What the FlexSP planner decides for one training step: sequence-parallel
// groups of power-of-two sizes covering the world, and which sequences each
// group runs (docs/sequence-parallel.md, "FlexSP planner").
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gyre::flexsp {

// One step's batch and the machine it runs on.
struct Problem {
  std::vector<int64_t> lengths;  // tokens of each sequence
  int worldSize = 1;             // ranks, a power of two
  // Tokens of activations one rank holds at most: a group of P ranks holds
  // the sequences it runs together, so their lengths add up to at most
  // P x memoryTokens.
  int64_t memoryTokens = 0;
  // The largest group allowed, a power of two; 0: the world. Ulysses splits
  // the attention heads among a group's ranks, so a model of H heads allows
  // at most the largest power of two dividing H.
  int maxGroupSize = 0;
  int largestGroup() const {
    return maxGroupSize > 0 && maxGroupSize < worldSize ? maxGroupSize : worldSize;
  }
};

// Seconds one sequence of `length` tokens takes in a group of `ranks` ranks
// (a power of two): its compute and its communication (time_model.h).
using SequenceTime = std::function<double(int64_t length, int ranks)>;

struct Group {
  int firstRank = 0;           // world ranks firstRank .. firstRank + size - 1
  int size = 1;                // a power of two; firstRank is a multiple of it
  std::vector<int> sequences;  // indices into Problem::lengths, run one after another
  double seconds = 0;          // predicted: the sum of its sequences' times
};

struct Plan {
  std::vector<Group> groups;  // by firstRank; a group may be idle (no sequence)
  double seconds = 0;         // predicted step time: the slowest group's
  std::string method;         // "glpk optimal", "glpk best found", "greedy", "ulysses"
  std::string note;           // what the planner logged about how it got here
};

// A batch no plan can hold (a sequence longer than the world's memory, the
// whole batch beyond it), or arguments out of range.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why the plan is not valid for the problem ("" when it is): groups of
// power-of-two sizes up to the largest allowed, aligned, disjoint and
// covering every rank, every sequence in exactly one group, no group
// beyond its memory.
std::string checkPlan(const Plan& plan, const Problem& problem);

// Places groups of the given sizes (powers of two adding up to at most the
// world) on aligned blocks of consecutive ranks, larger first, fills the
// ranks left over with idle groups of at most largestGroup ranks (0: any),
// and orders them by first rank.
void placeGroups(std::vector<Group>& groups, int worldSize, int largestGroup = 0);

// Each group's predicted seconds and the plan's.
void predict(Plan& plan, const Problem& problem, const SequenceTime& time);

bool isPowerOfTwo(int64_t n);
// The smallest power of two p <= largestGroup with length <= p x memory; 0 when none.
int smallestGroupFor(int64_t length, int largestGroup, int64_t memoryTokens);

}  // namespace gyre::flexsp
