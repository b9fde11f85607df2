#include "flexsp/plan.h"

#include <algorithm>

namespace gyre::flexsp {

bool isPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

int smallestGroupFor(int64_t length, int largestGroup, int64_t memoryTokens) {
  for (int p = 1; p <= largestGroup; p *= 2)
    if (length <= int64_t{p} * memoryTokens) return p;
  return 0;
}

std::string checkPlan(const Plan& plan, const Problem& problem) {
  const int world = problem.worldSize;
  std::vector<int> owner(static_cast<size_t>(world), -1);
  std::vector<int> seen(problem.lengths.size(), 0);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& group = plan.groups[g];
    const std::string name = "group " + std::to_string(g) + " (ranks " +
                             std::to_string(group.firstRank) + "+" + std::to_string(group.size) +
                             ")";
    if (!isPowerOfTwo(group.size)) return name + ": size is not a power of two";
    if (group.size > problem.largestGroup())
      return name + ": larger than the largest group allowed (" +
             std::to_string(problem.largestGroup()) + ")";
    if (group.firstRank < 0 || group.firstRank % group.size != 0)
      return name + ": not aligned to its size";
    if (group.firstRank + group.size > world) return name + ": beyond the world";
    for (int r = group.firstRank; r < group.firstRank + group.size; ++r) {
      if (owner[static_cast<size_t>(r)] >= 0)
        return name + ": rank " + std::to_string(r) + " is also in group " +
               std::to_string(owner[static_cast<size_t>(r)]);
      owner[static_cast<size_t>(r)] = static_cast<int>(g);
    }
    int64_t tokens = 0;
    for (int s : group.sequences) {
      if (s < 0 || static_cast<size_t>(s) >= problem.lengths.size())
        return name + ": no sequence " + std::to_string(s);
      ++seen[static_cast<size_t>(s)];
      tokens += problem.lengths[static_cast<size_t>(s)];
    }
    if (tokens > int64_t{group.size} * problem.memoryTokens)
      return name + ": " + std::to_string(tokens) + " tokens beyond its memory of " +
             std::to_string(int64_t{group.size} * problem.memoryTokens);
  }
  for (int r = 0; r < world; ++r)
    if (owner[static_cast<size_t>(r)] < 0) return "rank " + std::to_string(r) + " is in no group";
  for (size_t s = 0; s < seen.size(); ++s)
    if (seen[s] != 1)
      return "sequence " + std::to_string(s) + " is in " + std::to_string(seen[s]) + " groups";
  return "";
}

void placeGroups(std::vector<Group>& groups, int worldSize, int largestGroup) {
  if (largestGroup <= 0) largestGroup = worldSize;
  // Powers of two placed largest first are each aligned to their size:
  // every block before one is a multiple of it.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.size > b.size; });
  int next = 0;
  for (Group& g : groups) {
    g.firstRank = next;
    next += g.size;
  }
  if (next > worldSize)
    throw PlanError("groups need " + std::to_string(next) + " ranks of " +
                    std::to_string(worldSize));
  while (next < worldSize) {  // idle ranks: the largest aligned blocks that fit
    int size = std::min(largestGroup, next == 0 ? worldSize : next & -next);
    while (next + size > worldSize) size /= 2;
    groups.push_back(Group{next, size, {}, 0});
    next += size;
  }
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.firstRank < b.firstRank; });
}

void predict(Plan& plan, const Problem& problem, const SequenceTime& time) {
  plan.seconds = 0;
  for (Group& g : plan.groups) {
    g.seconds = 0;
    for (int s : g.sequences) g.seconds += time(problem.lengths[static_cast<size_t>(s)], g.size);
    plan.seconds = std::max(plan.seconds, g.seconds);
  }
}

}  // namespace gyre::flexsp
