// Pipeline parallelism: each rank of a pipeline communicator holds one stage
// of the model (a run of consecutive blocks: pipelineStage in layout.h), and
// a step's batch goes through the stages in micro-batches, each stage
// sending its output activations to the next and the gradient of its input
// back to the previous one (docs/harness.md, "Pipeline parallel").
//
// What each stage does in a step is a pure function, pipelineSchedule(): a
// list of actions (receive, forward, send, ... per micro-batch) that
// Pipeline::step() executes in order. The order is the whole difference
// between GPipe (every forward, then every backward) and 1F1B (a few
// forwards, then one forward and one backward in turn), so it is written
// once, as data, and tested on its own. Consecutive transfers in a list run
// as one gyre group, so that a stage that sends to one neighbour and
// receives from the other (or both from the same one) in the same slot
// cannot deadlock however large the messages are. Uses gyre's public C ABI
// only.
#pragma once

#include <cstddef>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data_parallel.h"
#include "harness/model.h"

namespace gyre::harness {

enum class Schedule {
  GPipe,     // all M forwards, then all M backwards: M activations alive
  OneFOneB,  // 1F1B (PipeDream-flush): at most stages - stage alive
};

// "gpipe" or "1f1b", and back; parseSchedule throws std::invalid_argument
// for anything else.
const char* scheduleName(Schedule schedule);
Schedule parseSchedule(std::string_view name);

// One thing a stage does in a step, to micro-batch `micro`. The transfers
// go to (Send) or come from (Recv) the neighbouring stage: activations
// forward (stage s to s + 1), gradients backward (s + 1 to s).
struct PipeAction {
  enum class Kind { RecvActivation, Forward, SendActivation, RecvGrad, Backward, SendGrad };
  Kind kind;
  int micro;
  bool operator==(const PipeAction&) const = default;
};
bool isTransfer(PipeAction::Kind kind);

// What stage `stage` of `stages` does in one step of `microBatches`
// micro-batches, in order. Forwards and backwards each take the
// micro-batches in order 0 to M - 1 under both schedules, so both add the
// micro-batches' gradients in the same order (the same bits). The first
// stage receives nothing and the last sends nothing. Throws
// std::invalid_argument for stages < 1, a stage out of range or
// microBatches < 1.
std::vector<PipeAction> pipelineSchedule(Schedule schedule, int stage, int stages,
                                         int microBatches);

// The most micro-batches whose activations a stage keeps at once under the
// schedule: M for GPipe, min(stages - stage, M) for 1F1B.
int maxLiveActivations(Schedule schedule, int stage, int stages, int microBatches);

// The share of a step each stage is idle in an ideal pipeline (every stage
// as fast, transfers free): (p - 1) / (M + p - 1), for both schedules.
double theoreticalBubble(int stages, int microBatches);

// The batch of one step as the pipeline sees it.
struct MicroBatching {
  int microBatches = 1;    // M
  int microBatchSize = 1;  // b: sequences per micro-batch
  int seq = 1;             // T: tokens per sequence
};

// Where one stage's time went in one step, in seconds.
struct StageTiming {
  double compute = 0;   // in Gpt::forward and Gpt::backward
  double transfer = 0;  // in the schedule's sends and receives, waiting for the neighbours included
  double span = 0;      // the schedule from its first action to its last
  double tail = 0;      // after it: the tied embedding's gradient sum
};

// One step: its loss and every stage's timing (the same on every stage).
struct StepStats {
  float loss = 0;
  std::vector<StageTiming> stages;  // by stage
  int microBatches = 0;
  // The measured bubble: the share of the stages' time, over the longest
  // span, that no stage computed in, 1 - sum(compute) / (p * max(span)).
  double bubble() const;
  // The idle share of one stage: 1 - compute / its span.
  double idle(int stage) const;
};

class Pipeline {
 public:
  // comm: the pipeline's ranks, rank = stage; model: this rank's stage
  // (pipelineStage(config, rank, count of comm)), with its own arrays.
  // Collective over comm: the stages check that their pieces make up the
  // model in order (the first embeds, the last holds the head, the blocks
  // follow on), and the first and last make a communicator of their two
  // for the tied embedding. Throws std::invalid_argument, on every stage,
  // when they do not fit. Does not take ownership of comm; the model must
  // outlive this. sumTiedEmbedding = false leaves the tied embedding's sum
  // to the caller (a model whose gradients live in ZeRO's storage, summed
  // once the data-parallel reduction is done: Trainer); then the model
  // need not own its arrays.
  Pipeline(gyreComm_t comm, Gpt& model, bool sumTiedEmbedding = true);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One step's forward and backward over M micro-batches, into the model's
  // gradients, which the caller zeroes before (Gpt::zeroGrad; gradients
  // left from an earlier step would reach wte's sum from both ends and
  // count twice: accumulate with more micro-batches instead). Each
  // micro-batch's loss is scaled by 1/M, so the gradients are those of the
  // mean loss over the whole batch. inputs and targets are [M * b, T],
  // micro-batch i being sequences i*b to (i+1)*b - 1. The first stage needs
  // the inputs and the last the targets; other stages may pass empty spans.
  // Afterwards the first and last stage hold the same summed gradient of
  // wte (so their copies take the same optimizer step). Returns the mean
  // loss over the M micro-batches, on every stage.
  //
  // Collective over the pipeline: every stage must pass the same batching
  // and schedule. Bad arguments (M < 1, sizes that do not match, stages
  // that disagree) throw std::invalid_argument on every stage, before any
  // activation is sent; a failed gyre call throws GyreError.
  float step(std::span<const int> inputs, std::span<const int> targets, const MicroBatching& batch,
             Schedule schedule);

  // The last step's loss and timings.
  const StepStats& lastStep() const { return stats_; }
  // The most Activations alive at once during the last step.
  int peakLiveActivations() const { return peakLive_; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }

 private:
  // Runs consecutive transfers as one group (a single one without a group).
  void transfer(std::span<const PipeAction> actions);
  // Checks this stage's arguments and that every stage got the same.
  void agree(std::span<const int> inputs, std::span<const int> targets, const MicroBatching& batch,
             Schedule schedule);
  Activations& liveActivations(int micro);
  void sumTiedEmbedding();

  gyreComm_t comm_;
  gyreComm_t tied_ = nullptr;  // first and last stage, when there are two or more
  Gpt& model_;
  int stage_ = 0, stages_ = 1;
  size_t width_ = 0;  // b * T * C: one micro-batch's activations
  // Activations by slot, kept from step to step (a deque: a new slot leaves
  // the others where they are); live_[i] is micro-batch i's slot, or -1.
  std::deque<Activations> slots_;
  std::vector<int> freeSlots_, live_;
  int peakLive_ = 0;
  std::vector<float> activationIn_, gradIn_, gradOut_;
  StepStats stats_;
};

}  // namespace gyre::harness
