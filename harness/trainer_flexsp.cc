// FlexSP's step in the Trainer (docs/harness.md, "FlexSP"): rank 0 plans the
// batch's groups, every rank takes that plan, and each group runs its
// sequences one after another, Ulysses over its ranks. The gradients are
// then averaged over the whole world as in data parallelism, each rank's
// loss scaled so that the average is the mean over every token of the batch.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <stdexcept>

#include "flexsp/group_comms.h"
#include "flexsp/plan.h"
#include "flexsp/planner.h"
#include "flexsp/time_model.h"
#include "harness/trainer.h"

namespace gyre::harness {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// L tokens over g ranks in consecutive runs, the first L mod g one longer.
std::vector<int> splitRuns(int64_t L, int g) {
  std::vector<int> runs(g, static_cast<int>(L / g));
  for (int r = 0; r < L % g; ++r) ++runs[r];
  return runs;
}

int worldRank(gyreComm_t world) {
  int rank = 0;
  checkGyre(gyreCommUserRank(world, &rank), "gyreCommUserRank", world);
  return rank;
}

// "greedy: 2x1 1x2": the method, then the groups that ran sequences, by size.
std::string describePlan(const flexsp::Plan& plan) {
  std::map<int, int, std::greater<>> bySize;
  for (const flexsp::Group& g : plan.groups)
    if (!g.sequences.empty()) ++bySize[g.size];
  std::string out = plan.method + ":";
  for (const auto& [size, count] : bySize)
    out += " " + std::to_string(count) + "x" + std::to_string(size);
  return out;
}

}  // namespace

int flexspLargestGroup(const TrainerConfig& c) {
  // Ulysses deals a group's ranks the heads: at most the largest power of
  // two dividing them, and the world.
  int g = 1;
  while (g * 2 <= c.mesh.dp && c.model.heads % (g * 2) == 0) g *= 2;
  return g;
}

VarlenConfig Trainer::varlenConfig(const TrainerConfig& c) {
  VarlenConfig v;
  v.lengths = c.flexsp.lengths;
  v.lengths.maxLen = c.seq;
  v.tokens = static_cast<int64_t>(c.batch) * c.seq;
  v.seed = c.seed;
  return v;
}

void Trainer::setUpFlexsp(gyreComm_t world) {
  if (config_.flexsp.memoryTokens == 0) {
    const int64_t tokens = static_cast<int64_t>(config_.batch) * config_.seq;
    config_.flexsp.memoryTokens = (tokens + config_.mesh.dp - 1) / config_.mesh.dp;
  }
  // The compute constants were calibrated on a layer of width 512: the
  // attention's products scale with the width, the projections with its square.
  flexsp::UlyssesConfig time;
  const double w = config_.model.dim / static_cast<double>(time.compute.hidden);
  time.compute.attentionSeconds *= w;
  time.compute.linearSeconds *= w * w;
  if (config_.flexsp.attentionSeconds > 0)
    time.compute.attentionSeconds = config_.flexsp.attentionSeconds;
  if (config_.flexsp.linearSeconds > 0) time.compute.linearSeconds = config_.flexsp.linearSeconds;
  time.layers = config_.model.layers;
  flexspTime_ = std::make_unique<flexsp::UlyssesTime>(time, world);
  flexspGroups_ = std::make_unique<flexsp::GroupComms>(world);
  flexspPlan_ = std::make_unique<flexsp::Plan>();
}

const flexsp::Plan& Trainer::lastPlan() const {
  if (!flexspPlan_) throw std::logic_error("Trainer::lastPlan: FlexSP is off");
  return *flexspPlan_;
}

float Trainer::flexspForwardBackward(const VarlenBatch& batch, const flexsp::Plan& plan,
                                     gyreComm_t group) {
  const int rank = mesh_->rank(), world = mesh_->dataSize();
  const flexsp::Group* mine = nullptr;
  for (const flexsp::Group& g : plan.groups)
    if (rank >= g.firstRank && rank < g.firstRank + g.size) mine = &g;
  if (mine == nullptr)
    throw std::logic_error("FlexSP: the plan leaves rank " + std::to_string(rank) + " out");
  if (micro_.empty()) micro_.resize(1);
  // Each pass's loss is the mean over this rank's run; weighted by its
  // tokens x world / the batch's, Zero's average over the world becomes the
  // mean over every token of the batch, for the gradients and the loss.
  const double perToken = static_cast<double>(world) / static_cast<double>(batch.totalTokens());
  zero_->beginStep(std::max<int>(1, static_cast<int>(mine->sequences.size())));
  double loss = 0;
  for (int s : mine->sequences) {
    const std::vector<int> runs = splitRuns(batch.lengths[s], mine->size);
    const int r = rank - mine->firstRank, T = runs[r];
    int64_t from = batch.offsets[s];
    for (int q = 0; q < r; ++q) from += runs[q];
    model_->setSeqParallel(mine->size > 1 ? seqParallelOver(group, runs) : Gpt::SeqParallel{});
    const float scale = static_cast<float>(T * perToken);
    const float l = model_->forward(micro_[0], batch.inputs.data() + from,
                                    batch.targets.data() + from, nullptr, 1, T);
    model_->backward(micro_[0], nullptr, nullptr, scale);
    loss += static_cast<double>(l) * scale;
  }
  if (mine->sequences.empty()) {
    // An idle group still joins the gradients' average (launched in a
    // rank's last pass): one token's pass that weighs nothing.
    model_->setSeqParallel({});
    model_->forward(micro_[0], batch.inputs.data(), batch.targets.data(), nullptr, 1, 1);
    model_->backward(micro_[0], nullptr, nullptr, 0.0f);
  }
  return static_cast<float>(loss);
}

StepReport Trainer::step(int64_t step, const VarlenLoader& loader) {
  if (!config_.flexsp.on) throw std::logic_error("Trainer::step(VarlenLoader): FlexSP is off");
  StepReport report;
  report.step = step;
  report.lr = learningRate(config_.lr, static_cast<int>(step));
  const double start = now();
  tpSeconds_ = 0;
  const VarlenBatch batch = loader.batch(step);
  report.tokens = batch.totalTokens();
  gyreComm_t world = mesh_->world();
  flexsp::Plan& plan = *flexspPlan_;
  plan = {};
  std::string planError;
  if (worldRank(world) == 0) {
    const flexsp::Problem problem{.lengths = batch.lengths,
                                  .worldSize = mesh_->dataSize(),
                                  .memoryTokens = config_.flexsp.memoryTokens,
                                  .maxGroupSize = flexspLargestGroup(config_)};
    flexsp::PlanOptions options;
    options.timeLimitSeconds = config_.flexsp.planSeconds;
    options.useSolver = config_.flexsp.planSeconds > 0;
    // The planner's own log line (docs/sequence-parallel.md, "Solver and
    // fallback"): a fallback or a time limit at WARN, the rest at
    // GYRE_DEBUG=INFO; the progress line names the method too.
    try {
      plan = config_.flexsp.fixedUlysses
                 ? flexsp::ulyssesPlan(problem, flexspTime_->function())
                 : flexsp::planBatch(problem, flexspTime_->function(), options);
    } catch (const flexsp::PlanError& e) {
      plan = {};  // no groups: every rank stops below, not waiting for this one
      planError = e.what();
    }
  }
  flexsp::broadcastPlan(plan, 0, world);
  if (plan.groups.empty())
    throw std::runtime_error("FlexSP could not plan step " + std::to_string(step) +
                             (planError.empty() ? " (rank 0 says why)" : ": " + planError));
  gyreComm_t group = flexspGroups_->forPlan(plan);
  const double computeStart = now();
  float loss = flexspForwardBackward(batch, plan, group);
  report.compute = now() - computeStart - tpSeconds_;
  const double reduceStart = now();
  zero_->finishBackward();
  loss = zero_->averageLoss(loss);
  report.comm = tpSeconds_ + now() - reduceStart;
  const double optimizerStart = now();
  report.gradNorm = zero_->step(report.lr, config_.clip);
  report.optimizer = now() - optimizerStart;
  report.loss = loss;
  report.seconds = now() - start;
  report.predicted = plan.seconds;
  report.plan = describePlan(plan);
  return report;
}

}  // namespace gyre::harness
