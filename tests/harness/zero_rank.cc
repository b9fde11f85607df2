// One rank of the ZeRO test, started by gyrerun (tests/harness/
// CMakeLists.txt): `gyrerun -n R --timeout S harness_zero_rank STAGE
// [BUCKET_ELEMS]`.
//
// Each rank trains the same model for 20 steps on its share of a global
// batch of 8 sequences through Zero at STAGE (harness/zero.h), and also
// trains the single-rank run of the same global batches by itself. It checks
// that (a) the loss of every step, averaged over the ranks, matches the
// single-rank loss within 1e-5 relative, (b) the final parameters (gathered)
// match the single-rank ones within 1e-5 relative per tensor, in norm,
// (c) every rank's gathered parameters are the same bits, and (d) the memory
// Zero reports: the optimizer state 1/R of the model's from stage 1, the
// gradients from stage 2, the parameters at stage 3, and at stage 3 no more
// than a few parts held at once besides. Rank 0 prints every rank's memory.
// Exits 0 when all hold; otherwise prints what did not and exits 1.
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
#include "harness/zero.h"
#include "rank_checks.h"
#include "sentences.h"

namespace fs = std::filesystem;
using namespace gyre::harness;
using namespace gyre::harness::test;

namespace {

constexpr float kMaxNorm = 1.0f;

GptConfig modelConfig() {
  return {.vocab = 256, .maxSeq = kSeq, .layers = 2, .heads = 4, .dim = 32};
}

const LrSchedule kSchedule{.maxLr = 1e-2f, .minLr = 1e-3f, .warmupSteps = 5, .totalSteps = kSteps};

struct Run {
  std::vector<float> losses;
  std::vector<float> params;
};

// The single-rank run on the whole global batch, the model on its own arrays.
Run trainAlone(const fs::path& source, const fs::path& tokens) {
  Gpt model(modelConfig());
  model.initialize(kSeed);
  DataLoader loader(openText(source, tokens), {.batch = kBatch, .seq = kSeq, .seed = kSeed});
  AdamW adam(decaySegments(model.layout()), model.size(), AdamWConfig{});
  std::vector<int> inputs(kBatch * kSeq), targets(kBatch * kSeq);
  Run run;
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    model.zeroGrad();
    run.losses.push_back(model.forward(inputs.data(), targets.data(), kBatch, kSeq));
    model.backward();
    clipToNorm(model.grads(), std::sqrt(sumOfSquares(model.grads())), kMaxNorm);
    adam.step(model.params(), model.grads(), learningRate(kSchedule, step));
  }
  run.params.assign(model.params().begin(), model.params().end());
  return run;
}

// This rank's share of the same run through Zero.
Run trainZero(const fs::path& source, const fs::path& tokens, Zero& zero, Gpt& model) {
  std::vector<float> init(model.size());
  model.initialize(kSeed, init);  // the same seed on every rank: the same model
  zero.setParams(init);
  init = {};
  DataLoader loader(
      openText(source, tokens),
      {.batch = kBatch, .seq = kSeq, .seed = kSeed, .rank = zero.rank(), .ranks = zero.ranks()});
  const int b = loader.localBatch();
  std::vector<int> inputs(b * kSeq), targets(b * kSeq);
  Run run;
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    zero.beginStep();
    const float loss = model.forward(inputs.data(), targets.data(), b, kSeq);
    model.backward();
    zero.finishBackward();
    run.losses.push_back(zero.averageLoss(loss));
    zero.step(learningRate(kSchedule, step), kMaxNorm);
  }
  run.params = zero.gatherParams();
  return run;
}

// (d): what each stage must not hold more of than 1/R of the model (S
// elements, the shard's stride), and at stage 3 the parts held at once.
int checkMemory(const Zero& zero, const Gpt& model, int rank) {
  const ZeroMemory m = zero.memory();
  const size_t S = shardStride(model.size(), zero.ranks()), f = sizeof(float);
  size_t largestBlock = 0;
  for (int part : model.backwardParts())
    if (part >= 0 && part < model.config().layers)
      largestBlock = std::max(largestBlock, model.partSize(part));
  // Stage 3's transient: the embeddings' parameters and gradients (the tied
  // head holds them from the start of backward to its end), the final norm's
  // parameters and gradients, and a block's parameters, its gradients and
  // the gradients of the block before it, still being reduced.
  const size_t transientBound =
      2 * model.partSize(-1) + 2 * model.partSize(model.config().layers) + 3 * largestBlock;
  struct Limit {
    const char* what;
    size_t bytes, limit;
    bool applies;
  };
  const Limit limits[] = {
      {"optimizer state", m.optimizer, 2 * S * f, zero.stage() >= 1},
      {"gradients", m.grads, S * f, zero.stage() >= 2},
      {"parameters", m.params, S * f, zero.stage() >= 3},
      {"peak transient", m.peakTransient, transientBound * f, zero.stage() >= 3},
  };
  int failures = 0;
  for (const Limit& l : limits) {
    if (l.applies && l.bytes > l.limit) {
      std::printf("rank %d: stage %d holds %zu bytes of %s, more than %zu\n", rank, zero.stage(),
                  l.bytes, l.what, l.limit);
      ++failures;
    }
  }
  return failures;
}

// Every rank's memory, gathered and printed by rank 0.
void printMemory(const Zero& zero, const Gpt& model, gyreComm_t comm) {
  const ZeroMemory m = zero.memory();
  const uint64_t mine[4] = {m.params, m.grads, m.optimizer, m.peakTransient};
  std::vector<uint64_t> all(4 * zero.ranks());
  checkGyre(gyreAllGather(mine, all.data(), 4, gyreUint64, comm, nullptr),
            "gyreAllGather of the memory reports", comm);
  if (zero.rank() != 0) return;
  std::printf("stage %d, %d ranks, a model of %zu floats (%zu bytes); bytes held:\n", zero.stage(),
              zero.ranks(), model.size(), model.size() * sizeof(float));
  std::printf("  rank  parameters  gradients  optimizer  peak transient\n");
  for (int r = 0; r < zero.ranks(); ++r) {
    const uint64_t* x = &all[4 * r];
    std::printf("  %4d  %10llu  %9llu  %9llu  %14llu\n", r, static_cast<unsigned long long>(x[0]),
                static_cast<unsigned long long>(x[1]), static_cast<unsigned long long>(x[2]),
                static_cast<unsigned long long>(x[3]));
  }
}

int body(int argc, char** argv) {
  if (argc < 2) throw std::invalid_argument("usage: harness_zero_rank STAGE [BUCKET_ELEMS]");
  const int stage = std::stoi(argv[1]);
  const size_t bucketElems = argc > 2 ? std::stoul(argv[2]) : kDefaultBucketElems;
  gyreComm_t comm = nullptr;
  checkGyre(gyreCommInitFromEnv(&comm, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(comm, &rank), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &ranks), "gyreCommCount", comm);

  std::string tmpl = (fs::temp_directory_path() / "gyre-zero-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = tmpl, source = dir / "corpus.txt", tokens = dir / "corpus.tokens";
  std::ofstream(source, std::ios::binary) << sentences();

  const Run reference = trainAlone(source, tokens);
  Zero zero(comm, Gpt(modelConfig()).layout(), stage, AdamWConfig{}, bucketElems);
  Gpt model(modelConfig(), {}, &zero);
  const Run run = trainZero(source, tokens, zero, model);
  fs::remove_all(dir);

  int failures = 0;
  double worstLoss = 0, worstParam = 0;
  const std::string who = "rank " + std::to_string(rank);
  failures += checkLosses(run.losses, reference.losses, kTolerance, who, &worstLoss);
  failures += checkTensors(model.layout(), model.shard(), run.params, model.layout(),
                           reference.params, kTolerance, who, &worstParam);
  // (c) every rank's gathered parameters: the same bits.
  failures += checkReplicas(comm, run.params, who);
  failures += checkMemory(zero, model, rank);
  printMemory(zero, model, comm);
  std::printf(
      "rank %d of %d: stage %d, shard [%zu, %zu), %d steps, loss %.5f -> %.5f, "
      "worst relative difference from one rank: loss %.3g, parameters %.3g; %s\n",
      rank, ranks, stage, zero.shard().begin, zero.shard().end, kSteps, run.losses.front(),
      run.losses.back(), worstLoss, worstParam, failures ? "FAILED" : "ok");
  checkGyre(gyreCommFinalize(comm), "gyreCommFinalize", comm);
  gyreCommDestroy(comm);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return runRank("harness_zero_rank", body, argc, argv); }
