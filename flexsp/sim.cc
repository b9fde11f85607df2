// gyre-flexsp-sim: the FlexSP planner's plans against fixed Ulysses over
// the whole world (one group of every rank), by the time model
// (time_model.h): the calibrated compute constants and gyre's cost model
// for the all-to-alls, on batches drawn from two long-tailed length
// distributions. Nothing runs but the planner: the step times are the
// model's. docs/PERFORMANCE-sequence.md has the command and the results.
//
// The distributions (lengths in tokens, each rounded to the nearest integer):
//   lognormal: exp(N(ln 1024, 1.0)), clamped to [32, world x memory]
//   mixture:   exp(N(ln 512, 0.7)) clamped to [32, 8192], and with
//              probability 0.02 instead uniform in [16384, 65536]
// A batch draws sequences until the next would take it past the token
// budget (--budget, default half the world's memory); batch i uses seed
// --seed + i, splitmix64 with Box-Muller, so batches are the same on every
// machine and standard library.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "flexsp/planner.h"
#include "flexsp/time_model.h"
#include "gyre/gyre.h"

namespace {

using namespace gyre::flexsp;

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1p-53; }  // [0, 1)
  double normal() {
    const double u1 = (double(next() >> 11) + 1.0) * 0x1p-53;  // (0, 1]
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * uniform());
  }

 private:
  uint64_t state_;
};

int64_t clampRound(double x, int64_t lo, int64_t hi) {
  const int64_t v = std::llround(x);
  return v < lo ? lo : v > hi ? hi : v;
}

int64_t drawLength(const std::string& dist, Random& r, int64_t longest) {
  if (dist == "lognormal")
    return clampRound(std::exp(std::log(1024.0) + 1.0 * r.normal()), 32, longest);
  if (r.uniform() < 0.02) return clampRound(16384 + r.uniform() * (65536 - 16384), 16384, 65536);
  return clampRound(std::exp(std::log(512.0) + 0.7 * r.normal()), 32, 8192);
}

std::vector<int64_t> drawBatch(const std::string& dist, uint64_t seed, int64_t budget,
                               int64_t longest) {
  Random r(seed);
  std::vector<int64_t> lengths;
  int64_t total = 0;
  for (;;) {
    const int64_t l = drawLength(dist, r, longest);
    if (total + l > budget) return lengths;
    lengths.push_back(l);
    total += l;
  }
}

std::string shapeOf(const Plan& plan) {
  // "16x1 4x4 1x32": how many groups of each size, busy ones only.
  std::string out;
  for (int size = 1; size <= 1 << 20; size *= 2) {
    int n = 0;
    for (const Group& g : plan.groups) n += g.size == size && !g.sequences.empty();
    if (n) out += (out.empty() ? "" : " ") + std::to_string(n) + "x" + std::to_string(size);
  }
  return out;
}

struct Args {
  int world = 64, perHost = 2, batches = 10, layers = 1, buckets = 16;
  int64_t memory = 8192, budget = 0;
  uint64_t seed = 1;
  double timeLimit = 1.0;
  double computeScale = 1.0;  // compute this many times faster than the calibrated core
};

int usage(const char* argv0) {
  std::fprintf(
      stderr,
      "usage: %s [--world 64] [--ranks-per-host 2] [--memory-tokens 8192] [--budget TOKENS]\n"
      "          [--batches 10] [--seed 1] [--layers 1] [--buckets 16] [--time-limit 1]\n"
      "          [--compute-scale 1]  (compute that many times faster: an assumption, not a "
      "measurement)\n",
      argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return usage(argv[0]);
    const std::string f = argv[i];
    const char* v = argv[i + 1];
    if (f == "--world")
      a.world = std::atoi(v);
    else if (f == "--ranks-per-host")
      a.perHost = std::atoi(v);
    else if (f == "--memory-tokens")
      a.memory = std::atoll(v);
    else if (f == "--budget")
      a.budget = std::atoll(v);
    else if (f == "--batches")
      a.batches = std::atoi(v);
    else if (f == "--seed")
      a.seed = std::strtoull(v, nullptr, 10);
    else if (f == "--layers")
      a.layers = std::atoi(v);
    else if (f == "--buckets")
      a.buckets = std::atoi(v);
    else if (f == "--time-limit")
      a.timeLimit = std::atof(v);
    else if (f == "--compute-scale")
      a.computeScale = std::atof(v);
    else
      return usage(argv[0]);
  }
  if (a.budget == 0) a.budget = int64_t{a.world} * a.memory / 2;
  if (a.perHost < 1 || a.perHost > a.world || a.batches < 1 || !(a.computeScale > 0))
    return usage(argv[0]);

  // The all-to-alls are priced by gyre's cost model for groups placed as
  // these ranks are: perHost to a host, hosts like this one.
  std::vector<gyreComm_t> comms(static_cast<size_t>(a.perHost));
  if (gyreCommInitAll(comms.data(), a.perHost, nullptr) != gyreSuccess) {
    std::fprintf(stderr, "gyreCommInitAll: %s\n", gyreGetLastError(nullptr));
    return 1;
  }
  UlyssesConfig config;
  config.layers = a.layers;
  config.compute.attentionSeconds /= a.computeScale;
  config.compute.linearSeconds /= a.computeScale;
  const UlyssesTime time(config, comms[0]);

  std::printf(
      "# gyre-flexsp-sim: world %d (%d ranks a host), %lld tokens a rank, budget %lld tokens a "
      "batch, "
      "seed %llu, %d layer(s), %d buckets, limit %g s, solver %s\n",
      a.world, a.perHost, static_cast<long long>(a.memory), static_cast<long long>(a.budget),
      static_cast<unsigned long long>(a.seed), a.layers, a.buckets, a.timeLimit,
      plannerSolver().empty() ? "none" : plannerSolver().c_str());
  std::printf(
      "# compute: %s (hidden %d)%s\n\n", config.compute.source.c_str(), config.compute.hidden,
      a.computeScale == 1 ? ""
                          : (", assumed " + std::to_string(a.computeScale) + "x faster").c_str());
  for (const std::string dist : {"lognormal", "mixture"}) {
    std::printf(
        "## %s\n\n| batch | sequences | tokens | longest | Ulysses s | FlexSP s | speedup | greedy "
        "speedup | groups (busy) | how |\n|---|---|---|---|---|---|---|---|---|---|\n",
        dist.c_str());
    double sumUlysses = 0, sumFlex = 0, sumGreedy = 0, sumUlyssesComm = 0;
    for (int b = 0; b < a.batches; ++b) {
      Problem p{
          drawBatch(dist, a.seed + static_cast<uint64_t>(b), a.budget, int64_t{a.world} * a.memory),
          a.world, a.memory};
      PlanOptions o;
      o.timeLimitSeconds = a.timeLimit;
      o.buckets = a.buckets;
      o.log = [](bool, const std::string&) {};
      const Plan flex = planBatch(p, time.function(), o);
      o.useSolver = false;
      const Plan greedy = planBatch(p, time.function(), o);
      const Plan ulysses = ulyssesPlan(p, time.function());
      const std::string bad = checkPlan(flex, p);
      if (!bad.empty()) {
        std::fprintf(stderr, "batch %d: invalid plan: %s\n", b, bad.c_str());
        return 1;
      }
      int64_t tokens = 0, longest = 0;
      for (int64_t l : p.lengths) tokens += l, longest = l > longest ? l : longest;
      std::printf("| %d | %zu | %lld | %lld | %.3f | %.3f | %.2fx | %.2fx | %s | %s |\n", b,
                  p.lengths.size(), static_cast<long long>(tokens), static_cast<long long>(longest),
                  ulysses.seconds, flex.seconds, ulysses.seconds / flex.seconds,
                  ulysses.seconds / greedy.seconds, shapeOf(flex).c_str(), flex.note.c_str());
      sumUlysses += ulysses.seconds, sumFlex += flex.seconds, sumGreedy += greedy.seconds;
      for (int64_t l : p.lengths) sumUlyssesComm += time.communication(l, a.world);
    }
    // Ulysses balances compute perfectly, so no plan's step is shorter than
    // Ulysses' compute alone: its all-to-alls' share bounds any speedup.
    const double share = sumUlyssesComm / sumUlysses;
    std::printf(
        "\n%s: Ulysses %.3f s, FlexSP %.3f s over %d batches: **%.2fx** (greedy alone %.2fx); "
        "Ulysses "
        "spends %.1f%% in all-to-alls, so no plan beats it by more than %.2fx\n\n",
        dist.c_str(), sumUlysses, sumFlex, a.batches, sumUlysses / sumFlex, sumUlysses / sumGreedy,
        100 * share, 1 / (1 - share));
  }
  for (gyreComm_t c : comms) gyreCommDestroy(c);
  return 0;
}
