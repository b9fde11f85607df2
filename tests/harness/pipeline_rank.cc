// One rank of the pipeline-parallel test, started by gyrerun (tests/harness/
// CMakeLists.txt): `gyrerun -n P --timeout S harness_pipeline_rank
// <gpipe|1f1b> <micro-batches> [dim]`. Rank s is stage s of P.
//
// Each rank holds its stage of a 4-block model (so 1, 2 and 4 stages split
// it evenly) and trains it for 20 steps with Pipeline on a global batch of
// 8 sequences cut into M micro-batches. It also trains, by itself, the
// whole model on the same batches, and the P stages chained in one
// process (the same micro-batches through the same stages, without
// transfers). It checks that (a) every step's loss matches the single-rank
// loss within 1e-5 relative, (b) each of its stage's final tensors matches
// the single-rank tensor of the same name within 1e-5 of its norm, (c)
// the loss and the stage's parameters are the chained stages' bits, (d)
// the first and last stage's copies of wte are the same bits, and (e) the
// stage kept as many activations alive as the schedule says, no more. It
// prints the measured bubble (steps 1 to 19; step 0 allocates) beside the
// ideal one. Exits 0 when all hold; otherwise prints what did not and
// exits 1. A third argument changes the model's width (the timings of
// docs/harness.md); the checks stay the same.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data.h"
#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/pipeline.h"
#include "harness/token_file.h"
#include "rank_checks.h"
#include "sentences.h"

namespace fs = std::filesystem;
using namespace gyre::harness;
using namespace gyre::harness::test;

namespace {

GptConfig modelConfig(int dim) {
  return {.vocab = 256, .maxSeq = kSeq, .layers = 4, .heads = 4, .dim = dim};
}

// A peak learning rate of 3e-3: at 1e-2 this little model's loss spikes
// near step 13, and the spike turns rounding differences (of the
// micro-batches' sums, with one rank as with many) into 3e-5 of a tensor's
// norm; the comparison is meant to see the pipeline, not that.
const LrSchedule kLr{.maxLr = 3e-3f, .minLr = 3e-4f, .warmupSteps = 5, .totalSteps = kSteps};

// The whole model on one rank and the whole batch: the reference.
std::vector<float> trainSingle(DataLoader& loader, Gpt& model) {
  AdamW adam(decaySegments(model.layout()), model.params().size(), AdamWConfig{});
  std::vector<int> inputs(kBatch * kSeq), targets(kBatch * kSeq);
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    model.zeroGrad();
    losses.push_back(model.forward(inputs.data(), targets.data(), kBatch, kSeq));
    model.backward();
    clipToNorm(model.grads(), std::sqrt(sumOfSquares(model.grads())), 1.0f);
    adam.step(model.params(), model.grads(), learningRate(kLr, step));
  }
  return losses;
}

// Where a stage's own gradients end: the last stage's tied copy of wte is
// the first stage's wte again, counted once in the clipping norm.
size_t ownEnd(const Gpt& stage) {
  for (const ParamInfo& p : stage.layout())
    if (p.tiedCopy) return p.offset;
  return stage.size();
}

// The clipping norm from each stage's sum of squares, added in stage order
// (the pipeline run gathers them and adds them the same way).
double clipNorm(std::span<const double> squares) {
  double sum = 0;
  for (double s : squares) sum += s;
  return std::sqrt(sum);
}

// The same stages chained in this process: the pipeline's arithmetic with
// no transfers (each micro-batch through the stages in turn, the gradients
// added micro-batch by micro-batch, the two wte gradients summed), which
// the pipeline over gyre must match bit for bit.
std::vector<float> trainChained(DataLoader& loader, std::vector<Gpt>& stages, int M) {
  const int P = static_cast<int>(stages.size()), b = kBatch / M;
  const size_t width = static_cast<size_t>(b) * kSeq * stages[0].config().dim;
  std::vector<AdamW> adams;
  for (Gpt& s : stages) adams.emplace_back(decaySegments(s.layout()), s.size(), AdamWConfig{});
  std::vector<std::vector<Activations>> acts(P, std::vector<Activations>(M));
  std::vector<std::vector<float>> dInput(P, std::vector<float>(width));
  std::vector<int> inputs(kBatch * kSeq), targets(kBatch * kSeq);
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    for (Gpt& s : stages) s.zeroGrad();
    double loss = 0;
    for (int i = 0; i < M; ++i) {
      const size_t at = static_cast<size_t>(i) * b * kSeq;
      for (int s = 0; s < P; ++s)
        loss += stages[s].forward(acts[s][i], inputs.data() + at, targets.data() + at,
                                  s > 0 ? stages[s - 1].output(acts[s - 1][i]) : nullptr, b, kSeq);
    }
    for (int i = 0; i < M; ++i)
      for (int s = P - 1; s >= 0; --s)
        stages[s].backward(acts[s][i], s < P - 1 ? dInput[s + 1].data() : nullptr,
                           s > 0 ? dInput[s].data() : nullptr, 1.0f / static_cast<float>(M));
    losses.push_back(static_cast<float>(loss / M));
    if (P > 1) {
      std::span<float> first = stages[0].grad("wte"), last = stages[P - 1].grad("wte");
      for (size_t k = 0; k < first.size(); ++k) first[k] = last[k] = first[k] + last[k];
    }
    std::vector<double> squares;
    for (Gpt& s : stages) squares.push_back(sumOfSquares(s.grads().first(ownEnd(s))));
    const double norm = clipNorm(squares);
    for (int s = 0; s < P; ++s) {
      clipToNorm(stages[s].grads(), norm, 1.0f);
      adams[s].step(stages[s].params(), stages[s].grads(), learningRate(kLr, step));
    }
  }
  return losses;
}

// The step's timings, summed over the measured steps.
struct Timings {
  int steps = 0;
  double bubble = 0;
  std::vector<StageTiming> stages;
  void add(const StepStats& s) {
    ++steps;
    bubble += s.bubble();
    stages.resize(s.stages.size());
    for (size_t r = 0; r < s.stages.size(); ++r) {
      stages[r].compute += s.stages[r].compute;
      stages[r].transfer += s.stages[r].transfer;
      stages[r].span += s.stages[r].span;
      stages[r].tail += s.stages[r].tail;
    }
  }
};

int body(int argc, char** argv) {
  if (argc < 3) {
    std::printf("usage: harness_pipeline_rank <gpipe|1f1b> <micro-batches> [dim]\n");
    return 2;
  }
  const Schedule schedule = parseSchedule(argv[1]);
  const int M = std::stoi(argv[2]);
  const int dim = argc > 3 ? std::stoi(argv[3]) : 32;
  if (M < 1 || kBatch % M != 0)
    throw std::invalid_argument("the micro-batch count must divide the batch of " +
                                std::to_string(kBatch));
  const MicroBatching batching{.microBatches = M, .microBatchSize = kBatch / M, .seq = kSeq};
  const GptConfig config = modelConfig(dim);

  gyreComm_t comm = nullptr;
  checkGyre(gyreCommInitFromEnv(&comm, nullptr), "gyreCommInitFromEnv", nullptr);
  int stage = 0, stages = 1;
  checkGyre(gyreCommUserRank(comm, &stage), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &stages), "gyreCommCount", comm);
  const bool first = stage == 0, last = stage == stages - 1;

  std::string tmpl = (fs::temp_directory_path() / "gyre-pipeline-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = tmpl, source = dir / "corpus.txt", tokens = dir / "corpus.tokens";
  std::ofstream(source, std::ios::binary) << sentences();
  DataLoader loader(openText(source, tokens), {.batch = kBatch, .seq = kSeq, .seed = kSeed});
  fs::remove_all(dir);  // the loader keeps its mapping

  // The references: the whole model on the whole batch, and the stages
  // chained in this process. Every tensor is drawn from its own stream, so
  // every stage's pieces (and the last stage's copy of wte) start as the
  // whole model's.
  Gpt single(config);
  single.initialize(kSeed);
  const std::vector<float> reference = trainSingle(loader, single);
  std::vector<Gpt> chain;
  chain.reserve(stages);
  for (int s = 0; s < stages; ++s) {
    chain.emplace_back(config, pipelineStage(config, s, stages));
    chain.back().initialize(kSeed);
  }
  const std::vector<float> chainLosses = trainChained(loader, chain, M);

  Gpt model(config, pipelineStage(config, stage, stages));
  model.initialize(kSeed);
  std::optional<Pipeline> pipe;  // reset before comm is destroyed
  pipe.emplace(comm, model);
  AdamW adam(decaySegments(model.layout()), model.params().size(), AdamWConfig{});

  std::vector<int> inputs(kBatch * kSeq), targets(kBatch * kSeq);
  std::vector<float> losses;
  Timings timings;
  int failures = 0;
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    model.zeroGrad();
    // Only the first stage reads tokens and only the last targets.
    losses.push_back(pipe->step(first ? std::span<const int>(inputs) : std::span<const int>(),
                                last ? std::span<const int>(targets) : std::span<const int>(),
                                batching, schedule));
    if (step > 0) timings.add(pipe->lastStep());
    if (pipe->peakLiveActivations() != maxLiveActivations(schedule, stage, stages, M)) {
      std::printf("stage %d: step %d kept %d activations alive, the schedule %d\n", stage, step,
                  pipe->peakLiveActivations(), maxLiveActivations(schedule, stage, stages, M));
      ++failures;
    }
    // The global norm over all stages (gathered, so that every stage adds
    // them in the chained reference's order).
    const double mine = sumOfSquares(model.grads().first(ownEnd(model)));
    std::vector<double> squares(stages);
    checkGyre(gyreAllGather(&mine, squares.data(), 1, gyreFloat64, comm, nullptr),
              "gyreAllGather of the gradient's squares", comm);
    clipToNorm(model.grads(), clipNorm(squares), 1.0f);
    adam.step(model.params(), model.grads(), learningRate(kLr, step));
  }

  // (a) the losses.
  double worstLoss = 0;
  for (int s = 0; s < kSteps; ++s) {
    const double r = relative(losses[s], reference[s]);
    worstLoss = std::max(worstLoss, r);
    if (!(r <= kTolerance) || losses[s] != chainLosses[s]) {
      std::printf("stage %d: step %d loss %.9g, single-rank %.9g (relative %.3g), chained %.9g\n",
                  stage, s, losses[s], reference[s], r, chainLosses[s]);
      ++failures;
    }
  }
  // (b) the stage's tensors against the whole model's of the same name, and
  // its bits against the chained stage's.
  double worstParam = 0;
  failures +=
      checkTensors(model.layout(), model.shard(), model.params(), single.layout(), single.params(),
                   kTolerance, "stage " + std::to_string(stage), &worstParam);
  const Gpt& twin = chain[stage];
  size_t differ = 0;
  for (size_t i = 0; i < model.size(); ++i)
    differ += std::memcmp(&model.params()[i], &twin.params()[i], sizeof(float)) != 0;
  if (differ > 0) {
    std::printf("stage %d: %zu of %zu parameters differ from the chained stages' bits\n", stage,
                differ, model.size());
    ++failures;
  }
  // (c) the two copies of wte, swapped between the first and last stage.
  if (stages > 1 && (first || last)) {
    std::span<const float> wte = model.param("wte");
    std::vector<float> other(wte.size());
    const int peer = first ? stages - 1 : 0;
    checkGyre(gyreGroupStart(), "gyreGroupStart", comm);
    checkGyre(gyreSend(wte.data(), wte.size(), gyreFloat32, peer, comm, nullptr), "gyreSend", comm);
    checkGyre(gyreRecv(other.data(), other.size(), gyreFloat32, peer, comm, nullptr), "gyreRecv",
              comm);
    checkGyre(gyreGroupEnd(), "gyreGroupEnd", comm);
    if (std::memcmp(other.data(), wte.data(), wte.size_bytes()) != 0) {
      size_t elements = 0;
      for (size_t i = 0; i < wte.size(); ++i) elements += std::memcmp(&other[i], &wte[i], 4) != 0;
      std::printf("stage %d: wte differs from stage %d's copy in %zu of %zu elements\n", stage,
                  peer, elements, wte.size());
      ++failures;
    }
  }

  std::printf(
      "stage %d of %d (%s, %d micro-batches of %d): %d steps, loss %.5f -> %.5f, worst relative "
      "difference from one rank: loss %.3g, parameters %.3g; the chained stages' bits: %s; %s\n",
      stage, stages, scheduleName(schedule), M, batching.microBatchSize, kSteps, losses.front(),
      losses.back(), worstLoss, worstParam, differ ? "no" : "yes", failures ? "FAILED" : "ok");
  if (first) {
    const int n = timings.steps;
    std::printf("%s p=%d m=%d dim=%d, per step over steps 1-%d (ms):\n", scheduleName(schedule),
                stages, M, dim, kSteps - 1);
    for (int r = 0; r < stages; ++r) {
      const StageTiming& t = timings.stages[r];
      std::printf(
          "  stage %d: compute %.3f  transfers %.3f  schedule %.3f  tied sum %.3f  idle %.1f%%\n",
          r, 1e3 * t.compute / n, 1e3 * t.transfer / n, 1e3 * t.span / n, 1e3 * t.tail / n,
          100.0 * (1.0 - t.compute / t.span));
    }
    std::printf("  bubble: measured %.1f%% (mean over steps), ideal (p-1)/(m+p-1) = %.1f%%\n",
                100.0 * timings.bubble / n, 100.0 * theoreticalBubble(stages, M));
  }
  pipe.reset();
  checkGyre(gyreCommFinalize(comm), "gyreCommFinalize", comm);
  gyreCommDestroy(comm);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return runRank("harness_pipeline_rank", body, argc, argv); }
