// gyre-train: trains the harness's GPT on a text file over a dp x tp x pp
// mesh of the job's ranks (docs/harness.md, "gyre-train"). Launched like
// every gyre program, under gyrerun, torchrun, mpirun or srun:
//
//   gyrerun -n 4 gyre-train --tp 2 --data book.txt --steps 200 --log run.jsonl
//
// Rank 0 prints a progress line (step, loss, tokens/s, the share of the
// step spent in communication nothing hid) and writes the JSON log; every
// rank names its place in the mesh once.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
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
#include "harness/train/elastic.h"
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

// GYRE_TRAIN_KILL_RANK=R:N, a testing aid for --elastic: the process that
// started as rank R kills itself with SIGKILL as step N begins, while the
// others are already in that step's calls. {-1, -1} when unset.
std::pair<int, int64_t> killRankAtStep() {
  const char* v = std::getenv("GYRE_TRAIN_KILL_RANK");
  if (v == nullptr || *v == '\0') return {-1, -1};
  int rank = -1;
  long long step = -1;
  char tail = 0;
  if (std::sscanf(v, "%d:%lld%c", &rank, &step, &tail) != 2 || rank < 0 || step < 0)
    throw UsageError("GYRE_TRAIN_KILL_RANK takes RANK:STEP, not '" + std::string(v) + "'");
  return {rank, step};
}

// What lasts across the stretches of one process's run.
struct Run {
  TrainOptions o;
  bool replacement = false;  // started by gyrerun --elastic in place of a lost rank
  int launchRank = -1;       // GYRE_RANK at start (the kill aid's R)
  std::pair<int, int64_t> kill{-1, -1};
  int64_t killAfter = -1;
  bool firstStretch = true;
  std::vector<PlotRun> plotted = std::vector<PlotRun>(1);
};

enum class StretchEnd { Finished, Grow };

// Trains on `world` (data parallelism over all of it when elastic) from the
// newest checkpoint, --resume's, or step 0, until the last step; or, when
// elastic, until a checkpoint boundary at which processes wait to join and
// the run has room for them (then the checkpoint of that boundary is
// complete). Throws GyreError when a rank is lost.
StretchEnd trainStretch(gyreComm_t world, Run& run) {
  TrainOptions o = run.o;
  const bool elastic = o.elasticMax > 0;
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  resolveMesh(o, ranks);
  const TrainerConfig config = trainerConfig(o);
  const bool quiet = o.quiet || (elastic && !run.firstStretch);  // said once
  Trainer trainer(world, config);
  const Mesh& mesh = trainer.mesh();
  if (!quiet) {
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
  if (rank == 0 && !quiet) {
    std::printf("gyre-train: %s: %zu tokens, unigram entropy %.4f nats/token\n", o.data.c_str(),
                loader.tokens().size(), entropy);
    std::fflush(stdout);
  }
  // An elastic run after its first stretch goes on from its newest
  // checkpoint, or from the start when it had none yet.
  const bool resume = o.resume || (elastic && (!run.firstStretch || run.replacement));
  int64_t first = 0;
  if (resume) {
    const std::optional<int64_t> step = latestCompleteStep(o.checkpointDir);
    // Never a silent restart: --resume with nothing to resume is an error.
    if (!step && o.resume && run.firstStretch)
      throw CheckpointError("--resume: no complete checkpoint in " + o.checkpointDir);
    if (step) {
      first = trainer.load(stepDirectory(o.checkpointDir, *step));
      if (rank == 0 && !quiet)
        std::printf("gyre-train: resumed from %s at step %lld\n",
                    stepDirectory(o.checkpointDir, *step).c_str(), static_cast<long long>(first));
      // Allowed (a larger batch later in a run is common practice), but the
      // run no longer repeats the first one: say so, once.
      if (rank == 0 && !quiet && !trainer.loadChanges().empty()) {
        std::string changes;
        for (const std::string& c : trainer.loadChanges()) changes += (changes.empty() ? "" : ", ") + c;
        std::fprintf(stderr,
                     "gyre-train: note: this run's settings differ from the checkpoint's (%s); "
                     "it continues from the checkpoint's weights, not as the first run would\n",
                     changes.c_str());
      }
      std::fflush(stdout);
    }
  }
  if (elastic && (!run.firstStretch || run.replacement) && rank == 0)
    elastic::event("step " + std::to_string(first) + ": " + std::to_string(ranks) + " ranks (" +
                   mesh.describe() + ") go on from " +
                   (first > 0 ? "the checkpoint of step " + std::to_string(first) : std::string("the start")));
  std::unique_ptr<TrainLog> log;
  const std::string name = mesh.describe() + ", zero " + std::to_string(o.zero);
  if (rank == 0 && !o.log.empty()) {
    auto described = trainer.describe();
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", entropy);
    described["unigram_entropy"] = text;
    // A resumed run continues its log: the steps the checkpoint covers stay.
    log = std::make_unique<TrainLog>(resume ? TrainLog::continued(o.log, first, name, described)
                                            : TrainLog(o.log, name, described));
  }
  run.firstStretch = false;
  PlotRun& plotted = run.plotted[0];
  plotted.name = name;
  while (!plotted.steps.empty() && plotted.steps.back().step >= first) plotted.steps.pop_back();
  // FlexSP's batches: sequences of varying lengths, the same on every rank.
  std::unique_ptr<VarlenLoader> varlen;
  if (config.flexsp.on)
    varlen = std::make_unique<VarlenLoader>(openText(o.data, tokenPath(o.data)), Trainer::varlenConfig(config));
  const bool terminal = ::isatty(2);
  for (int64_t step = first; step < o.steps; ++step) {
    if (!run.replacement && run.launchRank == run.kill.first && step == run.kill.second) {
      std::printf("gyre-train: GYRE_TRAIN_KILL_RANK: the process started as rank %d kills itself as step %lld "
                  "begins\n", run.launchRank, static_cast<long long>(step));
      std::fflush(stdout);
      ::raise(SIGKILL);
    }
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
      plotted.steps.push_back(record);
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
      // Elastic: newcomers join here, at a complete checkpoint, when the
      // run has room; every rank learns rank 0's count.
      if (elastic && !last) {
        int32_t waiting = rank == 0 ? static_cast<int32_t>(elastic::requests(o.checkpointDir).size()) : 0;
        checkGyre(gyreBroadcast(&waiting, &waiting, 1, gyreInt32, 0, world, nullptr), "gyreBroadcast", world);
        if (waiting > 0 && ranks < o.elasticMax) return StretchEnd::Grow;
      }
    }
    if (step + 1 == run.killAfter) std::_Exit(137);  // a crash, for the tests: no clean-up at all
  }
  if (rank == 0 && terminal && !o.quiet && o.checkpointDir.empty()) std::fprintf(stderr, "\n");
  return StretchEnd::Finished;
}

// After a lost rank: the survivors' communicator (gyreCommShrink after a
// failure leaves out whoever is found dead), with the account of who went.
gyreComm_t shrinkAfterLoss(gyreComm_t world, const GyreError& loss, const Run& run) {
  int rank = 0, ranks = 0;
  gyreCommUserRank(world, &rank);
  gyreCommCount(world, &ranks);
  gyreComm_t survivors = nullptr;
  checkGyre(gyreCommShrink(world, nullptr, 0, &survivors, nullptr, GYRE_SHRINK_ABORT), "gyreCommShrink", world);
  int now = 0, newRank = 0;
  checkGyre(gyreCommCount(survivors, &now), "gyreCommCount", survivors);
  checkGyre(gyreCommUserRank(survivors, &newRank), "gyreCommUserRank", survivors);
  // Who is gone: the old numbers that no survivor holds.
  std::vector<int32_t> old(static_cast<size_t>(now), -1);
  const int32_t mine = rank;
  checkGyre(gyreAllGather(&mine, old.data(), 1, gyreInt32, survivors, nullptr), "gyreAllGather", survivors);
  if (now == ranks) {
    // Nobody is gone: the error was this program's own (a mismatch, a bad
    // argument), and redoing the steps would meet it again.
    gyreCommDestroy(survivors);
    throw loss;
  }
  std::string gone;
  for (int r = 0; r < ranks; ++r)
    if (std::find(old.begin(), old.end(), r) == old.end()) gone += (gone.empty() ? "" : ", ") + std::to_string(r);
  if (newRank == 0)
    elastic::event("lost rank " + gone + " of " + std::to_string(ranks) + " (" + loss.what() + "); " +
                   std::to_string(now) + " ranks remain");
  gyreCommDestroy(world);
  if (now < run.o.elasticMin) {
    gyreCommDestroy(survivors);
    throw std::runtime_error("elastic: " + std::to_string(now) + " ranks remain, fewer than --elastic's minimum " +
                             std::to_string(run.o.elasticMin));
  }
  return survivors;
}

// At a checkpoint boundary with processes waiting: rank 0 admits as many as
// the run has room for, and the running ranks and they make the larger
// communicator.
gyreComm_t growAtBoundary(gyreComm_t world, const Run& run) {
  int rank = 0, ranks = 0;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  int32_t admitted = 0;
  gyreJoinHandle handle;
  if (rank == 0) {
    std::vector<std::string> ids = elastic::requests(run.o.checkpointDir);
    ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(run.o.elasticMax - ranks)));
    admitted = static_cast<int32_t>(ids.size());
    checkGyre(gyreCommGetJoinHandle(world, &handle), "gyreCommGetJoinHandle", world);
    elastic::admit(run.o.checkpointDir, ids, ranks, ranks + admitted, handle);
    std::string who;
    for (size_t i = 0; i < ids.size(); ++i)
      who += (i ? ", " : "") + ids[i] + " as rank " + std::to_string(ranks + static_cast<int>(i));
    elastic::event("at the checkpoint of step " + std::to_string(*latestCompleteStep(run.o.checkpointDir)) + ": " +
                   who + " join" + (admitted == 1 ? "s" : ""));
  }
  checkGyre(gyreBroadcast(&admitted, &admitted, 1, gyreInt32, 0, world, nullptr), "gyreBroadcast", world);
  gyreComm_t grown = nullptr;
  checkGyre(gyreCommGrow(world, ranks + admitted, rank == 0 ? &handle : nullptr, -1, &grown, nullptr),
            "gyreCommGrow", world);
  gyreCommDestroy(world);
  return grown;
}

// A replacement process: waits for a place in the run and joins it; nullptr
// when the run ended first.
gyreComm_t joinRun(const Run& run) {
  const std::string id = elastic::requestJoin(run.o.checkpointDir);
  elastic::event(id + " asks to join at the next checkpoint boundary");
  const std::optional<elastic::Ticket> ticket = elastic::waitForTicket(run.o.checkpointDir, id, 3600);
  if (!ticket) {
    elastic::event(id + ": the run finished before this process could join");
    return nullptr;
  }
  gyreComm_t world = nullptr;
  checkGyre(gyreCommGrow(nullptr, ticket->newRanks, &ticket->handle, ticket->rank, &world, nullptr), "gyreCommGrow",
            nullptr);
  elastic::event(id + " joined as rank " + std::to_string(ticket->rank) + " of " + std::to_string(ticket->newRanks));
  return world;
}

int train(TrainOptions o) {
  Run run;
  run.o = o;
  run.kill = killRankAtStep();
  run.killAfter = killAfterStep();
  const char* launchRank = std::getenv("GYRE_RANK");
  run.launchRank = launchRank ? std::atoi(launchRank) : -1;
  const char* replacement = std::getenv("GYRE_ELASTIC_REPLACEMENT");
  run.replacement = o.elasticMax > 0 && replacement && std::string(replacement) == "1";

  gyreComm_t world = nullptr;
  if (run.replacement) {
    world = joinRun(run);
    if (!world) return 0;
  } else {
    checkGyre(gyreCommInitFromEnv(&world, nullptr), "gyreCommInitFromEnv", nullptr);
    int rank = 0;
    checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
    // Before the ranks first talk (the Trainer's splits), so no request of
    // this run can be wiped.
    if (o.elasticMax > 0 && rank == 0 && !o.resume) elastic::clearStale(o.checkpointDir);
    if (o.elasticMax > 0 && rank == 0 && o.resume) std::filesystem::create_directories(elastic::directory(o.checkpointDir));
  }
  for (;;) {
    if (o.elasticMax == 0) {
      trainStretch(world, run);
      break;
    }
    try {
      if (trainStretch(world, run) == StretchEnd::Finished) break;
      world = growAtBoundary(world, run);
    } catch (const GyreError& e) {
      // A lost rank shows as a remote error or a timeout; anything else
      // (bad arguments, a mismatch) is this program's own fault.
      if (e.result() != gyreRemoteError && e.result() != gyreTimeout && e.result() != gyreInvalidUsage) throw;
      world = shrinkAfterLoss(world, e, run);
    }
  }
  int rank = 0;
  gyreCommUserRank(world, &rank);
  if (rank == 0 && !o.plot.empty() && !run.plotted[0].steps.empty()) {
    plotRuns(run.plotted, o.plot);
    if (!o.quiet) std::printf("gyre-train: drew %s\n", o.plot.c_str());
  }
  if (o.elasticMax > 0 && rank == 0) elastic::markFinished(o.checkpointDir);
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
