// One rank of the mesh tests, started by gyrerun (tests/harness/
// CMakeLists.txt):
//
//   gyrerun -n R harness_train_rank --dp D [--sp S] --tp T --pp P [--zero Z] [--experts E]
//       [--ep X] [--schedule gpipe|1f1b] [--micro M]
//       [--resume-dp D2 --resume-sp S2 --resume-tp T2 --resume-pp P2 --resume-zero Z2
//        --resume-ep X2]
//
// Each rank trains its piece of the model for 20 steps through Trainer
// (harness/trainer.h) on a D x T x P mesh, and also trains the single-rank
// run of the same global batches by itself. It checks (a) the loss of every
// step within 1e-5 relative of the single-rank one, (b) its piece's final
// parameters, tensor by tensor in global coordinates, within 1e-5 relative
// (in norm), and (c) that its parameters are the same bits as every other
// data-parallel replica's of the same piece (with --ep, the ranks holding the
// same experts).
//
// With --resume-*, the run also saves a checkpoint after step 10, and a
// second Trainer on the mesh D2 x T2 x P2 (the same rank count) loads it and
// trains steps 10 to 19: on the same mesh its losses must be the first
// run's bit for bit, on another within 1e-5.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data.h"
#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/token_file.h"
#include "harness/trainer.h"
#include "rank_checks.h"
#include "sentences.h"

namespace fs = std::filesystem;
using namespace gyre::harness;
using namespace gyre::harness::test;

namespace {

// Shorter sequences than the other rank programs' (rank_checks.h): the mesh
// tests run a 4-block model on up to 8 ranks.
constexpr int kMeshSeq = 16, kSaveAt = 10;

// --experts E: every block a mixture of E experts (top 2). Without a
// capacity and the load-balancing loss, which are functions of each rank's
// own batch, the mesh's run is the single-rank one's up to rounding.
int experts = 0;

TrainerConfig baseConfig() {
  TrainerConfig c;
  c.model = {.vocab = 256, .maxSeq = kMeshSeq, .layers = 4, .heads = 4, .dim = 32};
  c.model.experts = experts;
  c.model.auxCoef = 0.0f;
  c.batch = kBatch;
  c.seq = kMeshSeq;
  c.seed = kSeed;
  // 3e-3 rather than dp_rank's 1e-2: at 1e-2 the loss spikes near step 13, where
  // AdamW's early, nearly sign(g) steps turn micro-batching's rounding into
  // differences of a few 1e-5 (docs/harness.md, "Pipeline parallel").
  c.lr = {.maxLr = 3e-3f, .minLr = 3e-4f, .warmupSteps = 5, .totalSteps = kSteps};
  c.clip = 1.0f;
  c.bucketElems = 4096;  // several buckets even for this small model
  return c;
}

struct Reference {
  std::vector<float> losses;
  Gpt model{baseConfig().model};
};

// The single-rank run of the same global batches.
void trainReference(const fs::path& source, const fs::path& tokens, Reference& ref) {
  const TrainerConfig c = baseConfig();
  ref.model.initialize(c.seed);
  DataLoader loader(openText(source, tokens), {.batch = c.batch, .seq = c.seq, .seed = c.seed});
  AdamW adam(decaySegments(ref.model.layout()), ref.model.size(), c.adam);
  std::vector<int> inputs(c.batch * c.seq), targets(inputs.size());
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    ref.model.zeroGrad();
    ref.losses.push_back(ref.model.forward(inputs.data(), targets.data(), c.batch, c.seq));
    ref.model.backward();
    clipToNorm(ref.model.grads(), std::sqrt(sumOfSquares(ref.model.grads())), c.clip);
    adam.step(ref.model.params(), ref.model.grads(), learningRate(c.lr, step));
  }
}

int body(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--experts") experts = std::stoi(argv[i + 1]);
  TrainerConfig config = baseConfig(), resumed;
  bool resume = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = flag == "--schedule" ? 0 : std::stoi(argv[i + 1]);
    if (flag == "--dp")
      config.mesh.dp = v;
    else if (flag == "--sp")
      config.mesh.sp = v;
    else if (flag == "--tp")
      config.mesh.tp = v;
    else if (flag == "--pp")
      config.mesh.pp = v;
    else if (flag == "--ep")
      config.mesh.ep = v;
    else if (flag == "--zero")
      config.zero = v;
    else if (flag == "--micro")
      config.microBatches = v;
    else if (flag == "--schedule")
      config.schedule = parseSchedule(argv[i + 1]);
    else if (flag.starts_with("--resume-"))
      resume = true;
    else if (flag == "--experts")
      continue;  // read above
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  resumed = config;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (!flag.starts_with("--resume-")) continue;
    const int v = std::stoi(argv[i + 1]);
    if (flag == "--resume-dp")
      resumed.mesh.dp = v;
    else if (flag == "--resume-sp")
      resumed.mesh.sp = v;
    else if (flag == "--resume-tp")
      resumed.mesh.tp = v;
    else if (flag == "--resume-pp")
      resumed.mesh.pp = v;
    else if (flag == "--resume-ep")
      resumed.mesh.ep = v;
    else if (flag == "--resume-zero")
      resumed.zero = v;
  }

  gyreComm_t world = nullptr;
  checkGyre(gyreCommInitFromEnv(&world, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);

  // One scratch folder for the job: rank 0 makes it, the others learn its
  // name from a broadcast.
  char dirName[256] = {};
  if (rank == 0) {
    std::string tmpl = (fs::temp_directory_path() / "gyre-train-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    std::strncpy(dirName, tmpl.c_str(), sizeof dirName - 1);
  }
  checkGyre(gyreBroadcast(dirName, dirName, sizeof dirName, gyreUint8, 0, world, nullptr),
            "gyreBroadcast", world);
  const fs::path dir = dirName, source = dir / "corpus.txt",
                 tokens = dir / ("corpus-" + std::to_string(rank) + ".tokens");
  if (rank == 0) std::ofstream(source, std::ios::binary) << sentences();
  checkGyre(gyreBarrier(world, nullptr), "gyreBarrier", world);

  Reference ref;
  trainReference(source, tokens, ref);

  int failures = 0;
  std::vector<float> losses;
  double worstLoss = 0, worstParam = 0;
  std::string meshName;
  {
    Trainer trainer(world, config);
    meshName = trainer.mesh().describe();
    DataLoader loader(openText(source, tokens), {.batch = kBatch,
                                                 .seq = kMeshSeq,
                                                 .seed = kSeed,
                                                 .rank = trainer.mesh().dpRank(),
                                                 .ranks = config.mesh.dp});
    for (int step = 0; step < kSteps; ++step) {
      losses.push_back(trainer.step(step, loader).loss);
      if (resume && step + 1 == kSaveAt) trainer.save(dir / "checkpoints", kSaveAt);
    }
    const std::string who = "rank " + std::to_string(rank);
    failures += checkLosses(losses, ref.losses, kTolerance, who, &worstLoss);
    const std::vector<float> piece = trainer.pieceParams();
    failures += checkTensors(trainer.model().layout(), trainer.model().shard(), piece,
                             ref.model.layout(), ref.model.params(), kTolerance, who, &worstParam);
    // (c) the data- and sequence-parallel replicas of this piece (with
    // experts spread, those holding the same experts): the same bits.
    failures += checkReplicas(trainer.mesh().expertData(), piece, who);
    const ZeroMemory mem = trainer.memory();
    std::printf(
        "rank %d, %s (%s), zero %d, %d micro-batches: loss %.5f -> %.5f, worst relative "
        "difference from one rank: loss %.3g, parameters %.3g; holds %zu/%zu/%zu bytes of "
        "parameters/gradients/optimizer state\n",
        rank, meshName.c_str(), trainer.mesh().place().c_str(), config.zero, config.microBatches,
        losses.front(), losses.back(), worstLoss, worstParam, mem.params, mem.grads, mem.optimizer);
  }

  if (resume) {
    Trainer trainer(world, resumed);
    const int64_t from = trainer.load(dir / "checkpoints" / ("step-" + std::to_string(kSaveAt)));
    if (from != kSaveAt) {
      std::printf("rank %d: the checkpoint says step %lld, not %d\n", rank,
                  static_cast<long long>(from), kSaveAt);
      ++failures;
    }
    const bool sameMesh = resumed.mesh.dp == config.mesh.dp && resumed.mesh.sp == config.mesh.sp &&
                          resumed.mesh.tp == config.mesh.tp &&
                          resumed.mesh.pp == config.mesh.pp && resumed.mesh.ep == config.mesh.ep &&
                          resumed.zero == config.zero;
    DataLoader loader(openText(source, tokens), {.batch = kBatch,
                                                 .seq = kMeshSeq,
                                                 .seed = kSeed,
                                                 .rank = trainer.mesh().dpRank(),
                                                 .ranks = resumed.mesh.dp});
    double worst = 0;
    for (int step = kSaveAt; step < kSteps; ++step) {
      const float loss = trainer.step(step, loader).loss;
      const double r = relative(loss, losses[step]);
      worst = std::max(worst, r);
      if (sameMesh ? loss != losses[step] : !(r <= kTolerance)) {
        std::printf("rank %d: resumed step %d loss %.9g, uninterrupted %.9g\n", rank, step, loss,
                    losses[step]);
        ++failures;
      }
    }
    std::printf("rank %d: resumed at step %d on %s, zero %d: worst relative difference %.3g (%s)\n",
                rank, kSaveAt, trainer.mesh().describe().c_str(), resumed.zero, worst,
                sameMesh ? "must be 0" : "another mesh");
  }

  checkGyre(gyreBarrier(world, nullptr), "gyreBarrier", world);
  if (rank == 0) fs::remove_all(dir);
  std::printf("rank %d: %s\n", rank, failures ? "FAILED" : "ok");
  checkGyre(gyreCommFinalize(world), "gyreCommFinalize", world);
  gyreCommDestroy(world);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return runRank("harness_train_rank", body, argc, argv); }
