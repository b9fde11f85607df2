// One rank of the data-parallel test, started by gyrerun (tests/harness/
// CMakeLists.txt): `gyrerun -n R --timeout S harness_dp_rank [BUCKET_ELEMS]
// [--codec fp16|bf16|int8|onebit] [--decentralized ring|shift_one|random]`.
//
// With --codec, the losses must stay within kCodecTolerance of the
// single-rank run's (the gradients are rounded on the wire) and the replicas
// identical (every rank decodes the same bits). With --decentralized, the
// replicas differ by design: the run must learn, and its replicas must stay
// much closer together than the same ranks training without averaging.
//
// Each rank trains the same model for 20 steps on its share of a global
// batch of 8 sequences, with the gradients averaged by DataParallel, and
// also trains the single-rank run of the same global batches by itself.
// It checks that (a) the loss of every step, averaged over the ranks,
// matches the single-rank loss within 1e-5 relative, (b) the final
// parameters match the single-rank ones within 1e-5 relative (per tensor,
// in norm; see below), and (c) every
// rank's parameters are the same bits (a hash of them, gathered). Exits 0
// when all hold; otherwise prints what did not and exits 1.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data.h"
#include "harness/data_parallel.h"
#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/token_file.h"
#include "rank_checks.h"
#include "sentences.h"

namespace fs = std::filesystem;
using namespace gyre::harness;
using namespace gyre::harness::test;

namespace {

constexpr double kCodecTolerance = 0.1;

GptConfig modelConfig() {
  return {.vocab = 256, .maxSeq = kSeq, .layers = 2, .heads = 4, .dim = 32};
}

struct Run {
  std::vector<float> losses;
  std::vector<float> params;
};

// Trains kSteps steps as rank `rank` of `ranks` (dp == nullptr: one rank on
// the whole global batch); average = false skips the decentralized mode's
// averaging (its baseline).
Run train(const fs::path& source, const fs::path& tokens, DataParallel* dp, Gpt& model,
          bool average = true) {
  const int rank = dp ? dp->rank() : 0, ranks = dp ? dp->ranks() : 1;
  DataLoader loader(openText(source, tokens),
                    {.batch = kBatch, .seq = kSeq, .seed = kSeed, .rank = rank, .ranks = ranks});
  AdamW adam(decaySegments(model.layout()), model.params().size(), AdamWConfig{});
  const LrSchedule schedule{.maxLr = 1e-2f, .minLr = 1e-3f, .warmupSteps = 5, .totalSteps = kSteps};
  const int b = loader.localBatch();
  std::vector<int> inputs(b * kSeq), targets(b * kSeq);
  Run run;
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    model.zeroGrad();
    const float loss = model.forward(inputs.data(), targets.data(), b, kSeq);
    if (dp) {
      dp->backward();
      run.losses.push_back(dp->averageLoss(loss));
    } else {
      model.backward();
      run.losses.push_back(loss);
    }
    clipToNorm(model.grads(), std::sqrt(sumOfSquares(model.grads())), 1.0f);
    adam.step(model.params(), model.grads(), learningRate(schedule, step));
    if (dp && average) dp->afterStep(step);
  }
  run.params.assign(model.params().begin(), model.params().end());
  return run;
}

// How far apart the replicas are: the root of the mean over ranks of
// |p_r - mean|^2, relative to |mean|.
double replicaSpread(gyreComm_t comm, std::span<const float> params, int ranks) {
  std::vector<float> mean(params.begin(), params.end());
  checkGyre(
      gyreAllReduce(mean.data(), mean.data(), mean.size(), gyreFloat32, gyreAvg, comm, nullptr),
      "gyreAllReduce", comm);
  double d[2] = {0, 0};
  for (size_t i = 0; i < mean.size(); ++i) {
    d[0] += (double(params[i]) - mean[i]) * (double(params[i]) - mean[i]);
    d[1] += double(mean[i]) * mean[i];
  }
  checkGyre(gyreAllReduce(d, d, 2, gyreFloat64, gyreSum, comm, nullptr), "gyreAllReduce", comm);
  return std::sqrt(d[0] / ranks / (d[1] / ranks));
}

gyreCodec_t codecNamed(const std::string& name) {
  const char* names[] = {"none", "fp16", "bf16", "int8", "onebit"};
  for (int i = 0; i < 5; ++i)
    if (name == names[i]) return static_cast<gyreCodec_t>(i);
  throw std::invalid_argument("unknown codec " + name);
}

gyrePeers_t peersNamed(const std::string& name) {
  if (name == "ring") return gyrePeersRing;
  if (name == "shift_one") return gyrePeersShiftOne;
  if (name == "random") return gyrePeersRandom;
  throw std::invalid_argument("unknown peer selection " + name);
}

int body(int argc, char** argv) {
  DpOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--codec" && i + 1 < argc) {
      options.codec = codecNamed(argv[++i]);
    } else if (arg == "--decentralized" && i + 1 < argc) {
      options.decentralized = true;
      options.peers = peersNamed(argv[++i]);
    } else {
      options.bucketElems = std::stoul(arg);
    }
  }
  const size_t bucketElems = options.bucketElems;
  gyreComm_t comm = nullptr;
  checkGyre(gyreCommInitFromEnv(&comm, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(comm, &rank), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &ranks), "gyreCommCount", comm);

  std::string tmpl = (fs::temp_directory_path() / "gyre-dp-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = tmpl, source = dir / "corpus.txt", tokens = dir / "corpus.tokens";
  std::ofstream(source, std::ios::binary) << sentences();

  Gpt single(modelConfig());
  single.initialize(kSeed);
  const Run reference = train(source, tokens, nullptr, single);

  Gpt model(modelConfig());
  model.initialize(kSeed + static_cast<uint64_t>(rank));  // the broadcast makes them rank 0's
  DataParallel dp(comm, model, options);
  dp.broadcastParameters();
  const Run run = train(source, tokens, &dp, model);
  if (options.decentralized) {
    const double spread = replicaSpread(comm, run.params, ranks);
    Gpt alone(modelConfig());
    alone.initialize(kSeed);
    DataParallel local(comm, alone, options);
    const Run apart = train(source, tokens, &local, alone, /*average=*/false);
    const double apartSpread = replicaSpread(comm, apart.params, ranks);
    fs::remove_all(dir);
    const bool learned = run.losses.back() < 0.8 * run.losses.front();
    const bool together = spread < 0.5 * apartSpread;
    std::printf(
        "rank %d of %d: decentralized, loss %.5f -> %.5f (single-rank run %.5f), replicas %.3g "
        "apart (%.3g without averaging); %s\n",
        rank, ranks, run.losses.front(), run.losses.back(), reference.losses.back(), spread,
        apartSpread, learned && together ? "ok" : "FAILED");
    checkGyre(gyreCommFinalize(comm), "gyreCommFinalize", comm);
    gyreCommDestroy(comm);
    return learned && together ? 0 : 1;
  }
  fs::remove_all(dir);
  int failures = 0;
  double worstLoss = 0, worstParam = 0;
  if (options.codec != gyreCodecNone) {
    // A codec rounds the gradients on the wire, and at this learning rate a
    // step's loss is sensitive to that: the run must learn as the
    // single-rank run does (its last loss within 10% of that run's) rather
    // than follow it step by step.
    const double gap = relative(run.losses.back(), reference.losses.back());
    if (!(run.losses.back() < 0.7 * run.losses.front()) || !(gap <= kCodecTolerance)) {
      std::printf("rank %d: compressed run's loss %.5f -> %.5f, single-rank run's last %.5f\n",
                  rank, run.losses.front(), run.losses.back(), reference.losses.back());
      ++failures;
    }
    worstLoss = gap;
  }
  const std::string who = "rank " + std::to_string(rank);
  // A codec's run is held to its losses only: AdamW's normalized steps turn
  // the wire's rounding into lr-sized moves of the small parameters.
  if (options.codec == gyreCodecNone) {
    failures += checkLosses(run.losses, reference.losses, kTolerance, who, &worstLoss);
    failures += checkTensors(model.layout(), model.shard(), run.params, single.layout(),
                             reference.params, kTolerance, who, &worstParam);
  }
  // (c) the replicas: every rank's hash of its parameters' bytes, gathered.
  failures += checkReplicas(comm, run.params, who);
  std::printf(
      "rank %d of %d: %zu buckets of at most %zu elements, %d steps, loss %.5f -> %.5f, "
      "worst relative difference from one rank: loss %.3g, parameters %.3g; %s\n",
      rank, ranks, dp.buckets().size(), bucketElems, kSteps, run.losses.front(), run.losses.back(),
      worstLoss, worstParam, failures ? "FAILED" : "ok");
  checkGyre(gyreCommFinalize(comm), "gyreCommFinalize", comm);
  gyreCommDestroy(comm);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return runRank("harness_dp_rank", body, argc, argv); }
