// ZeRO (Rajbhandari et al. 2020; DeepSpeed's stages 1 to 3) over a
// data-parallel communicator: each of R ranks keeps one shard of the
// optimizer state (stage 1), of the gradients too (stage 2), and of the
// parameters too (stage 3), so that per-rank memory for them falls towards
// 1/R of the model's (docs/harness.md, "ZeRO"). Stage 0 is plain data
// parallelism, for comparison.
//
// The shards are contiguous ranges of the model's flat layout (shardRange):
// rank r owns elements [r*S, (r+1)*S) with S = ceil(n/R), so a checkpoint of
// a shard is one range of every array, whatever the stage. Backward finishes
// the layout from its end, so the gradients of a part (a block) belong to one
// or two owners, not to all ranks in equal blocks as gyreReduceScatter
// wants; stages 2 and 3 therefore reduce each part with one gyreIreduce per
// owner of a piece of it (a reduce-scatter with unequal blocks), and stage 3
// gathers a part's parameters with one gyreIbroadcast per owner (an
// all-gather with unequal blocks). Where the blocks are equal (the whole
// padded array after a stage 1/2 step), it is gyreAllGather.
//
// Zero is the model's PartStorage: build the model with it
// (Gpt model(config, shard, &zero)) and it holds the parameters and
// gradients, launches every reduction from releaseGrads as backward finishes
// a part (no backward hook needed), and at stage 3 gathers a part's
// parameters when the model acquires them and frees them after. Uses gyre's
// public C ABI only.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data_parallel.h"
#include "harness/layout.h"
#include "harness/model.h"
#include "harness/optimizer.h"

namespace gyre::harness {

// Elements [begin, end) of the flat arrays.
struct FlatRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// How many elements a shard spans: ceil(n / ranks), so that ranks * stride
// (the array padded at its end) is what an equal-count AllGather takes.
size_t shardStride(size_t n, int ranks);

// Rank `rank`'s shard of an n-element array cut among `ranks`:
// [rank*S, (rank+1)*S) clipped to n, S = shardStride(n, ranks). The last
// shards may be shorter, or empty when n is small. Throws
// std::invalid_argument unless 0 <= rank < ranks.
FlatRange shardRange(size_t n, int rank, int ranks);

// The segments' parts inside [begin, end), rebased so that begin is 0: what
// an AdamW over one shard needs. Throws std::invalid_argument when
// end < begin.
std::vector<DecaySegment> cutSegments(const std::vector<DecaySegment>& segments, size_t begin,
                                      size_t end);

// Bytes this rank holds for the model's state.
struct ZeroMemory {
  size_t params = 0;     // across steps
  size_t grads = 0;      // across steps
  size_t optimizer = 0;  // AdamW's m and v
  // The most bytes of gathered parameters and per-part gradient buffers
  // (stages 2 and 3) held at one time since construction.
  size_t peakTransient = 0;
};

class Zero : public PartStorage {
 public:
  // comm: the data-parallel ranks (not owned). layout: the model's
  // (Gpt::layout(); every rank's the same). stage 0 to 3. bucketElems: the
  // AllReduce bucket of stages 0 and 1 (stages 2 and 3 reduce part by part).
  // Throws std::invalid_argument for a stage outside 0..3, an empty layout or
  // a bucket of 0 elements, GyreError when comm cannot say its rank.
  Zero(gyreComm_t comm, std::vector<ParamInfo> layout, int stage, const AdamWConfig& adam = {},
       size_t bucketElems = kDefaultBucketElems);
  ~Zero() override;
  Zero(const Zero&) = delete;
  Zero& operator=(const Zero&) = delete;

  // Sets the parameters from the whole flat array (size() elements), which
  // must be the same on every rank (Gpt::initialize(seed, out) with one
  // seed): each rank keeps what its stage holds. Not collective.
  void setParams(std::span<const float> full);
  // The whole flat array of parameters. Collective at stage 3 (an
  // AllGather); the same bits on every rank.
  std::vector<float> gatherParams();

  // --- One training step: beginStep(), the model's forward and backward
  // (microBatches times), finishBackward(), step(). ---

  // Zeroes the gradients. With microBatches > 1, stages 0 and 1 reduce during
  // the last backward only; stages 2 and 3 reduce every backward's parts and
  // add them up in the shard. Waits for (and drops) whatever an interrupted
  // step left in flight.
  void beginStep(int microBatches = 1);
  // Waits for every reduction launched during backward; then the own shard
  // of the gradients (stages 0 and 1: all of them) is the average over the
  // ranks. Throws GyreError naming the failed call (after waiting for all,
  // so nothing still writes into freed memory), std::logic_error when
  // backward did not run microBatches times since beginStep.
  void finishBackward();
  // The mean of every rank's loss (a one-float AllReduce).
  float averageLoss(float localLoss);
  // Clips the gradients to a global norm of maxNorm (no clipping when
  // maxNorm <= 0), takes AdamW's step at lr on the own shard (stage 0: on
  // everything), and at stages 1 and 2 all-gathers the parameters. Returns
  // the global norm before clipping.
  double step(float lr, float maxNorm);

  // Stages 0 and 1, between finishBackward and step: the whole averaged
  // gradient array, for a change that spans ranks of another dimension
  // (a pipeline sums the tied embedding's two copies here). Throws
  // std::logic_error at stages 2 and 3, which hold only their shard.
  std::span<float> replicaGrads();

  // The global sum of squares from this rank's: by default a gyreAllReduce
  // (sum, float64) over the data-parallel comm. A mesh with tensor or
  // pipeline parallelism adds its other dimensions here.
  using GlobalSumSq = std::function<double(double localSumSq)>;
  void setGlobalSumSq(GlobalSumSq f);  // empty: back to the default
  // Only these ranges of the flat layout count towards the norm on this rank
  // (a replicated tensor counted on one tensor-parallel rank only); by
  // default all of it. Within them each rank counts its own shard.
  void setNormRanges(std::vector<FlatRange> ranges);

  // Expert parallelism (stage 0 only): the elements in `ranges` are this
  // rank's experts, which the ranks of `comm` (data-parallel ranks, the same
  // experts on each) hold and no other. Their gradients are reduced over
  // comm alone, scaled so that they come out as every other gradient does,
  // the sum over the data-parallel ranks' batches over their count; the
  // norm counts them once per comm. Throws std::invalid_argument at stages
  // 1 to 3 (their shards cut one flat layout, which the expert-parallel
  // ranks do not share) and for a range outside the layout.
  void setExpertGroup(gyreComm_t comm, std::vector<FlatRange> ranges);

  // --- Checkpoints: the own shard of the flat layout. ---
  FlatRange shard() const { return shard_; }
  // With an expert group: the cut of the flat layout this rank counts (and
  // checkpoints) for its experts among the ranks sharing them; shard() without.
  FlatRange expertShard() const { return expertRanges_.empty() ? shard_ : expertShard_; }
  std::span<const float> shardParams() const;
  std::span<const float> shardM() const;
  std::span<const float> shardV() const;
  int adamSteps() const { return adam_.steps(); }
  // Stage 0: the whole arrays, which every rank holds (a checkpoint of
  // expert parallelism cuts them its own way). std::logic_error otherwise.
  std::span<const float> wholeParams() const;
  std::span<const float> wholeM() const;
  std::span<const float> wholeV() const;
  // Stage 0: sets the whole arrays (size() elements each), with no
  // communication (every rank passes its own, read from a checkpoint).
  void loadWhole(std::span<const float> params, std::span<const float> m,
                 std::span<const float> v, int steps);
  // Restores the own shard (shard().size() elements each). Collective: every
  // rank calls it with its shard, and the stages that hold more than their
  // shard gather the rest (stage 0: parameters and moments; 1 and 2: the
  // parameters).
  void loadShard(std::span<const float> params, std::span<const float> m, std::span<const float> v,
                 int steps);

  ZeroMemory memory() const;
  // Seconds the model waited for stage 3's gathers since beginStep: the
  // parameter communication forward and backward could not hide.
  double gatherSeconds() const { return gatherSeconds_; }
  int stage() const { return stage_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  size_t size() const { return n_; }
  const std::vector<GradBucket>& buckets() const { return buckets_; }

  // --- PartStorage, for the model (model.h). ---
  const float* acquireParams(int part) override;
  void releaseParams(int part) override;
  float* acquireGrads(int part) override;
  void releaseGrads(int part) override;

 private:
  struct PartState {
    PartRange range;
    int paramRefs = 0;
    std::vector<float> params;  // stage 3: the gathered part
    int gradRefs = 0;
    std::vector<float> grads;  // stages 2 and 3: this backward's part
  };
  // Reductions in flight, and the buffer they read (stages 2 and 3).
  struct Pending {
    std::vector<gyreRequest_t> requests;
    std::vector<float> buffer;
    size_t bufferBegin = 0;  // the flat offset of buffer[0]
    std::string what;
  };
  enum class Phase { Idle, Backward, Reduced };

  PartState& partState(int id, const char* caller);
  // Each owner's piece of [begin, end): {rank, piece}.
  std::vector<std::pair<int, FlatRange>> owners(size_t begin, size_t end) const;
  void launchBuckets(int part);
  void reducePart(PartState& p);
  // Waits for p's requests; adds its own piece into the shard's gradients
  // and frees its buffer. Records the first failure in *error and *first.
  void retire(Pending& p, std::string* error, gyreResult_t* first);
  void drain(std::string* error, gyreResult_t* first);
  void allocTransient(std::vector<float>& buffer, size_t n);
  void freeTransient(std::vector<float>& buffer);
  void allGatherParams(const char* what);
  std::span<float> shardGrads();
  // [begin, end) cut where the expert ranges start and end: {piece, expert?}.
  std::vector<std::pair<FlatRange, bool>> expertPieces(size_t begin, size_t end) const;
  void requireStage0(const char* what) const;

  gyreComm_t comm_;
  std::vector<ParamInfo> layout_;
  std::vector<PartState> parts_;
  int stage_ = 0;
  int rank_ = 0, ranks_ = 1;
  size_t n_ = 0, stride_ = 0;
  FlatRange shard_;
  std::vector<GradBucket> buckets_;
  size_t nextBucket_ = 0;
  // Stages 0-2: the whole array, padded to ranks * stride; stage 3: the
  // shard, padded to stride.
  std::vector<float> params_;
  // Stages 0 and 1: the whole array; 2 and 3: the shard.
  std::vector<float> grads_;
  AdamW adam_;
  std::vector<Pending> pending_;
  Phase phase_ = Phase::Idle;
  int microBatches_ = 1, passes_ = 0;
  size_t transient_ = 0, peakTransient_ = 0;
  double gatherSeconds_ = 0;
  GlobalSumSq globalSumSq_;
  std::vector<FlatRange> normRanges_;
  // Expert parallelism: the experts' ranges, the ranks sharing them, and
  // this rank's shard of the norm's count among them.
  gyreComm_t expertComm_ = nullptr;
  std::vector<FlatRange> expertRanges_;
  int expertRanks_ = 1;
  FlatRange expertShard_;
};

}  // namespace gyre::harness
