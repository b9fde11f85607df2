// gyre-train: trains the harness's GPT on a text file over a dp x tp x pp
// mesh of the job's ranks (docs/harness.md, "gyre-train"). Launched like
// every gyre program, under gyrerun, torchrun, mpirun or srun:
//
//   gyrerun -n 4 gyre-train --tp 2 --data book.txt --steps 200 --log run.jsonl
//
// Rank 0 prints a progress line (step, loss, tokens/s, the share of the
// step spent in communication nothing hid) and writes the JSON log; every
// rank names its place in the mesh once.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/checkpoint.h"
#include "harness/data.h"
#include "harness/plot.h"
#include "harness/train/options.h"
#include "harness/train_log.h"
#include "harness/train/config.h"
#include "harness/trainer.h"

namespace fs = std::filesystem;
using namespace gyre::harness;

namespace {

// Where the byte-level token file of `text` goes: beside nothing the user
// owns (the text may be in a read-only place such as /usr/share), named by
// the text's path so that two texts never share one.
fs::path tokenPath(const fs::path& text) {
  const char* dir = std::getenv("TMPDIR");
  const std::string key = std::to_string(std::hash<std::string>{}(fs::absolute(text).string()));
  return fs::path(dir && *dir ? dir : "/tmp") /
         ("gyre-train-" + text.filename().string() + "-" + key + ".tokens");
}

int drawOnly(const TrainOptions& o) {
  std::vector<PlotRun> runs;
  for (const std::string& log : o.plotLogs) {
    PlotRun run;
    run.steps = readTrainLog(log, &run.name);
    if (run.name.empty()) run.name = fs::path(log).stem().string();
    runs.push_back(std::move(run));
  }
  plotRuns(runs, o.plot);
  std::printf("gyre-train: drew %zu run(s) into %s\n", runs.size(), o.plot.c_str());
  return 0;
}

void progress(const StepReport& r, int64_t steps, bool terminal) {
  const double share = r.seconds > 0 ? 100.0 * r.comm / r.seconds : 0.0;
  char experts[64] = "";
  if (r.moeSlots > 0)
    std::snprintf(experts, sizeof experts, "  dropped %.1f%%", 100.0 * r.moeDropped / r.moeSlots);
  std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  %.0f tokens/s  comm %.0f%%%s%s%s%s",
               terminal ? "\r" : "", static_cast<long long>(r.step + 1),
               static_cast<long long>(steps), r.loss, r.tokens / r.seconds, share, experts,
               r.plan.empty() ? "" : "  plan ", r.plan.c_str(), terminal ? "   " : "\n");
}

// GYRE_TRAIN_KILL_AFTER_STEP=N, a testing aid: every rank ends at once with
// status 137, as if killed, right after its N-th step and the checkpoint of
// that step (if one is due) are done. -1 when unset.
int64_t killAfterStep() {
  const char* v = std::getenv("GYRE_TRAIN_KILL_AFTER_STEP");
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 1)
    throw UsageError("GYRE_TRAIN_KILL_AFTER_STEP takes a step count of at least 1, not '" +
                     std::string(v) + "'");
  return n;
}

int train(TrainOptions o) {
  gyreComm_t world = nullptr;
  checkGyre(gyreCommInitFromEnv(&world, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  resolveMesh(o, ranks);
  const TrainerConfig config = trainerConfig(o);
  int64_t first = 0;
  std::vector<PlotRun> plotted(1);
  {
    Trainer trainer(world, config);
    const Mesh& mesh = trainer.mesh();
    if (!o.quiet) {
      if (rank == 0) std::printf("gyre-train: mesh %s, ZeRO %d\n", mesh.describe().c_str(), o.zero);
      // What ZeRO leaves this rank holding (docs/harness.md, "ZeRO").
      const ZeroMemory m = trainer.memory();
      std::printf(
          "gyre-train: %s holds %.2f MB of parameters, %.2f MB of gradients, %.2f MB of "
          "optimizer state\n",
          mesh.place().c_str(), m.params / 1e6, m.grads / 1e6, m.optimizer / 1e6);
      std::fflush(stdout);
    }
    DataLoader loader(
        openText(o.data, tokenPath(o.data)),
        {.batch = o.batch, .seq = o.seq, .seed = o.seed, .rank = mesh.dpRank(), .ranks = o.dp});
    // What a model that ignores context would score: the loss to beat.
    const double entropy = unigramEntropy(loader.tokens().tokens());
    if (rank == 0 && !o.quiet) {
      std::printf("gyre-train: %s: %zu tokens, unigram entropy %.4f nats/token\n", o.data.c_str(),
                  loader.tokens().size(), entropy);
      std::fflush(stdout);
    }
    if (o.resume) {
      // Never a silent restart: --resume with nothing to resume is an error.
      const std::optional<int64_t> step = latestCompleteStep(o.checkpointDir);
      if (!step) {
        throw CheckpointError("--resume: no complete checkpoint in " + o.checkpointDir);
      }
      first = trainer.load(stepDirectory(o.checkpointDir, *step));
      if (rank == 0 && !o.quiet)
        std::printf("gyre-train: resumed from %s at step %lld\n",
                    stepDirectory(o.checkpointDir, *step).c_str(), static_cast<long long>(first));
      // Allowed (a larger batch later in a run is common practice), but the
      // run no longer repeats the first one: say so, once.
      if (rank == 0 && !trainer.loadChanges().empty()) {
        std::string changes;
        for (const std::string& c : trainer.loadChanges())
          changes += (changes.empty() ? "" : ", ") + c;
        std::fprintf(stderr,
                     "gyre-train: note: this run's settings differ from the checkpoint's (%s); "
                     "it continues from the checkpoint's weights, not as the first run would\n",
                     changes.c_str());
      }
      std::fflush(stdout);
    }
    std::unique_ptr<TrainLog> log;
    const std::string name = mesh.describe() + ", zero " + std::to_string(o.zero);
    if (rank == 0 && !o.log.empty()) {
      auto described = trainer.describe();
      char text[32];
      std::snprintf(text, sizeof text, "%.4f", entropy);
      described["unigram_entropy"] = text;
      // A resumed run continues its log: the steps the checkpoint covers stay.
      log = std::make_unique<TrainLog>(o.resume ? TrainLog::continued(o.log, first, name, described)
                                                : TrainLog(o.log, name, described));
    }
    plotted[0].name = name;
    // FlexSP's batches: sequences of varying lengths, the same on every rank.
    std::unique_ptr<VarlenLoader> varlen;
    if (config.flexsp.on)
      varlen = std::make_unique<VarlenLoader>(openText(o.data, tokenPath(o.data)),
                                              Trainer::varlenConfig(config));
    const bool terminal = ::isatty(2);
    const int64_t killAfter = killAfterStep();
    for (int64_t step = first; step < o.steps; ++step) {
      const StepReport r = varlen ? trainer.step(step, *varlen) : trainer.step(step, loader);
      const StepRecord record{.step = r.step,
                              .loss = r.loss,
                              .lr = r.lr,
                              .tokensPerSecond = r.tokens / r.seconds,
                              .stepSeconds = r.seconds,
                              .commSeconds = r.comm,
                              .bubbleSeconds = r.bubble * r.seconds,
                              .gradNorm = r.gradNorm};
      if (rank == 0) {
        if (log) log->write(record);
        plotted[0].steps.push_back(record);
        if (!o.quiet && (terminal || (step + 1) % 10 == 0 || step + 1 == o.steps))
          progress(r, o.steps, terminal);
      }
      // Every checkpointEvery steps, and at the end of the run.
      const bool last = step + 1 == o.steps;
      if (!o.checkpointDir.empty() &&
          (last || (o.checkpointEvery > 0 && (step + 1) % o.checkpointEvery == 0))) {
        const fs::path dir = trainer.save(o.checkpointDir, step + 1);
        if (last && rank == 0 && !o.quiet) {
          if (terminal) std::fprintf(stderr, "\n");
          std::printf("gyre-train: saved %s\n", dir.c_str());
        }
      }
      if (step + 1 == killAfter) std::_Exit(137);  // a crash, for the tests: no clean-up at all
    }
    if (rank == 0 && terminal && !o.quiet && o.checkpointDir.empty()) std::fprintf(stderr, "\n");
  }
  if (rank == 0 && !o.plot.empty() && !plotted[0].steps.empty()) {
    plotRuns(plotted, o.plot);
    if (!o.quiet) std::printf("gyre-train: drew %s\n", o.plot.c_str());
  }
  checkGyre(gyreCommFinalize(world), "gyreCommFinalize", world);
  gyreCommDestroy(world);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  TrainOptions options;
  try {
    options = parseTrainOptions(argc, argv);
    if (options.help) {
      std::fputs(trainUsage().c_str(), stdout);
      return 0;
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gyre-train: %s\n", e.what());
    return 2;
  }
  try {
    return options.plotLogs.empty() ? train(options) : drawOnly(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gyre-train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre-train: %s\n", e.what());
    return 1;
  }
}
