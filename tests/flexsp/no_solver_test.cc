// The planner built without a solver (as where libglpk-dev is absent):
// the greedy plan, valid, and a warning saying why.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "flexsp/planner.h"
#include "tests/flexsp/synthetic.h"

namespace gyre::flexsp::test {
namespace {

TEST(PlannerWithoutSolver, FallsBackToTheGreedyPlanAndSaysSo) {
  EXPECT_EQ(plannerSolver(), "");
  std::mt19937_64 rng(2);
  Problem p{randomLengths(rng, 50, 700, 1.1, 32 * 4096), 32, 4096};
  std::vector<std::pair<bool, std::string>> lines;
  PlanOptions o;
  o.log = [&](bool warning, const std::string& line) { lines.emplace_back(warning, line); };
  const Plan plan = planBatch(p, synthetic(), o);
  EXPECT_EQ(plan.method, "greedy");
  EXPECT_EQ(checkPlan(plan, p), "");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].first);
  EXPECT_NE(lines[0].second.find("solver: none built in (no GLPK at configure time): greedy plan"),
            std::string::npos)
      << lines[0].second;
}

}  // namespace
}  // namespace gyre::flexsp::test
