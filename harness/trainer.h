// One rank of a training run on a dp x tp x pp mesh: the pieces put
// together (docs/harness.md, "Putting it together"). The mesh gives the
// rank its place and communicators; the model is its piece (tensor-parallel
// heads and MLP units of its pipeline stage's blocks); ZeRO holds the
// parameters, gradients and optimizer state and reduces the gradients over
// the data-parallel ranks; a pipeline moves micro-batches between the
// stages. gyre-train is this class with a command line; the tests run it
// against the single-rank run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data.h"
#include "harness/data_parallel.h"
#include "harness/expert_parallel.h"
#include "harness/mesh.h"
#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/pipeline.h"
#include "harness/zero.h"

namespace gyre::harness {

struct TrainerConfig {
  GptConfig model;
  MeshShape mesh;
  int zero = 0;  // ZeRO stage over the data-parallel ranks
  Schedule schedule = Schedule::OneFOneB;
  int microBatches = 1;  // per step and data-parallel rank
  int batch = 8;         // sequences per step, over all data-parallel ranks
  int seq = 64;
  uint64_t seed = 1;
  LrSchedule lr;
  AdamWConfig adam;
  float clip = 1.0f;  // the global gradient norm's bound; <= 0: none
  // Data parallelism through compressed or decentralized averaging instead
  // of ZeRO (zero 0, pp 1 and one micro-batch only).
  gyreCodec_t codec = gyreCodecNone;
  bool decentralized = false;
  gyrePeers_t peers = gyrePeersRing;
  size_t bucketElems = kDefaultBucketElems;
};

// What one step did, the same on every rank.
struct StepReport {
  int64_t step = 0;
  float loss = 0;  // the mean over the global batch
  double gradNorm = 0;
  float lr = 0;
  int64_t tokens = 0;    // in the global batch
  double seconds = 0;    // the whole step on this rank
  double compute = 0;    // forward and backward, less the tensor-parallel reductions
  double comm = 0;       // communication nothing hid: tensor-parallel reductions, waiting
                         // for the gradient reductions, pipeline transfers
  double optimizer = 0;  // clipping, AdamW and ZeRO's gathers
  double bubble = 0;     // the pipeline's measured bubble share (0 without one)
  // A mixture of experts: slots the experts' capacity dropped this step over
  // the whole mesh (every block, micro-batch and rank), and of how many.
  int64_t moeDropped = 0, moeSlots = 0;
};

class Trainer {
 public:
  // Collective over world (dp * tp * pp ranks): makes the mesh and the
  // rank's piece of the model, initialized from config.seed (every mesh
  // starts from the same model). Throws std::invalid_argument naming what
  // does not fit.
  Trainer(gyreComm_t world, const TrainerConfig& config);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step on step's global batch (the loader is this rank's:
  // rank = mesh().dpRank(), ranks = dp). Collective over the world.
  StepReport step(int64_t step, DataLoader& loader);

  // The checkpoint of a run that has finished `stepsDone` steps, in
  // dir/step-<stepsDone>: each rank writes its shard, rank 0 the index once
  // all are written. Collective; returns when the checkpoint is complete.
  std::filesystem::path save(const std::filesystem::path& dir, int64_t stepsDone);
  // Loads a checkpoint written by any mesh of the same model, resharding as
  // needed; returns its stepsDone (the step to continue from). Collective.
  // Throws CheckpointError naming the file, or std::invalid_argument when it
  // holds another model.
  int64_t load(const std::filesystem::path& stepDir);
  // What the last load found this run doing differently from the run that
  // wrote the checkpoint, beyond the mesh and ZeRO stage (which reshard
  // exactly): "seed 1 -> 2" for the batch, seed, micro-batches,
  // schedule, codec or decentralized averaging. Such a run goes on from the
  // checkpoint's weights but not as the first run would have; empty when
  // none differ.
  const std::vector<std::string>& loadChanges() const { return loadChanges_; }

  // This rank's piece's parameters, whole (a collective gather at ZeRO 3).
  std::vector<float> pieceParams();
  ZeroMemory memory() const;
  const Mesh& mesh() const { return *mesh_; }
  const Gpt& model() const { return *model_; }
  const TrainerConfig& config() const { return config_; }
  // For logs: "dp 2 x tp 2 x pp 1, zero 1, ..." as a key-value map.
  std::map<std::string, std::string> describe() const;

 private:
  void setUpSequenceParallel();
  // The flat ranges that count towards the global gradient norm on this
  // rank: every tensor once over the mesh (a tensor-parallel replica on tp
  // rank 0 only, the tied wte copy not at all).
  std::vector<FlatRange> normRanges() const;
  float forwardBackward(int64_t step, DataLoader& loader, StepReport& report);
  void sumTiedEmbedding(std::span<float> grads);

  TrainerConfig config_;
  std::unique_ptr<Mesh> mesh_;
  std::vector<std::string> loadChanges_;
  std::unique_ptr<Zero> zero_;  // the default
  std::unique_ptr<GyreExpertExchange> experts_;  // ep > 1; outlives the model's calls
  std::unique_ptr<Gpt> model_;
  std::unique_ptr<DataParallel> dp_;    // codec or decentralized data parallelism
  std::unique_ptr<AdamW> adam_;         // with dp_
  std::unique_ptr<Pipeline> pipeline_;  // pp > 1
  std::vector<Activations> micro_;      // pp == 1: the micro-batches' activations
  // Time this step in tensor-parallel reductions, sequence-parallel and
  // expert exchanges (inside forward and backward, never hidden).
  double tpSeconds_ = 0;
  std::vector<int> inputs_, targets_;
};

}  // namespace gyre::harness
