// gyre-flexsp-ab: FlexSP against fixed Ulysses over the whole world, step
// for step on the same variable-length batches in the same processes
// (docs/PERFORMANCE-sequence.md, "FlexSP in the harness"):
//
//   gyrerun -n 8 gyre-flexsp-ab --data book.txt --steps 12 --seq 512 --batch 4
//       --dim 64 --heads 8 --layers 2 --flexsp-median 64
//
// Takes gyre-train's options (--flexsp is implied). Two Trainers, one
// planning each step (FlexSP) and one running every sequence in one group
// of every rank (Ulysses), train the same batches from the same start;
// each step runs on both, in alternating order (this host's noise hits
// both alike), timed as the slowest rank's StepReport::seconds. Rank 0
// prints a line per step (measured and predicted seconds of each, FlexSP's
// groups) and the medians and ratios at the end.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "flexsp/plan.h"
#include "gyre/gyre.h"
#include "harness/train/config.h"
#include "harness/train/options.h"
#include "harness/trainer.h"
#include "harness/varlen_data.h"

namespace fs = std::filesystem;
using namespace gyre::harness;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double slowest(double seconds, gyreComm_t world) {
  checkGyre(gyreAllReduce(&seconds, &seconds, 1, gyreFloat64, gyreMax, world, nullptr),
            "gyreAllReduce of the step time", world);
  return seconds;
}

double fastest(double seconds, gyreComm_t world) {
  checkGyre(gyreAllReduce(&seconds, &seconds, 1, gyreFloat64, gyreMin, world, nullptr),
            "gyreAllReduce of the step time", world);
  return seconds;
}

int run(int argc, char** argv) {
  std::vector<const char*> args(argv, argv + argc);
  args.push_back("--flexsp");
  TrainOptions o = parseTrainOptions(static_cast<int>(args.size()), args.data());
  gyreComm_t world = nullptr;
  checkGyre(gyreCommInitFromEnv(&world, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  resolveMesh(o, ranks);
  TrainerConfig flex = trainerConfig(o), uly = flex;
  flex.flexsp.fixedUlysses = false;
  uly.flexsp.fixedUlysses = true;
  {
    Trainer a(world, flex), b(world, uly);
    const fs::path tokens =
        fs::temp_directory_path() / ("gyre-flexsp-ab-" + std::to_string(rank) + ".tokens");
    const VarlenLoader loader(openText(o.data, tokens), Trainer::varlenConfig(flex));
    std::vector<double> fm, um, fp, up, ratio;
    if (rank == 0)
      std::printf(
          "step sequences tokens longest | flexsp_s ulysses_s ratio | predicted: flexsp_s "
          "ulysses_s ratio | compute s, least-most rank: flexsp ulysses | flexsp plan\n");
    for (int64_t step = 0; step < o.steps; ++step) {
      StepReport ra, rb;
      if (step % 2 == 0) {
        ra = a.step(step, loader);
        rb = b.step(step, loader);
      } else {
        rb = b.step(step, loader);
        ra = a.step(step, loader);
      }
      const double sa = slowest(ra.seconds, world), sb = slowest(rb.seconds, world);
      // The ranks' compute (forward and backward less the exchanges): how
      // evenly the plan loaded them.
      const double ca0 = fastest(ra.compute, world), ca1 = slowest(ra.compute, world);
      const double cb0 = fastest(rb.compute, world), cb1 = slowest(rb.compute, world);
      const std::vector<int64_t> lengths = loader.lengths(step);
      if (rank == 0)
        std::printf(
            "%lld %zu %lld %lld | %.4f %.4f %.2fx | %.4f %.4f %.2fx | %.3f-%.3f %.3f-%.3f | %s\n",
            static_cast<long long>(step), lengths.size(), static_cast<long long>(ra.tokens),
            static_cast<long long>(*std::max_element(lengths.begin(), lengths.end())), sa, sb,
            sb / sa, ra.predicted, rb.predicted, rb.predicted / ra.predicted, ca0, ca1, cb0, cb1,
            ra.plan.c_str());
      if (step == 0) continue;  // the first step makes the groups' communicators
      fm.push_back(sa);
      um.push_back(sb);
      fp.push_back(ra.predicted);
      up.push_back(rb.predicted);
      ratio.push_back(sb / sa);
    }
    if (rank == 0)
      std::printf(
          "medians over steps 1-%lld: flexsp %.4f s, ulysses %.4f s, ratio of medians "
          "%.2fx, median of ratios %.2fx; predicted flexsp %.4f s, ulysses %.4f s, "
          "%.2fx\n",
          static_cast<long long>(o.steps - 1), median(fm), median(um), median(um) / median(fm),
          median(ratio), median(fp), median(up), median(up) / median(fp));
  }
  checkGyre(gyreCommFinalize(world), "gyreCommFinalize", world);
  gyreCommDestroy(world);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gyre-flexsp-ab: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre-flexsp-ab: %s\n", e.what());
    return 1;
  }
}
