// The mixed-integer program of FlexSP (its section 4), over buckets:
// how many groups of each power-of-two size, and how many sequences of
// each bucket every group takes, minimising the slowest group's time.
//
//   minimise C  subject to
//     sum over groups g of size(g) * used(g)        <= world
//     sum over groups g of n(b, g)                  = count(b)        every bucket b
//     sum over b of length(b) * n(b, g)            <= size(g) * memory * used(g)   (longest)
//     sum over b of seconds(b, size(g)) * n(b, g)  <= C                every group g   (mean)
//     sum over g of size(g) * (the same)           <= world * C      (a bound for the relaxation)
//   used(g) binary, n(b, g) integer >= 0; a group is a (size, index) pair,
//   index < min(world / size, the sequences that fit that size); groups of
//   one size are used in index order with non-increasing times (symmetry).
//
// Solved by a real solver where one was built in (GLPK), within a time
// limit, seeded with greedy solutions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::flexsp {

struct MipGroup {
  int size = 1;
  std::vector<int> counts;  // per bucket: how many of its sequences the group takes
};

struct MipInput {
  int worldSize = 1;
  int largestGroup = 1;  // group sizes 1, 2, 4 ... up to it
  int64_t memoryTokens = 0;
  std::vector<int64_t> lengths;  // per bucket: its longest sequence (for memory)
  std::vector<int> counts;       // per bucket: its sequences
  std::vector<std::vector<double>>
      seconds;  // [bucket][log2(size)] up to largestGroup: one sequence's time, on average
  double timeLimitSeconds = 1;
  std::vector<std::vector<MipGroup>>
      seeds;  // solutions to start from (infeasible ones are dropped)
};

struct MipResult {
  enum class Status {
    Optimal,     // proven optimal (within the solver's tolerances)
    Feasible,    // the time limit came first; the best found
    NoSolution,  // the time limit came first, nothing found
    Infeasible,  // the bucketed program has no solution
    Failed,      // the solver failed (detail says how)
    Absent,      // no solver built in
  };
  Status status = Status::Absent;
  std::vector<MipGroup> groups;  // the groups used, when Optimal or Feasible
  double objective = 0;          // the slowest group's time, by the bucket bounds
  double gap = 0;                // relative distance to the best bound, when Feasible
  double elapsedSeconds = 0;
  std::string detail;
};

// "GLPK 5.0", or "" where no solver was built in.
std::string solverName();
MipResult solveMip(const MipInput& input);

}  // namespace gyre::flexsp
