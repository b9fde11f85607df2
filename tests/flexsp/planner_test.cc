// The FlexSP planner: every plan valid on random batches, the solver's
// plans optimal on small ones (against brute force), the greedy fallback
// when the solver is off or out of time (and the log saying so), the
// errors for batches no plan holds, and the bucketing.
#include "flexsp/planner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "flexsp/bucketing.h"
#include "tests/flexsp/brute_force.h"
#include "tests/flexsp/synthetic.h"

namespace gyre::flexsp::test {
namespace {

struct Logged {
  std::vector<std::pair<bool, std::string>> lines;
  PlanOptions options(double limit = 1.0) {
    PlanOptions o;
    o.timeLimitSeconds = limit;
    o.log = [this](bool warning, const std::string& line) { lines.emplace_back(warning, line); };
    return o;
  }
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Planner, EveryPlanIsValidOnRandomBatches) {
  std::mt19937_64 rng(7);
  for (int world : {1, 2, 4, 8, 16, 64}) {
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t memory = 1024 << (trial % 3);
      const int n = 1 + static_cast<int>(rng() % 60);
      const Problem p =
          fitted(randomLengths(rng, n, 600, 1.2, int64_t{world} * memory), world, memory);
      for (bool solver : {true, false}) {
        Logged log;
        PlanOptions o = log.options(0.5);
        o.useSolver = solver;
        const Plan plan = planBatch(p, synthetic(), o);
        const std::string what = "world " + std::to_string(world) + ", memory " +
                                 std::to_string(memory) + ", " + std::to_string(p.lengths.size()) +
                                 " sequences, " + plan.note;
        EXPECT_EQ(checkPlan(plan, p), "") << what;
        ASSERT_EQ(log.lines.size(), 1u) << what;
        EXPECT_EQ(log.lines[0].second, plan.note);
        double slowest = 0;
        for (const Group& g : plan.groups) {
          double s = 0;
          for (int q : g.sequences) s += syntheticSeconds(p.lengths[q], g.size);
          EXPECT_NEAR(g.seconds, s, 1e-9 * (1 + s)) << what;
          slowest = std::max(slowest, s);
        }
        EXPECT_NEAR(plan.seconds, slowest, 1e-9 * (1 + slowest)) << what;
        EXPECT_LE(plan.seconds, ulyssesPlan(p, synthetic()).seconds * (1 + 1e-9)) << what;
      }
    }
  }
}

TEST(Planner, SolverReachesTheBruteForceOptimumOnSmallBatches) {
  if (plannerSolver().empty()) GTEST_SKIP() << "built without a MIP solver";
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 24; ++trial) {
    const int world = trial % 2 ? 8 : 4;
    const int64_t memory = 2048;
    const int n = 2 + static_cast<int>(rng() % 6);  // 2 to 7 sequences
    const Problem p =
        fitted(randomLengths(rng, n, 1500, 1.0, int64_t{world} * memory), world, memory);
    Logged log;
    const Plan plan = planBatch(p, synthetic(), log.options(5.0));
    const double best = BruteForce(p, synthetic()).optimum();
    std::string lengths;
    for (int64_t l : p.lengths) lengths += std::to_string(l) + " ";
    EXPECT_EQ(checkPlan(plan, p), "") << lengths;
    EXPECT_EQ(plan.method, "glpk optimal") << plan.note;
    EXPECT_NEAR(plan.seconds, best, 1e-7 * best)
        << "world " << world << ", lengths " << lengths << plan.note;
    EXPECT_TRUE(contains(plan.note, "optimal in")) << plan.note;
    // The greedy plan is a plan too: never below the optimum.
    PlanOptions greedyOnly = log.options();
    greedyOnly.useSolver = false;
    EXPECT_GE(planBatch(p, synthetic(), greedyOnly).seconds, best * (1 - 1e-9));
  }
}

// A model of few heads bounds Ulysses' groups: every plan keeps to the
// largest size allowed (idle groups too), and the solver still reaches the
// brute-force optimum under the bound.
TEST(Planner, TheLargestGroupAllowedBoundsEveryPlan) {
  std::mt19937_64 rng(13);
  for (int largest : {1, 2, 4}) {
    for (int trial = 0; trial < 4; ++trial) {
      const int64_t memory = 2048;
      Problem p = fitted(randomLengths(rng, 30, 500, 1.0, largest * memory), 16, memory);
      p.maxGroupSize = largest;
      for (bool solver : {true, false}) {
        Logged log;
        PlanOptions o = log.options(0.3);
        o.useSolver = solver;
        const Plan plan = planBatch(p, synthetic(), o);
        EXPECT_EQ(checkPlan(plan, p), "") << plan.note;
        for (const Group& g : plan.groups) EXPECT_LE(g.size, largest) << plan.note;
      }
    }
    if (plannerSolver().empty()) continue;
    for (int trial = 0; trial < 4; ++trial) {
      Problem p = fitted(randomLengths(rng, 6, 700, 1.0, largest * 1024), 8, 1024);
      p.maxGroupSize = largest;
      Logged log;
      const Plan plan = planBatch(p, synthetic(), log.options(5.0));
      const double best = BruteForce(p, synthetic()).optimum();
      EXPECT_NEAR(plan.seconds, best, 1e-7 * best) << "largest " << largest << ": " << plan.note;
    }
  }
  Problem tooLong{{100, 5000}, 8, 1000};
  tooLong.maxGroupSize = 4;
  try {
    planBatch(tooLong, synthetic());
    ADD_FAILURE() << "a sequence beyond the largest group's memory was planned";
  } catch (const PlanError& e) {
    EXPECT_TRUE(contains(e.what(),
                         "sequence 1 of 5000 tokens does not fit even the largest group allowed (4 "
                         "ranks x 1000 tokens)"))
        << e.what();
  }
  Problem fine{{100, 300}, 8, 1000};
  fine.maxGroupSize = 4;
  EXPECT_THROW(ulyssesPlan(fine, synthetic()), PlanError);
  fine.maxGroupSize = 3;
  EXPECT_THROW(planBatch(fine, synthetic()), PlanError);
}

TEST(Planner, WithoutTheSolverOrWithNoTimeTheGreedyPlanIsUsedAndLogged) {
  std::mt19937_64 rng(3);
  Problem p{randomLengths(rng, 40, 800, 1.0, 16 * 4096), 16, 4096};
  Logged log;
  PlanOptions off = log.options();
  off.useSolver = false;
  const Plan a = planBatch(p, synthetic(), off);
  EXPECT_EQ(a.method, "greedy");
  EXPECT_TRUE(contains(log.lines.back().second, "solver: off: greedy plan"))
      << log.lines.back().second;
  EXPECT_FALSE(log.lines.back().first) << "asked for: no warning";

  const Plan b = planBatch(p, synthetic(), log.options(0));
  EXPECT_EQ(b.method, "greedy");
  EXPECT_EQ(checkPlan(b, p), "");
  EXPECT_TRUE(log.lines.back().first) << "a fallback is a warning";
  const std::string expected =
      plannerSolver().empty() ? "solver: none built in" : "solver: time limit 0 s: greedy plan";
  EXPECT_TRUE(contains(log.lines.back().second, expected)) << log.lines.back().second;
  EXPECT_EQ(a.seconds, b.seconds);
}

// A limit far too short for a large batch: the solver stops, and the plan
// says whether it kept the solver's best (no worse than the greedy seed it
// was given) or, with nothing found, the greedy plan.
TEST(Planner, ASolverOutOfTimeSaysWhatItReturns) {
  if (plannerSolver().empty()) GTEST_SKIP() << "built without a MIP solver";
  std::mt19937_64 rng(5);
  const Problem p = fitted(randomLengths(rng, 300, 1000, 1.2, 64 * 8192), 64, 8192);
  Logged log;
  PlanOptions o = log.options(0.001);
  o.buckets = 32;
  const Plan plan = planBatch(p, synthetic(), o);
  EXPECT_EQ(checkPlan(plan, p), "");
  const std::string& line = log.lines.back().second;
  EXPECT_TRUE(log.lines.back().first) << line;
  if (plan.method == "greedy") {  // nothing found, or the best found predicts more
    EXPECT_TRUE(contains(line, "timed out after 0.001 s") ||
                contains(line, "stopped at the 0.001 s limit"))
        << line;
    EXPECT_TRUE(contains(line, "greedy plan")) << line;
  } else {
    EXPECT_EQ(plan.method, "glpk best found");
    EXPECT_TRUE(contains(line, "stopped at the 0.001 s limit: best found")) << line;
  }
  PlanOptions greedyOnly = log.options();
  greedyOnly.useSolver = false;
  EXPECT_LE(plan.seconds, planBatch(p, synthetic(), greedyOnly).seconds * (1 + 1e-9));
}

TEST(Planner, BatchesNoPlanHoldsAreErrorsThatSayWhy) {
  auto error = [](const Problem& p) {
    try {
      planBatch(p, synthetic());
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(contains(
      error(Problem{{100, 9000}, 8, 1000}),
      "sequence 1 of 9000 tokens does not fit even the whole world (8 ranks x 1000 tokens)"));
  EXPECT_TRUE(contains(error(Problem{{5000, 4000}, 8, 1000}), "split it into micro-batches"));
  EXPECT_TRUE(contains(error(Problem{{10}, 6, 1000}), "world size 6 is not a power of two"));
  EXPECT_TRUE(contains(error(Problem{{10, 0}, 4, 1000}), "sequence 1 has length 0"));
  EXPECT_TRUE(contains(error(Problem{{10}, 4, 0}), "memory limit 0"));
  // Exactly full is still a plan.
  Problem full{{4000, 2000, 1000, 500, 500}, 8, 1000};
  EXPECT_EQ(checkPlan(planBatch(full, synthetic()), full), "");
}

TEST(Planner, UlyssesIsOneGroupOfTheWorld) {
  Problem p{{300, 200, 100}, 8, 1000};
  const Plan u = ulyssesPlan(p, synthetic());
  ASSERT_EQ(u.groups.size(), 1u);
  EXPECT_EQ(u.groups[0].size, 8);
  EXPECT_EQ(u.groups[0].sequences, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(checkPlan(u, p), "");
  EXPECT_DOUBLE_EQ(u.seconds,
                   syntheticSeconds(300, 8) + syntheticSeconds(200, 8) + syntheticSeconds(100, 8));
}

TEST(PlanCheck, NamesWhatIsWrong) {
  Problem p{{300, 200}, 4, 200};
  Plan plan;
  plan.groups = {Group{0, 2, {0}, 0}, Group{2, 2, {1}, 0}};
  EXPECT_EQ(checkPlan(plan, p), "");
  plan.groups[1].firstRank = 1;
  EXPECT_TRUE(contains(checkPlan(plan, p), "not aligned")) << checkPlan(plan, p);
  plan.groups[1] = Group{2, 3, {1}, 0};
  EXPECT_TRUE(contains(checkPlan(plan, p), "not a power of two"));
  plan.groups[1] = Group{2, 1, {1}, 0};
  EXPECT_TRUE(contains(checkPlan(plan, p), "rank 3 is in no group"));
  plan.groups = {Group{0, 2, {0, 1}, 0}, Group{2, 2, {}, 0}};
  EXPECT_TRUE(contains(checkPlan(plan, p), "500 tokens beyond its memory of 400"));
  plan.groups = {Group{0, 2, {0}, 0}, Group{2, 2, {0}, 0}};
  EXPECT_TRUE(contains(checkPlan(plan, p), "sequence 0 is in 2 groups"));
  plan.groups = {Group{0, 4, {0, 1}, 0}, Group{2, 2, {}, 0}};
  EXPECT_TRUE(contains(checkPlan(plan, p), "rank 2 is also in group 0"));
}

TEST(PlaceGroups, AlignsLargestFirstAndFillsIdleRanks) {
  std::vector<Group> g{Group{0, 1, {0}, 0}, Group{0, 4, {1}, 0}, Group{0, 2, {2}, 0}};
  placeGroups(g, 16);
  std::vector<std::pair<int, int>> got;
  for (const Group& x : g) got.emplace_back(x.firstRank, x.size);
  // 4 at 0, 2 at 4, 1 at 6; then idle 1 at 7 and 8 at 8.
  EXPECT_EQ(got, (std::vector<std::pair<int, int>>{{0, 4}, {4, 2}, {6, 1}, {7, 1}, {8, 8}}));
}

TEST(Bucketing, ExactWhenFewLengthsAndMinimalPaddingOtherwise) {
  const std::vector<int64_t> few{5, 9, 5, 7, 9};
  const auto exact = bucketLengths(few, 4);
  ASSERT_EQ(exact.size(), 3u);
  EXPECT_EQ(exact[0].length, 5);
  EXPECT_EQ(exact[0].sequences, (std::vector<int>{0, 2}));
  EXPECT_EQ(exact[2].sequences, (std::vector<int>{1, 4}));
  const auto one = bucketLengths(few, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].length, 9);
  EXPECT_EQ(one[0].sequences.size(), 5u);
  // Against every way to cut 8 distinct sorted lengths into 3 buckets.
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> l = randomLengths(rng, 8, 1000, 1.0, 100000);
    const auto got = bucketLengths(l, 3);
    auto padding = [&](const std::vector<Bucket>& bs) {
      double s = 0;
      for (const Bucket& b : bs)
        for (int q : b.sequences) s += double(b.length - l[q]);
      return s;
    };
    std::vector<int64_t> v = l;
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    double best = 1e300;
    for (size_t i = 1; i < v.size(); ++i)
      for (size_t j = i + 1; j < v.size(); ++j) {
        double s = 0;
        for (int64_t x : l) {
          const size_t at =
              static_cast<size_t>(std::lower_bound(v.begin(), v.end(), x) - v.begin());
          s += double((at < i ? v[i - 1] : at < j ? v[j - 1] : v.back()) - x);
        }
        best = std::min(best, s);
      }
    size_t placed = 0;
    for (const Bucket& b : got) placed += b.sequences.size();
    EXPECT_EQ(placed, l.size());
    EXPECT_NEAR(padding(got), best, 1e-6);
  }
}

}  // namespace
}  // namespace gyre::flexsp::test
