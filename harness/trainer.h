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
#include "harness/varlen_data.h"
#include "harness/zero.h"

namespace gyre::flexsp {
class GroupComms;
class UlyssesTime;
struct Plan;
}  // namespace gyre::flexsp

namespace gyre::harness {

// FlexSP (docs/harness.md, "FlexSP"): each step's batch is sequences of
// varying lengths (VarlenLoader over `batch x seq` tokens, the longest
// `seq`), and rank 0 plans sequence-parallel groups of power-of-two sizes
// for it (flexsp/planner.h); each group runs its sequences one after
// another with Ulysses over its ranks. The mesh is data parallelism over
// the whole world (every rank holds the whole model).
struct FlexspConfig {
  bool on = false;
  LengthDistribution lengths;  // maxLen is the config's seq
  // Tokens of activations a rank holds at most (the planner's memory
  // limit); 0: the batch's tokens over the ranks, rounded up.
  int64_t memoryTokens = 0;
  // The planner's solver budget a step; 0: the greedy plan alone. Rank 0
  // plans while the others wait (planning is not overlapped with the
  // previous step yet), so the budget is paid every step.
  double planSeconds = 0;
  // The baseline FlexSP is measured against: every step one group of the
  // whole world running every sequence (fixed Ulysses over the world).
  bool fixedUlysses = false;
  // The time model's compute constants for this model's layer (seconds per
  // token squared and per token, gyre-flexsp-calibrate --hidden dim);
  // 0: the built-in calibration at width 512, scaled to this width.
  double attentionSeconds = 0, linearSeconds = 0;
};

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
  FlexspConfig flexsp;
};

// The largest FlexSP group config allows: the largest power of two that
// divides the heads (Ulysses deals them to a group's ranks), within the world.
int flexspLargestGroup(const TrainerConfig& config);

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
  // FlexSP: how the step was planned ("greedy: 2x1 1x2", the groups that
  // ran sequences as count x size) and the seconds its plan predicted.
  std::string plan;
  double predicted = 0;
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
  // FlexSP's step (config.flexsp.on) on the loader's batch of `step`, the
  // same loader on every rank. Collective over the world.
  StepReport step(int64_t step, const VarlenLoader& loader);
  // The FlexSP plan of the last step (every rank's the same).
  const flexsp::Plan& lastPlan() const;
  // The loader FlexSP's steps need, from this config.
  static VarlenConfig varlenConfig(const TrainerConfig& config);

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
  // Ulysses over comm (this rank's place in it), the exchanges' time
  // counted in tpSeconds_; runs as Gpt::SeqParallel's.
  Gpt::SeqParallel seqParallelOver(gyreComm_t comm, std::vector<int> runs = {});
  // The flat ranges that count towards the global gradient norm on this
  // rank: every tensor once over the mesh (a tensor-parallel replica on tp
  // rank 0 only, the tied wte copy not at all).
  std::vector<FlatRange> normRanges() const;
  float forwardBackward(int64_t step, DataLoader& loader, StepReport& report);
  void sumTiedEmbedding(std::span<float> grads);
  void setUpFlexsp(gyreComm_t world);
  // This rank's group's forward and backward of the batch under the plan;
  // returns its token-weighted share of the loss.
  float flexspForwardBackward(const VarlenBatch& batch, const flexsp::Plan& plan, gyreComm_t group);

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
  // FlexSP: the time model, the groups' communicators, the last plan.
  std::unique_ptr<flexsp::UlyssesTime> flexspTime_;
  std::unique_ptr<flexsp::GroupComms> flexspGroups_;
  std::unique_ptr<flexsp::Plan> flexspPlan_;
};

}  // namespace gyre::harness
