// One rank of the FlexSP tests, started by gyrerun (tests/harness/
// CMakeLists.txt):
//
//   gyrerun -n R harness_flexsp_rank [--memory M] [--plan-seconds S] [--zero Z] [--resume 1]
//       [--ulysses 1]
//
// Each rank trains 20 steps through Trainer in FlexSP mode (harness/
// trainer.h) on variable-length batches (VarlenLoader: lognormal lengths of
// median 10 in [4, 32], 64 tokens a step), and also trains the single-rank
// run of the same batches by itself: every sequence whole, its loss
// weighted by its tokens over the batch's. It checks (a) every step's loss
// within 1e-5 relative of the single-rank one, (b) the final parameters
// within 1e-5 relative (in norm, tensor by tensor), (c) the same bits on
// every rank, and (d) that some step's plan has groups of two sizes or more
// (else the test would prove plain data parallelism only). With --resume,
// a checkpoint after step 10 is loaded by a second Trainer whose steps 10
// to 19 must repeat the first run's losses bit for bit. With --ulysses, the
// baseline: every sequence split unevenly over the whole world (no (d)).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "flexsp/plan.h"
#include "gyre/gyre.h"
#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/trainer.h"
#include "harness/varlen_data.h"
#include "rank_checks.h"
#include "sentences.h"

namespace fs = std::filesystem;
using namespace gyre::harness;
using namespace gyre::harness::test;

namespace {

constexpr int kMaxLen = 32, kSaveAt = 10;

TrainerConfig baseConfig(int world) {
  TrainerConfig c;
  c.model = {.vocab = 256, .maxSeq = kMaxLen, .layers = 2, .heads = 4, .dim = 32};
  c.mesh.dp = world;
  c.batch = 2;  // x seq: 64 tokens a step
  c.seq = kMaxLen;
  c.seed = kSeed;
  c.lr = {.maxLr = 3e-3f, .minLr = 3e-4f, .warmupSteps = 5, .totalSteps = kSteps};
  c.clip = 1.0f;
  c.bucketElems = 4096;
  c.flexsp.on = true;
  c.flexsp.lengths = {.mu = std::log(10.0), .sigma = 0.8, .minLen = 4, .maxLen = kMaxLen};
  c.flexsp.memoryTokens = 24;
  c.flexsp.planSeconds = 0;
  return c;
}

struct Reference {
  std::vector<float> losses;
  Gpt model;
  explicit Reference(const GptConfig& c) : model(c) {}
};

// The single-rank run: each sequence whole, the step one AdamW step on the
// mean over every token of the batch.
void trainReference(const TrainerConfig& c, const VarlenLoader& loader, Reference& ref) {
  ref.model.initialize(c.seed);
  AdamW adam(decaySegments(ref.model.layout()), ref.model.size(), c.adam);
  Activations a;
  for (int step = 0; step < kSteps; ++step) {
    const VarlenBatch b = loader.batch(step);
    ref.model.zeroGrad();
    double loss = 0;
    for (size_t s = 0; s < b.lengths.size(); ++s) {
      const int L = static_cast<int>(b.lengths[s]);
      const float w = static_cast<float>(L) / static_cast<float>(b.totalTokens());
      loss += w * ref.model.forward(a, b.inputsOf(s).data(), b.targetsOf(s).data(), nullptr, 1, L);
      ref.model.backward(a, nullptr, nullptr, w);
    }
    ref.losses.push_back(static_cast<float>(loss));
    clipToNorm(ref.model.grads(), std::sqrt(sumOfSquares(ref.model.grads())), c.clip);
    adam.step(ref.model.params(), ref.model.grads(), learningRate(c.lr, step));
  }
}

int body(int argc, char** argv) {
  gyreComm_t world = nullptr;
  checkGyre(gyreCommInitFromEnv(&world, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 0;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  TrainerConfig config = baseConfig(ranks);
  bool resume = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--memory")
      config.flexsp.memoryTokens = std::stoll(value);
    else if (flag == "--plan-seconds")
      config.flexsp.planSeconds = std::stod(value);
    else if (flag == "--zero")
      config.zero = std::stoi(value);
    else if (flag == "--ulysses")
      config.flexsp.fixedUlysses = value == "1";
    else if (flag == "--resume")
      resume = value == "1";
    else
      throw std::invalid_argument("unknown flag " + flag);
  }

  char dirName[256] = {};
  if (rank == 0) {
    std::string tmpl = (fs::temp_directory_path() / "gyre-flexsp-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    std::strncpy(dirName, tmpl.c_str(), sizeof dirName - 1);
  }
  checkGyre(gyreBroadcast(dirName, dirName, sizeof dirName, gyreUint8, 0, world, nullptr),
            "gyreBroadcast", world);
  const fs::path dir = dirName, source = dir / "corpus.txt",
                 tokens = dir / ("corpus-" + std::to_string(rank) + ".tokens");
  if (rank == 0) std::ofstream(source, std::ios::binary) << sentences();
  checkGyre(gyreBarrier(world, nullptr), "gyreBarrier", world);
  const VarlenLoader loader(openText(source, tokens), Trainer::varlenConfig(config));

  Reference ref(config.model);
  trainReference(config, loader, ref);

  int failures = 0, mixedSteps = 0;
  std::set<int> sizes;
  std::vector<float> losses;
  double worstLoss = 0, worstParam = 0;
  const std::string who = "rank " + std::to_string(rank);
  {
    Trainer trainer(world, config);
    for (int step = 0; step < kSteps; ++step) {
      losses.push_back(trainer.step(step, loader).loss);
      std::set<int> stepSizes;
      for (const gyre::flexsp::Group& g : trainer.lastPlan().groups) {
        if (g.sequences.empty()) continue;
        stepSizes.insert(g.size);
        sizes.insert(g.size);
      }
      mixedSteps += stepSizes.size() > 1;
      if (rank == 0 && step < 3) {
        std::printf("step %d: plan %s:", step, trainer.lastPlan().method.c_str());
        for (const gyre::flexsp::Group& g : trainer.lastPlan().groups) {
          std::printf(" [ranks %d-%d:", g.firstRank, g.firstRank + g.size - 1);
          for (int s : g.sequences)
            std::printf(" %lld", static_cast<long long>(loader.lengths(step)[s]));
          std::printf("]");
        }
        std::printf("\n");
      }
      if (resume && step + 1 == kSaveAt) trainer.save(dir / "checkpoints", kSaveAt);
    }
    failures += checkLosses(losses, ref.losses, kTolerance, who, &worstLoss);
    const std::vector<float> params = trainer.pieceParams();
    failures += checkTensors(trainer.model().layout(), trainer.model().shard(), params,
                             ref.model.layout(), ref.model.params(), kTolerance, who, &worstParam);
    failures += checkReplicas(world, params, who);
  }
  if (mixedSteps == 0 && !config.flexsp.fixedUlysses) {
    std::printf("%s: no step's plan had groups of two sizes (sizes used:", who.c_str());
    for (int s : sizes) std::printf(" %d", s);
    std::printf("): the test proves nothing of FlexSP\n");
    ++failures;
  }
  std::printf(
      "rank %d of %d, FlexSP, zero %d: loss %.5f -> %.5f, %d of %d steps with groups of "
      "several sizes; worst relative difference from one rank: loss %.3g, parameters %.3g\n",
      rank, ranks, config.zero, losses.front(), losses.back(), mixedSteps, kSteps, worstLoss,
      worstParam);

  if (resume) {
    Trainer trainer(world, config);
    const int64_t from = trainer.load(dir / "checkpoints" / ("step-" + std::to_string(kSaveAt)));
    if (from != kSaveAt || !trainer.loadChanges().empty()) {
      std::printf("%s: the checkpoint says step %lld with %zu changes\n", who.c_str(),
                  static_cast<long long>(from), trainer.loadChanges().size());
      ++failures;
    }
    for (int step = kSaveAt; step < kSteps; ++step) {
      const float loss = trainer.step(step, loader).loss;
      if (loss != losses[step]) {
        std::printf("%s: resumed step %d loss %.9g, uninterrupted %.9g\n", who.c_str(), step, loss,
                    losses[step]);
        ++failures;
      }
    }
    std::printf("rank %d: resumed at step %d\n", rank, kSaveAt);
  }

  checkGyre(gyreBarrier(world, nullptr), "gyreBarrier", world);
  if (rank == 0) fs::remove_all(dir);
  std::printf("rank %d: %s\n", rank, failures ? "FAILED" : "ok");
  checkGyre(gyreCommFinalize(world), "gyreCommFinalize", world);
  gyreCommDestroy(world);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return runRank("harness_flexsp_rank", body, argc, argv); }
