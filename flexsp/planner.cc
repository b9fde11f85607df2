#include "flexsp/planner.h"

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "flexsp/bucketing.h"
#include "flexsp/greedy.h"
#include "flexsp/mip.h"

namespace gyre::flexsp {

namespace {

void checkProblem(const Problem& p) {
  if (!isPowerOfTwo(p.worldSize))
    throw PlanError("world size " + std::to_string(p.worldSize) + " is not a power of two");
  if (p.memoryTokens <= 0)
    throw PlanError("memory limit " + std::to_string(p.memoryTokens) +
                    " tokens per rank is not positive");
  if (p.maxGroupSize != 0 && !isPowerOfTwo(p.maxGroupSize))
    throw PlanError("the largest group " + std::to_string(p.maxGroupSize) +
                    " is not a power of two");
  const int64_t world = int64_t{p.worldSize} * p.memoryTokens;
  const int64_t group = int64_t{p.largestGroup()} * p.memoryTokens;
  int64_t total = 0;
  for (size_t s = 0; s < p.lengths.size(); ++s) {
    const int64_t l = p.lengths[s];
    if (l <= 0)
      throw PlanError("sequence " + std::to_string(s) + " has length " + std::to_string(l));
    if (l > group)
      throw PlanError(
          "sequence " + std::to_string(s) + " of " + std::to_string(l) +
          " tokens does not fit even " +
          (p.largestGroup() == p.worldSize ? "the whole world (" : "the largest group allowed (") +
          std::to_string(p.largestGroup()) + " ranks x " + std::to_string(p.memoryTokens) +
          " tokens)");
    total += l;
  }
  if (total > world)
    throw PlanError("the batch's " + std::to_string(total) + " tokens exceed the world's memory (" +
                    std::to_string(p.worldSize) + " ranks x " + std::to_string(p.memoryTokens) +
                    " tokens): split it into micro-batches");
}

void defaultLog(bool warning, const std::string& line) {
  const char* level = std::getenv("GYRE_DEBUG");
  const bool none = level && (!strcasecmp(level, "NONE") || !strcasecmp(level, "ERROR"));
  const bool info = level && (!strcasecmp(level, "INFO") || !strcasecmp(level, "TRACE"));
  if (warning ? !none : info)
    std::fprintf(stderr, "gyre flexsp %s %s\n", warning ? "WARN" : "INFO", line.c_str());
}

std::string seconds(double s) {
  char out[32];
  std::snprintf(out, sizeof out, "%.3g s", s);
  return out;
}

// The MIP's groups, filled with the batch's own sequences: each bucket's,
// longest first, to the group taking that bucket whose time is least so
// far (FlexSP spreads sequences within a group type so).
std::vector<Group> spread(const std::vector<MipGroup>& mip, const std::vector<Bucket>& buckets,
                          const Problem& p, const SequenceTime& time) {
  std::vector<Group> groups;
  for (const MipGroup& g : mip) groups.push_back(Group{0, g.size, {}, 0});
  for (size_t b = buckets.size(); b-- > 0;) {
    std::vector<int> left(mip.size());
    for (size_t g = 0; g < mip.size(); ++g) left[g] = mip[g].counts[b];
    for (int s : buckets[b].sequences) {
      size_t to = mip.size();
      for (size_t g = 0; g < mip.size(); ++g)
        if (left[g] > 0 && (to == mip.size() || groups[g].seconds < groups[to].seconds)) to = g;
      --left[to];
      groups[to].sequences.push_back(s);
      groups[to].seconds += time(p.lengths[s], groups[to].size);
    }
  }
  placeGroups(groups, p.worldSize, p.largestGroup());
  return groups;
}

// Seeds for the MIP: the greedy plan of the batch itself, and the greedy
// solution of the bucketed program (every sequence at its bucket's
// length, which holds the program's memory rows where the first may not),
// each as bucket counts per group.
std::vector<std::vector<MipGroup>> seedsFor(const std::vector<Group>& greedy,
                                            const std::vector<Bucket>& buckets, const Problem& p,
                                            const MipInput& in) {
  std::vector<int64_t> padded(p.lengths.size());
  std::vector<size_t> bucketOf(p.lengths.size());
  for (size_t b = 0; b < buckets.size(); ++b)
    for (int s : buckets[b].sequences) padded[s] = buckets[b].length, bucketOf[s] = b;
  auto counts = [&](const std::vector<Group>& groups) {
    std::vector<MipGroup> seed;
    for (const Group& g : groups) {
      MipGroup m{g.size, std::vector<int>(buckets.size(), 0)};
      for (int s : g.sequences) ++m.counts[bucketOf[s]];
      seed.push_back(std::move(m));
    }
    return seed;
  };
  std::vector<std::vector<MipGroup>> seeds{counts(greedy)};
  auto bucketed =
      greedyGroups(padded, p.worldSize, p.largestGroup(), p.memoryTokens, [&](int64_t l, int size) {
        size_t b = 0;
        while (buckets[b].length != l) ++b;
        int k = 0;
        while ((1 << k) < size) ++k;
        return in.seconds[b][static_cast<size_t>(k)];
      });
  if (bucketed) seeds.push_back(counts(*bucketed));
  return seeds;
}

}  // namespace

std::string plannerSolver() { return solverName(); }

Plan ulyssesPlan(const Problem& problem, const SequenceTime& time) {
  checkProblem(problem);
  if (problem.largestGroup() < problem.worldSize)
    throw PlanError("Ulysses over the whole world needs groups of " +
                    std::to_string(problem.worldSize) + " ranks; the largest allowed is " +
                    std::to_string(problem.largestGroup()));
  Plan plan;
  plan.groups.push_back(Group{0, problem.worldSize, {}, 0});
  plan.groups[0].sequences.resize(problem.lengths.size());
  std::iota(plan.groups[0].sequences.begin(), plan.groups[0].sequences.end(), 0);
  plan.method = "ulysses";
  predict(plan, problem, time);
  return plan;
}

Plan planBatch(const Problem& problem, const SequenceTime& time, const PlanOptions& options) {
  checkProblem(problem);
  auto log = options.log ? options.log : defaultLog;
  Plan greedy;
  greedy.method = "greedy";
  if (auto groups = greedyGroups(problem.lengths, problem.worldSize, problem.largestGroup(),
                                 problem.memoryTokens, time))
    greedy.groups = std::move(*groups);
  else  // cannot happen for a batch checkProblem passed (one world group holds it), but say so
    throw PlanError("no greedy shape holds the batch");
  predict(greedy, problem, time);
  auto fallBack = [&](const std::string& why) {
    greedy.note = why + ": greedy plan (" + seconds(greedy.seconds) + ")";
    log(true, greedy.note);
    return greedy;
  };
  const std::string solver = solverName();
  if (!options.useSolver) {
    greedy.note = "solver: off: greedy plan (" + seconds(greedy.seconds) + ")";
    log(false, greedy.note);
    return greedy;
  }
  if (solver.empty()) return fallBack("solver: none built in (no GLPK at configure time)");
  if (options.timeLimitSeconds <= 0) return fallBack("solver: time limit 0 s");
  if (problem.lengths.empty()) return fallBack("solver: nothing to solve");

  const std::vector<Bucket> buckets = bucketLengths(problem.lengths, options.buckets);
  MipInput in;
  in.worldSize = problem.worldSize;
  in.largestGroup = problem.largestGroup();
  in.memoryTokens = problem.memoryTokens;
  in.timeLimitSeconds = options.timeLimitSeconds;
  // Memory by each bucket's longest sequence (so whatever the spreading
  // does, memory holds); time by its sequences' mean (so a group's time in
  // the program is what its sequences will take, on average).
  for (const Bucket& b : buckets) {
    in.lengths.push_back(b.length);
    in.counts.push_back(static_cast<int>(b.sequences.size()));
    in.seconds.emplace_back();
    for (int p = 1; p <= in.largestGroup; p *= 2) {
      double sum = 0;
      for (int s : b.sequences) sum += time(problem.lengths[s], p);
      in.seconds.back().push_back(sum / double(b.sequences.size()));
    }
  }
  in.seeds = seedsFor(greedy.groups, buckets, problem, in);
  const MipResult r = solveMip(in);
  const std::string limit = seconds(options.timeLimitSeconds);
  const std::string took = seconds(r.elapsedSeconds);
  const std::string shape = std::to_string(buckets.size()) + " buckets";
  switch (r.status) {
    case MipResult::Status::Absent:
      return fallBack("solver: " + r.detail);
    case MipResult::Status::NoSolution:
      return fallBack("solver timed out after " + limit + " (" + solver + ", " + shape + ")");
    case MipResult::Status::Infeasible:
      return fallBack("solver: " + solver + " found the bucketed batch infeasible (" + shape + ")");
    case MipResult::Status::Failed:
      return fallBack("solver: " + solver + " failed: " + r.detail);
    case MipResult::Status::Optimal:
    case MipResult::Status::Feasible:
      break;
  }
  Plan plan;
  plan.groups = spread(r.groups, buckets, problem, time);
  predict(plan, problem, time);
  const bool optimal = r.status == MipResult::Status::Optimal;
  plan.method = optimal ? "glpk optimal" : "glpk best found";
  char gap[48] = "";
  if (!optimal && r.gap < 1e300)
    std::snprintf(gap, sizeof gap, ", within %.1f%% of the bound", 100 * r.gap);
  plan.note = optimal
                  ? "solver: " + solver + " optimal in " + took
                  : "solver: " + solver + " stopped at the " + limit + " limit: best found" + gap;
  plan.note += " (" + shape + "; " + seconds(plan.seconds) + " against greedy " +
               seconds(greedy.seconds) + ")";
  if (greedy.seconds <
      plan.seconds) {  // the buckets' padding can cost more than the greedy's misses
    greedy.note = plan.note + ": greedy plan, which predicts less";
    log(!optimal, greedy.note);
    return greedy;
  }
  log(!optimal, plan.note);
  return plan;
}

}  // namespace gyre::flexsp
