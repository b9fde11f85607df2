#include "harness/pipeline.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>

namespace gyre::harness {

namespace {

using Kind = PipeAction::Kind;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void checkSchedule(Schedule schedule, const char* who) {
  if (schedule != Schedule::GPipe && schedule != Schedule::OneFOneB)
    throw std::invalid_argument(std::string(who) + ": an unknown schedule (" +
                                std::to_string(static_cast<int>(schedule)) + ")");
}

void checkShape(int stage, int stages, int microBatches, const char* who) {
  if (stages < 1 || stage < 0 || stage >= stages)
    throw std::invalid_argument(std::string(who) + ": stage " + std::to_string(stage) + " of " +
                                std::to_string(stages));
  if (microBatches < 1)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(microBatches) +
                                " micro-batches; a step needs at least 1");
}

std::string describe(const PipeAction& a, int stage) {
  const std::string micro = "micro-batch " + std::to_string(a.micro);
  switch (a.kind) {
    case Kind::RecvActivation:
      return "gyreRecv of " + micro + "'s activations from stage " + std::to_string(stage - 1);
    case Kind::SendActivation:
      return "gyreSend of " + micro + "'s activations to stage " + std::to_string(stage + 1);
    case Kind::RecvGrad:
      return "gyreRecv of " + micro + "'s gradient from stage " + std::to_string(stage + 1);
    case Kind::SendGrad:
      return "gyreSend of " + micro + "'s gradient to stage " + std::to_string(stage - 1);
    default:
      return "a computation";
  }
}

}  // namespace

const char* scheduleName(Schedule schedule) {
  return schedule == Schedule::GPipe ? "gpipe" : "1f1b";
}

Schedule parseSchedule(std::string_view name) {
  if (name == "gpipe") return Schedule::GPipe;
  if (name == "1f1b") return Schedule::OneFOneB;
  throw std::invalid_argument("unknown pipeline schedule '" + std::string(name) +
                              "' (gpipe or 1f1b)");
}

bool isTransfer(Kind kind) { return kind != Kind::Forward && kind != Kind::Backward; }

std::vector<PipeAction> pipelineSchedule(Schedule schedule, int stage, int stages,
                                         int microBatches) {
  checkSchedule(schedule, "pipelineSchedule");
  checkShape(stage, stages, microBatches, "pipelineSchedule");
  const bool first = stage == 0, last = stage == stages - 1;
  std::vector<PipeAction> actions;
  auto forward = [&](int i) {
    if (!first) actions.push_back({Kind::RecvActivation, i});
    actions.push_back({Kind::Forward, i});
    if (!last) actions.push_back({Kind::SendActivation, i});
  };
  auto backward = [&](int i) {
    if (!last) actions.push_back({Kind::RecvGrad, i});
    actions.push_back({Kind::Backward, i});
    if (!first) actions.push_back({Kind::SendGrad, i});
  };
  const int M = microBatches;
  if (schedule == Schedule::GPipe) {
    for (int i = 0; i < M; ++i) forward(i);
    for (int i = 0; i < M; ++i) backward(i);
    return actions;
  }
  // 1F1B: stage s runs ahead by the stages after it, so that the first
  // micro-batch's gradient comes back just as its warm-up ends; from then
  // on each forward is followed by the oldest micro-batch's backward.
  const int warmup = std::min(stages - stage - 1, M);
  for (int i = 0; i < warmup; ++i) forward(i);
  for (int i = 0; i < M - warmup; ++i) {
    forward(warmup + i);
    backward(i);
  }
  for (int i = M - warmup; i < M; ++i) backward(i);
  return actions;
}

int maxLiveActivations(Schedule schedule, int stage, int stages, int microBatches) {
  checkSchedule(schedule, "maxLiveActivations");
  checkShape(stage, stages, microBatches, "maxLiveActivations");
  return schedule == Schedule::GPipe ? microBatches : std::min(stages - stage, microBatches);
}

double theoreticalBubble(int stages, int microBatches) {
  checkShape(0, stages, microBatches, "theoreticalBubble");
  return static_cast<double>(stages - 1) / (microBatches + stages - 1);
}

double StepStats::bubble() const {
  double busy = 0, span = 0;
  for (const StageTiming& s : stages) {
    busy += s.compute;
    span = std::max(span, s.span);
  }
  return span > 0 ? 1.0 - busy / (static_cast<double>(stages.size()) * span) : 0.0;
}

double StepStats::idle(int stage) const {
  const StageTiming& s = stages.at(stage);
  return s.span > 0 ? 1.0 - s.compute / s.span : 0.0;
}

Pipeline::Pipeline(gyreComm_t comm, Gpt& model, bool sumTiedEmbedding)
    : comm_(comm), model_(model) {
  checkGyre(gyreCommUserRank(comm, &stage_), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &stages_), "gyreCommCount", comm);
  // Every stage sees every stage's piece, so all of them find the same
  // fault and throw together instead of some waiting on the others.
  const ModelShard& s = model.shard();
  const GptConfig& c = model.config();
  constexpr int kFields = 9;
  const int32_t mine[kFields] = {
      s.firstLayer, shardLastLayer(c, s), s.embeddings, s.head, c.layers, c.dim, c.vocab, c.maxSeq,
      s.tpSize};
  std::vector<int32_t> all(static_cast<size_t>(kFields) * stages_);
  checkGyre(gyreAllGather(mine, all.data(), kFields, gyreInt32, comm, nullptr),
            "gyreAllGather of the stages' pieces", comm);
  const std::string of = " of " + std::to_string(stages_);
  const std::string fix =
      " (make stage s's model with pipelineStage(config, s, " + std::to_string(stages_) + "))";
  for (int r = 0; r < stages_; ++r) {
    const int32_t* p = &all[static_cast<size_t>(r) * kFields];
    const std::string stage = "Pipeline: stage " + std::to_string(r) + of;
    if (!std::equal(p + 4, p + kFields, &all[4]))
      throw std::invalid_argument(stage +
                                  " holds a piece of another model (layers, dim, vocab, maxSeq or "
                                  "tensor-parallel size differ from stage 0's)");
    if (p[2] != (r == 0))
      throw std::invalid_argument(stage +
                                  (r == 0 ? " does not hold the embeddings"
                                          : " holds the embeddings, which only stage 0 may") +
                                  fix);
    if (p[3] != (r == stages_ - 1))
      throw std::invalid_argument(stage +
                                  (r == stages_ - 1 ? " does not hold the output head"
                                                    : " holds the output head, which only the last "
                                                      "stage may") +
                                  fix);
    const int expectFirst = r == 0 ? 0 : all[static_cast<size_t>(r - 1) * kFields + 1];
    if (p[0] != expectFirst)
      throw std::invalid_argument(
          stage + " starts at block " + std::to_string(p[0]) + ", not at block " +
          std::to_string(expectFirst) +
          (r == 0 ? "" : " where stage " + std::to_string(r - 1) + " ends") + fix);
    if (r == stages_ - 1 && p[1] != p[4])
      throw std::invalid_argument(stage + " ends at block " + std::to_string(p[1]) +
                                  "; the model has " + std::to_string(p[4]) + fix);
  }
  if (stages_ > 1 && sumTiedEmbedding) {
    // The tied embedding: the first stage's wte and the last stage's copy.
    const bool ends = stage_ == 0 || stage_ == stages_ - 1;
    checkGyre(gyreCommSplit(comm, ends ? 0 : GYRE_SPLIT_NOCOLOR, stage_, &tied_, nullptr),
              "gyreCommSplit for the tied embedding", comm);
  }
}

Pipeline::~Pipeline() {
  if (tied_) gyreCommDestroy(tied_);
}

void Pipeline::agree(std::span<const int> inputs, std::span<const int> targets,
                     const MicroBatching& batch, Schedule schedule) {
  const int M = batch.microBatches, b = batch.microBatchSize, T = batch.seq;
  const int maxSeq = model_.config().maxSeq;
  std::string problem;
  const std::string me = "Pipeline::step (stage " + std::to_string(stage_) + "): ";
  const int64_t tokens = int64_t{M} * b * T;
  auto checkSpan = [&](std::span<const int> s, bool needed, const char* what) {
    if (!problem.empty() || (!needed && s.empty()) || static_cast<int64_t>(s.size()) == tokens)
      return;
    problem = me + std::to_string(s.size()) + " " + what + " for " + std::to_string(M) +
              " micro-batches of " + std::to_string(b) + " sequences of " + std::to_string(T) +
              " tokens; need " + std::to_string(tokens) + (needed ? "" : " or none");
  };
  if (M < 1) {
    problem = me + std::to_string(M) + " micro-batches; a step needs at least 1";
  } else if (b < 1) {
    problem = me + std::to_string(b) + " sequences per micro-batch; need at least 1";
  } else if (T < 1 || T > maxSeq) {
    problem = me + "sequences of " + std::to_string(T) + " tokens; the model takes 1 to " +
              std::to_string(maxSeq);
  } else if (schedule != Schedule::GPipe && schedule != Schedule::OneFOneB) {
    problem = me + "an unknown schedule (" + std::to_string(static_cast<int>(schedule)) + ")";
  }
  checkSpan(inputs, stage_ == 0, "input tokens");
  checkSpan(targets, stage_ == stages_ - 1, "targets");

  // Every stage learns whether every other is ready to go, and with what,
  // before anything is sent: a bad argument on one stage is an exception on
  // all of them, not a hang until the timeout.
  constexpr int kFields = 5;
  const int32_t mine[kFields] = {problem.empty(), M, b, T, static_cast<int32_t>(schedule)};
  std::vector<int32_t> all(static_cast<size_t>(kFields) * stages_);
  checkGyre(gyreAllGather(mine, all.data(), kFields, gyreInt32, comm_, nullptr),
            "gyreAllGather of the step's batching", comm_);
  if (!problem.empty()) throw std::invalid_argument(problem);
  for (int r = 0; r < stages_; ++r) {
    const int32_t* p = &all[static_cast<size_t>(r) * kFields];
    if (!p[0])
      throw std::invalid_argument(me + "stage " + std::to_string(r) +
                                  " was given bad arguments (its exception says which)");
    if (!std::equal(p + 1, p + kFields, mine + 1)) {
      auto show = [](const int32_t* q) {
        return std::to_string(q[1]) + " micro-batches of " + std::to_string(q[2]) +
               " sequences of " + std::to_string(q[3]) + " tokens, schedule " +
               scheduleName(static_cast<Schedule>(q[4]));
      };
      throw std::invalid_argument(me + "the stages disagree: stage " + std::to_string(r) + " has " +
                                  show(p) + ", this stage " + show(mine));
    }
  }
}

Activations& Pipeline::liveActivations(int micro) {
  const int slot = live_.at(micro);
  if (slot < 0)
    throw std::logic_error("Pipeline: micro-batch " + std::to_string(micro) +
                           " has no activations (the schedule is out of order)");
  return slots_[slot];
}

void Pipeline::transfer(std::span<const PipeAction> actions) {
  auto post = [&](const PipeAction& a) {
    gyreResult_t r = gyreSuccess;
    switch (a.kind) {
      case Kind::RecvActivation:
        r = gyreRecv(activationIn_.data(), width_, gyreFloat32, stage_ - 1, comm_, nullptr);
        break;
      case Kind::SendActivation:
        r = gyreSend(model_.output(liveActivations(a.micro)), width_, gyreFloat32, stage_ + 1,
                     comm_, nullptr);
        break;
      case Kind::RecvGrad:
        r = gyreRecv(gradIn_.data(), width_, gyreFloat32, stage_ + 1, comm_, nullptr);
        break;
      case Kind::SendGrad:
        r = gyreSend(gradOut_.data(), width_, gyreFloat32, stage_ - 1, comm_, nullptr);
        break;
      default:
        throw std::logic_error("Pipeline: a computation among the transfers");
    }
    checkGyre(r, describe(a, stage_).c_str(), comm_);
  };
  if (actions.size() == 1) {
    post(actions[0]);
    return;
  }
  // Sending to one neighbour while receiving from the other (or both ways
  // with one): in a group, gyre progresses them together, so neither
  // stage's send waits behind its own receive.
  checkGyre(gyreGroupStart(), "gyreGroupStart", comm_);
  std::exception_ptr failed;
  for (const PipeAction& a : actions) {
    try {
      post(a);
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  const gyreResult_t end = gyreGroupEnd();  // closes the group even after a failure
  if (failed) std::rethrow_exception(failed);
  checkGyre(end, "gyreGroupEnd of the pipeline's transfers", comm_);
}

void Pipeline::sumTiedEmbedding() {
  if (!tied_) return;
  std::span<float> g = model_.grad("wte");  // the original on stage 0, the copy on the last
  checkGyre(gyreAllReduce(g.data(), g.data(), g.size(), gyreFloat32, gyreSum, tied_, nullptr),
            "gyreAllReduce of the tied embedding's gradient", tied_);
}

float Pipeline::step(std::span<const int> inputs, std::span<const int> targets,
                     const MicroBatching& batch, Schedule schedule) {
  agree(inputs, targets, batch, schedule);
  const int M = batch.microBatches, b = batch.microBatchSize, T = batch.seq;
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  const size_t tokens = static_cast<size_t>(b) * T;
  width_ = tokens * model_.config().dim;
  if (!first) {
    activationIn_.resize(width_);
    gradOut_.resize(width_);
  }
  if (!last) gradIn_.resize(width_);
  live_.assign(M, -1);
  freeSlots_.clear();
  for (int i = static_cast<int>(slots_.size()) - 1; i >= 0; --i) freeSlots_.push_back(i);
  int live = 0;
  peakLive_ = 0;

  const std::vector<PipeAction> actions = pipelineSchedule(schedule, stage_, stages_, M);
  StageTiming mine;
  double lossSum = 0;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < actions.size();) {
    const PipeAction& a = actions[i];
    const Clock::time_point t0 = Clock::now();
    if (isTransfer(a.kind)) {
      size_t n = 1;  // consecutive transfers go together
      while (i + n < actions.size() && isTransfer(actions[i + n].kind)) ++n;
      transfer(std::span(actions).subspan(i, n));
      mine.transfer += secondsSince(t0);
      i += n;
      continue;
    }
    if (a.kind == Kind::Forward) {
      if (freeSlots_.empty()) {
        freeSlots_.push_back(static_cast<int>(slots_.size()));
        slots_.emplace_back();
      }
      live_.at(a.micro) = freeSlots_.back();
      freeSlots_.pop_back();
      peakLive_ = std::max(peakLive_, ++live);
      const size_t at = static_cast<size_t>(a.micro) * tokens;
      const float loss = model_.forward(
          slots_[live_[a.micro]], first ? inputs.data() + at : nullptr,
          last ? targets.data() + at : nullptr, first ? nullptr : activationIn_.data(), b, T);
      lossSum += loss;
    } else {
      model_.backward(liveActivations(a.micro), last ? nullptr : gradIn_.data(),
                      first ? nullptr : gradOut_.data(), 1.0f / static_cast<float>(M));
      freeSlots_.push_back(live_[a.micro]);
      live_[a.micro] = -1;
      --live;
    }
    mine.compute += secondsSince(t0);
    ++i;
  }
  mine.span = secondsSince(start);
  const Clock::time_point tailStart = Clock::now();
  sumTiedEmbedding();
  mine.tail = secondsSince(tailStart);

  // The loss (known on the last stage) and every stage's timing, to all.
  constexpr int kFields = 5;
  const double row[kFields] = {last ? lossSum / M : 0.0, mine.compute, mine.transfer, mine.span,
                               mine.tail};
  std::vector<double> all(static_cast<size_t>(kFields) * stages_);
  checkGyre(gyreAllGather(row, all.data(), kFields, gyreFloat64, comm_, nullptr),
            "gyreAllGather of the loss and timings", comm_);
  stats_.microBatches = M;
  stats_.stages.resize(stages_);
  for (int r = 0; r < stages_; ++r) {
    const double* p = &all[static_cast<size_t>(r) * kFields];
    stats_.stages[r] = {.compute = p[1], .transfer = p[2], .span = p[3], .tail = p[4]};
  }
  stats_.loss = static_cast<float>(all[static_cast<size_t>(stages_ - 1) * kFields]);
  return stats_.loss;
}

}  // namespace gyre::harness
