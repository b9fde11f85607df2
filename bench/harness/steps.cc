// gyre-harness-steps: gyre-train's training loop (the same Trainer, the same
// options) that logs every rank's whole StepReport, which gyre-train's JSON
// log does not (it has step_s, comm_s and bubble_s, not compute and the
// optimizer). bench/harness/harness_bench.py runs it for the step-time
// breakdown in docs/PERFORMANCE-harness.md:
//
//   gyrerun -n 4 --bind core gyre-harness-steps --report DIR --tp 2 --data book.txt --steps 20
//
// Every gyre-train option is taken (checkpoints, logs and plots are not
// written); --report DIR makes each rank write DIR/rank-<K>.jsonl, one line
// per step:
//
//   {"rank":0,"step":3,"step_s":0.21,"compute_s":0.17,"comm_s":0.02,"optimizer_s":0.01,
//    "cpu_s":0.2,"bubble":0,"tokens_per_s":4876.2,"loss":4.9,"dp":2,"tp":1,"pp":1,"dp_rank":0,...,
//    "state_bytes":1234}  (parameters, gradients and optimizer state this rank holds)
//
// bubble is the pipeline's measured bubble share of the step (0 without
// one), the same on every stage; the seconds are this rank's; cpu_s is the
// CPU time this rank's process (all its threads) used during the step,
// which other processes on the machine do not inflate as they do step_s.
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data.h"
#include "harness/train/config.h"
#include "harness/train/options.h"
#include "harness/trainer.h"

namespace fs = std::filesystem;
using namespace gyre::harness;

namespace {

// The process's CPU time (every thread: the trainer's and gyre's progress
// thread), in seconds.
double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

fs::path tokenPath(const fs::path& text) {
  const char* dir = std::getenv("TMPDIR");
  const std::string key = std::to_string(std::hash<std::string>{}(fs::absolute(text).string()));
  return fs::path(dir && *dir ? dir : "/tmp") /
         ("gyre-harness-steps-" + text.filename().string() + "-" + key + ".tokens");
}

int run(int argc, char** argv) {
  std::string reportDir;
  std::vector<const char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--report" && i + 1 < argc) {
      reportDir = argv[++i];
    } else {
      args.push_back(argv[i]);
    }
  }
  TrainOptions o = parseTrainOptions(static_cast<int>(args.size()), args.data());
  if (o.codec != "none" || !o.decentralized.empty() || !o.checkpointDir.empty())
    throw UsageError("gyre-harness-steps: no --codec, --decentralized or checkpoints");
  gyreComm_t world = nullptr;
  checkGyre(gyreCommInitFromEnv(&world, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  resolveMesh(o, ranks);
  {
    Trainer trainer(world, trainerConfig(o));
    const Mesh& mesh = trainer.mesh();
    DataLoader loader(
        openText(o.data, tokenPath(o.data)),
        {.batch = o.batch, .seq = o.seq, .seed = o.seed, .rank = mesh.dpRank(), .ranks = o.dp});
    std::ofstream out;
    if (!reportDir.empty()) {
      fs::create_directories(reportDir);
      const fs::path path = fs::path(reportDir) / ("rank-" + std::to_string(rank) + ".jsonl");
      out.open(path);
      if (!out) throw std::runtime_error("cannot write " + path.string());
    }
    // What this rank holds across steps: parameters, gradients, optimizer state.
    const ZeroMemory memory = trainer.memory();
    const size_t state = memory.params + memory.grads + memory.optimizer;
    for (int64_t step = 0; step < o.steps; ++step) {
      const double cpuStart = cpuSeconds();
      const StepReport r = trainer.step(step, loader);
      const double cpu = cpuSeconds() - cpuStart;
      if (!out.is_open()) continue;
      char line[512];
      std::snprintf(
          line, sizeof line,
          "{\"rank\":%d,\"step\":%lld,\"step_s\":%.9g,\"compute_s\":%.9g,\"comm_s\":%.9g,"
          "\"optimizer_s\":%.9g,\"cpu_s\":%.9g,\"bubble\":%.9g,\"tokens_per_s\":%.9g,\"loss\":%.9g,"
          "\"dp\":%d,\"tp\":%d,\"pp\":%d,\"dp_rank\":%d,\"tp_rank\":%d,\"pp_rank\":%d,"
          "\"state_bytes\":%zu}",
          rank, static_cast<long long>(r.step), r.seconds, r.compute, r.comm, r.optimizer, cpu,
          r.bubble, static_cast<double>(r.tokens) / r.seconds, r.loss, o.dp, o.tp, o.pp,
          mesh.dpRank(), mesh.tpRank(), mesh.ppRank(), state);
      out << line << '\n' << std::flush;
    }
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
    std::fprintf(stderr, "gyre-harness-steps: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre-harness-steps: %s\n", e.what());
    return 1;
  }
}
