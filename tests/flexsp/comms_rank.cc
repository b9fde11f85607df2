// One rank of the group-communicator cache's test (under gyrerun): plans of
// several shapes in turn, each group's communicator checked (its size, an
// AllReduce over exactly its ranks), the same one handed back for a block
// seen before, and gyreCommSplit called once per plan with a new block and
// never for one whose blocks all exist. Then rank 0's plan of a batch,
// broadcast, is every rank's. Exit code: the failures.
#include <cstdio>
#include <string>
#include <vector>

#include "flexsp/group_comms.h"
#include "flexsp/planner.h"
#include "gyre/gyre.h"

namespace {

using namespace gyre::flexsp;

int failures = 0;
int rank = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("rank %d: FAILED: %s\n", rank, what.c_str());
    ++failures;
  }
}

Plan planOf(const std::vector<int>& sizes, int world) {
  Plan p;
  for (int s : sizes) p.groups.push_back(Group{0, s, {}, 0});
  placeGroups(p.groups, world);
  return p;
}

}  // namespace

int main() {
  gyreComm_t world = nullptr;
  if (gyreCommInitFromEnv(&world, nullptr) != gyreSuccess) {
    std::printf("init: %s\n", gyreGetLastError(nullptr));
    return 1;
  }
  int n = 0;
  gyreCommUserRank(world, &rank);
  gyreCommCount(world, &n);
  if (n != 4) {
    std::printf("run with 4 ranks\n");
    return 1;
  }
  {
    GroupComms cache(world);
    // Shapes in turn, and the splits made so far after each.
    const std::vector<std::pair<std::vector<int>, int>> steps{
        {{4}, 1},    {{2, 2}, 2},       {{2, 1, 1}, 3}, {{4}, 3},
        {{2, 2}, 3}, {{1, 1, 1, 1}, 4}, {{2, 1, 1}, 4}};
    std::vector<std::pair<std::pair<int, int>, gyreComm_t>> seen;
    for (const auto& [sizes, splits] : steps) {
      const Plan plan = planOf(sizes, n);
      std::string shape;
      for (int s : sizes) shape += std::to_string(s) + " ";
      gyreComm_t mine = cache.forPlan(plan);
      expect(cache.splits() == splits, "shape " + shape + ": " + std::to_string(cache.splits()) +
                                           " splits, not " + std::to_string(splits));
      for (const Group& g : plan.groups) {
        if (rank < g.firstRank || rank >= g.firstRank + g.size) continue;
        int size = 0, sub = -1;
        gyreCommCount(mine, &size);
        gyreCommUserRank(mine, &sub);
        expect(size == g.size && sub == rank - g.firstRank,
               "shape " + shape + ": the group's size and rank");
        long long v = rank, sum = 0;
        expect(gyreAllReduce(&v, &sum, 1, gyreInt64, gyreSum, mine, nullptr) == gyreSuccess,
               "allreduce");
        long long want = 0;
        for (int r = g.firstRank; r < g.firstRank + g.size; ++r) want += r;
        expect(sum == want,
               "shape " + shape + ": sum " + std::to_string(sum) + " over the group's ranks");
        const std::pair<int, int> block{g.firstRank, g.size};
        for (auto& [b, c] : seen)
          if (b == block)
            expect(c == mine, "shape " + shape + ": the block's communicator handed back");
        seen.emplace_back(block, mine);
      }
    }

    // Rank 0 plans; every rank gets its plan and its group.
    Problem p{{3000, 1500, 900, 400, 300, 200, 100, 50}, n, 2048};
    Plan plan;
    if (rank == 0)
      plan = planBatch(
          p, [](int64_t l, int r) { return (1e-6 * l * l + 1e-3 * l) / r + (r > 1) * 0.01; });
    broadcastPlan(plan, 0, world);
    expect(checkPlan(plan, p).empty(), "the broadcast plan: " + checkPlan(plan, p));
    long long mine = 0;
    for (const Group& g : plan.groups)
      for (int s : g.sequences) mine = mine * 31 + g.firstRank * 1000 + g.size * 100 + s;
    long long all[4] = {0, 0, 0, 0};
    gyreAllGather(&mine, all, 1, gyreInt64, world, nullptr);
    for (int r = 0; r < n; ++r)
      expect(all[r] == all[0], "rank " + std::to_string(r) + "'s plan is rank 0's");
    expect(cache.forPlan(plan) != nullptr, "a communicator for the planned group");
    std::printf("rank %d: %d splits\n", rank, cache.splits());
  }
  gyreCommDestroy(world);
  return failures;
}
