#include "harness/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "flexsp/group_comms.h"
#include "flexsp/plan.h"
#include "flexsp/time_model.h"
#include "harness/checkpoint.h"

namespace gyre::harness {

namespace fs = std::filesystem;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What FlexSP cannot run with, each refused by name.
void validateFlexsp(const TrainerConfig& c) {
  auto refuse = [](const std::string& why) { throw std::invalid_argument("FlexSP " + why); };
  if (c.mesh.tp > 1)
    refuse("with tensor parallelism (tp " + std::to_string(c.mesh.tp) +
           "): its groups split sequences over whole replicas of the model; use tp 1");
  if (c.mesh.pp > 1)
    refuse("with a pipeline (pp " + std::to_string(c.mesh.pp) +
           "): its groups run whole models; use pp 1");
  if (c.mesh.sp > 1)
    refuse("with a fixed sequence-parallel size (sp " + std::to_string(c.mesh.sp) +
           "): FlexSP chooses each step's groups itself; leave sp at 1");
  if (c.codec != gyreCodecNone || c.decentralized)
    refuse(
        "with compressed or decentralized averaging: the ranks of a group must hold the same "
        "parameters bit for bit");
  if (c.zero >= 2)
    refuse("with ZeRO stage " + std::to_string(c.zero) +
           ": stages 2 and 3 reduce or gather in every backward, and FlexSP's groups run "
           "different numbers of sequences; use ZeRO 0 or 1");
  if (c.microBatches != 1) refuse("with micro-batches: each group's sequences are its passes");
  if (c.model.experts > 0)
    refuse(
        "with a mixture of experts: the experts' capacity and load-balancing loss are per "
        "rank's tokens, which FlexSP's groups make uneven");
  const int world = c.mesh.dp;
  if (world < 1 || (world & (world - 1)) != 0)
    refuse("on " + std::to_string(world) +
           " ranks: its groups are powers of two covering the world, which must be one too");
  if (c.flexsp.lengths.minLen < flexspLargestGroup(c))
    refuse("with sequences as short as " + std::to_string(c.flexsp.lengths.minLen) +
           " tokens: a group of up to " + std::to_string(flexspLargestGroup(c)) +
           " ranks gives each rank a run of at least one token; raise the shortest length");
  const int64_t budget = static_cast<int64_t>(c.batch) * c.seq;
  if (c.flexsp.memoryTokens > 0 && c.flexsp.memoryTokens * world < budget)
    refuse("with memory for " + std::to_string(c.flexsp.memoryTokens) +
           " tokens a rank: " + std::to_string(world) + " ranks hold fewer than a batch's " +
           std::to_string(budget) + " (batch x seq); raise the memory or lower the batch");
  // The planner's memory (the default as setUpFlexsp takes it): the
  // longest sequence must fit the largest group.
  const int64_t memory =
      c.flexsp.memoryTokens > 0 ? c.flexsp.memoryTokens : (budget + world - 1) / world;
  if (memory * flexspLargestGroup(c) < c.seq)
    refuse("with memory for " + std::to_string(memory) + " tokens a rank: a sequence of " +
           std::to_string(c.seq) + " tokens (seq) needs more than the largest group, " +
           std::to_string(flexspLargestGroup(c)) +
           " ranks, holds; raise the memory or lower seq");
  if (c.flexsp.fixedUlysses && flexspLargestGroup(c) < world)
    refuse("as fixed Ulysses over " + std::to_string(world) + " ranks: the model's " +
           std::to_string(c.model.heads) + " heads do not split over them");
  if (c.seq > c.model.maxSeq)
    refuse("with sequences up to " + std::to_string(c.seq) + " tokens over the model's maxSeq " +
           std::to_string(c.model.maxSeq));
}

void validate(const TrainerConfig& c) {
  if (c.flexsp.on) validateFlexsp(c);
  if (c.zero < 0 || c.zero > 3)
    throw std::invalid_argument("ZeRO stage " + std::to_string(c.zero) + " (0 to 3)");
  if (c.microBatches < 1) throw std::invalid_argument("micro-batches must be at least 1");
  if (c.zero >= 2 && c.mesh.pp > 1) {
    throw std::invalid_argument("ZeRO stage " + std::to_string(c.zero) +
                                " with a pipeline: stages 2 and 3 reduce gradients during "
                                "backward, which a pipeline's micro-batches accumulate");
  }
  const bool averaging = c.codec != gyreCodecNone || c.decentralized;
  if (averaging && (c.zero != 0 || c.mesh.pp != 1 || c.microBatches != 1)) {
    throw std::invalid_argument(
        "compressed or decentralized data parallelism needs ZeRO 0, one pipeline stage and one "
        "micro-batch");
  }
  if (c.mesh.sp > 1) {
    if (c.seq % c.mesh.sp != 0) {
      throw std::invalid_argument("sequences of " + std::to_string(c.seq) +
                                  " tokens do not split into " + std::to_string(c.mesh.sp) +
                                  " sequence-parallel runs");
    }
    // The sequence-parallel ranks must hold the same parameters bit for
    // bit; compressed and decentralized averaging leave replicas apart.
    if (averaging)
      throw std::invalid_argument(
          "sequence parallelism needs exact data parallelism (no --codec, no --decentralized)");
  }
  if (c.mesh.ep > 1) {
    if (c.model.experts == 0 || c.model.experts % c.mesh.ep != 0) {
      throw std::invalid_argument("expert parallelism over " + std::to_string(c.mesh.ep) +
                                  " ranks needs a mixture of experts whose count it divides; the "
                                  "model has " + std::to_string(c.model.experts) + " experts");
    }
    if (c.zero != 0) {
      throw std::invalid_argument(
          "expert parallelism with ZeRO stage " + std::to_string(c.zero) +
          ": ZeRO's shards cut one flat layout over the data-parallel ranks, and expert-parallel "
          "ranks hold different experts in theirs; use ZeRO 0");
    }
    if (averaging)
      throw std::invalid_argument(
          "expert parallelism needs exact data parallelism (no --codec, no --decentralized)");
  }
  // FlexSP's batch is a token budget (batch x seq), dealt by its plan.
  if (!c.flexsp.on && c.batch % (c.mesh.dp * c.microBatches) != 0) {
    throw std::invalid_argument("a batch of " + std::to_string(c.batch) +
                                " sequences does not split into " + std::to_string(c.mesh.dp) +
                                " data-parallel ranks x " + std::to_string(c.microBatches) +
                                " micro-batches");
  }
}

double allReduceSum(double x, gyreComm_t comm, const char* what) {
  checkGyre(gyreAllReduce(&x, &x, 1, gyreFloat64, gyreSum, comm, nullptr), what, comm);
  return x;
}

// The model's shape as the checkpoint's metadata names it.
std::map<std::string, std::string> modelMeta(const GptConfig& m) {
  std::map<std::string, std::string> meta = {{"vocab", std::to_string(m.vocab)},
                                              {"max_seq", std::to_string(m.maxSeq)},
                                              {"layers", std::to_string(m.layers)},
                                              {"dim", std::to_string(m.dim)},
                                              {"heads", std::to_string(m.heads)}};
  // A dense model's index has no "experts", as before mixtures existed.
  if (m.experts > 0) meta["experts"] = std::to_string(m.experts);
  return meta;
}

// The keys of want whose value in have differs ("(none)" where have lacks
// it), in key order: {key, have's, want's}.
struct Difference {
  std::string key, had, wanted;
};
std::vector<Difference> differences(const std::map<std::string, std::string>& have,
                                    const std::map<std::string, std::string>& want) {
  std::vector<Difference> out;
  for (const auto& [key, value] : want) {
    auto it = have.find(key);
    const std::string had = it == have.end() ? "(none)" : it->second;
    if (had != value) out.push_back({key, had, value});
  }
  return out;
}

}  // namespace

Trainer::Trainer(gyreComm_t world, const TrainerConfig& config) : config_(config) {
  validate(config);
  mesh_ = std::make_unique<Mesh>(world, config.mesh);
  ModelShard shard =
      pipelineStage(config.model, mesh_->ppRank(), config.mesh.pp, mesh_->tpRank(), config.mesh.tp);
  shard.epRank = mesh_->epRank();
  shard.epSize = config.mesh.ep;
  if (config.codec != gyreCodecNone || config.decentralized) {
    model_ = std::make_unique<Gpt>(config.model, shard);
    model_->initialize(config.seed);
    dp_ = std::make_unique<DataParallel>(mesh_->data(), *model_,
                                         DpOptions{.bucketElems = config.bucketElems,
                                                   .codec = config.codec,
                                                   .decentralized = config.decentralized,
                                                   .peers = config.peers});
    adam_ = std::make_unique<AdamW>(decaySegments(model_->layout()), model_->size(), config.adam);
  } else {
    // The data and sequence-parallel ranks hold the same piece and train
    // their own tokens: one group for the gradients and ZeRO's shards.
    zero_ = std::make_unique<Zero>(mesh_->data(), gptLayout(config.model, shard), config.zero,
                                   config.adam, config.bucketElems);
    model_ = std::make_unique<Gpt>(config.model, shard, zero_.get());
    std::vector<float> initial(model_->size());
    model_->initialize(config.seed, initial);
    zero_->setParams(initial);
    zero_->setNormRanges(normRanges());
    if (config.mesh.ep > 1) {
      // The experts' gradients come from the tokens of the whole expert
      // group; the other ranks holding the same experts add theirs.
      std::vector<FlatRange> ranges;
      for (const ParamInfo& p : model_->layout())
        if (p.split == TpSplit::ExpertRows) ranges.push_back({p.offset, p.offset + p.size});
      zero_->setExpertGroup(mesh_->expertData(), std::move(ranges));
      experts_ = std::make_unique<GyreExpertExchange>(mesh_->ep(), config.model.experts,
                                                      config.model.topK, &tpSeconds_);
      model_->setExpertExchange(experts_.get());
    }
    // Every rank counts its own elements once (normRanges and its shard):
    // the whole mesh's sum is the global norm's square.
    zero_->setGlobalSumSq([this](double local) {
      return allReduceSum(local, mesh_->world(), "gyreAllReduce of the gradient norm");
    });
  }
  if (config.mesh.tp > 1) {
    model_->setTpReduce([this](float* data, size_t count) {
      const double start = now();
      checkGyre(gyreAllReduce(data, data, count, gyreFloat32, gyreSum, mesh_->tp(), nullptr),
                "gyreAllReduce over the tensor-parallel ranks", mesh_->tp());
      tpSeconds_ += now() - start;
    });
  }
  if (config.mesh.sp > 1) setUpSequenceParallel();
  if (config.flexsp.on) setUpFlexsp(world);
  // The pipeline leaves the tied embedding to this class: its gradients live
  // in ZeRO's arrays, summed after the data-parallel reduction.
  if (config.mesh.pp > 1)
    pipeline_ = std::make_unique<Pipeline>(mesh_->pp(), *model_, /*sumTiedEmbedding=*/false);
}

Trainer::~Trainer() = default;

void Trainer::setUpSequenceParallel() { model_->setSeqParallel(seqParallelOver(mesh_->sp())); }

Gpt::SeqParallel Trainer::seqParallelOver(gyreComm_t comm, std::vector<int> runs) {
  int size = 0, rank = 0;
  checkGyre(gyreCommCount(comm, &size), "gyreCommCount", comm);
  checkGyre(gyreCommUserRank(comm, &rank), "gyreCommUserRank", comm);
  const int heads = config_.model.heads / config_.mesh.tp;
  const size_t headDim = static_cast<size_t>(config_.model.dim / config_.model.heads);
  int share = 0;
  const gyreSeqLayout_t probe{heads, 0, headDim, gyreSeqQ, 0, nullptr};
  checkGyre(gyreSeqHeads(&probe, size, rank, nullptr, &share, nullptr, nullptr), "gyreSeqHeads",
            comm);
  // One exchange per sequence of the micro-batch, all launched, then waited.
  auto exchange = [this, comm, rank, heads, headDim, share](bool toHeads) {
    return [=, this](const float* in, float* out, int B, std::span<const size_t> tokens, bool qkv) {
      const double start = now();
      const size_t parts = qkv ? 3 : 1;
      size_t seqLen = 0;
      for (size_t n : tokens) seqLen += n;
      const gyreSeqLayout_t layout{heads,        0, headDim, qkv ? gyreSeqQKV : gyreSeqQ, seqLen,
                                   tokens.data()};
      const size_t seqSide = tokens[rank] * parts * heads * headDim;
      const size_t headSide = seqLen * parts * share * headDim;
      const size_t inStride = toHeads ? seqSide : headSide, outStride = toHeads ? headSide : seqSide;
      std::vector<gyreRequest_t> requests;
      gyreResult_t failed = gyreSuccess;
      for (int b = 0; b < B && failed == gyreSuccess; ++b) {
        gyreRequest_t r = nullptr;
        failed = (toHeads ? gyreIseqToHeads : gyreIheadsToSeq)(
            in + b * inStride, out + b * outStride, &layout, gyreFloat32, comm, &r);
        if (failed == gyreSuccess) requests.push_back(r);
      }
      const char* what = toHeads ? "gyreIseqToHeads" : "gyreIheadsToSeq";
      // Every launched exchange is waited for before any error leaves: none
      // may still write into `out`.
      gyreResult_t waited = gyreSuccess;
      for (gyreRequest_t r : requests) {
        const gyreResult_t w = gyreWait(r);
        if (waited == gyreSuccess) waited = w;
      }
      checkGyre(failed, what, comm);
      checkGyre(waited, what, comm);
      tpSeconds_ += now() - start;
    };
  };
  return {.rank = rank,
          .size = size,
          .runs = std::move(runs),
          .toHeads = exchange(true),
          .toSeq = exchange(false),
          .shareHeads = share};
}

std::vector<FlatRange> Trainer::normRanges() const {
  std::vector<FlatRange> ranges;
  for (const ParamInfo& p : model_->layout()) {
    if (p.tiedCopy || (p.split == TpSplit::None && mesh_->tpRank() != 0)) continue;
    if (!ranges.empty() && ranges.back().end == p.offset) {
      ranges.back().end += p.size;
    } else {
      ranges.push_back({p.offset, p.offset + p.size});
    }
  }
  return ranges;
}

float Trainer::forwardBackward(int64_t step, DataLoader& loader, StepReport& report) {
  const int local = loader.localBatch(), M = config_.microBatches, sp = config_.mesh.sp;
  const int b = local / M, T = config_.seq / sp;  // T: this rank's run of each sequence
  inputs_.resize(static_cast<size_t>(local) * config_.seq);
  targets_.resize(inputs_.size());
  loader.batch(step, inputs_, targets_);
  if (sp > 1) {
    // This sequence-parallel rank's run of every sequence: tokens
    // [spRank x T, (spRank + 1) x T), packed row after row.
    const size_t from = static_cast<size_t>(mesh_->spRank()) * T;
    for (int row = 0; row < local; ++row) {
      const size_t src = static_cast<size_t>(row) * config_.seq + from;
      std::copy_n(inputs_.begin() + src, T, inputs_.begin() + static_cast<size_t>(row) * T);
      std::copy_n(targets_.begin() + src, T, targets_.begin() + static_cast<size_t>(row) * T);
    }
    inputs_.resize(static_cast<size_t>(local) * T);
    targets_.resize(inputs_.size());
  }
  const double start = now();
  float loss = 0;
  if (pipeline_) {
    loss = pipeline_->step(inputs_, targets_, {.microBatches = M, .microBatchSize = b, .seq = T},
                           config_.schedule);
    const StepStats& stats = pipeline_->lastStep();
    const StageTiming& mine = stats.stages[mesh_->ppRank()];
    const double gathers = zero_ ? zero_->gatherSeconds() : 0.0;
    report.compute = mine.compute - tpSeconds_ - gathers;
    report.comm = mine.transfer + tpSeconds_ + gathers;
    report.bubble = stats.bubble();
    return loss;
  }
  if (dp_) {
    model_->zeroGrad();
    loss = model_->forward(inputs_.data(), targets_.data(), local, T);
    dp_->backward();
  } else {
    if (micro_.empty()) micro_.resize(1);
    for (int i = 0; i < M; ++i) {
      const size_t at = static_cast<size_t>(i) * b * T;
      loss +=
          model_->forward(micro_[0], inputs_.data() + at, targets_.data() + at, nullptr, b, T) / M;
      model_->backward(micro_[0], nullptr, nullptr, 1.0f / M);
    }
  }
  // Waiting for reductions after backward, or for ZeRO 3's gathers inside it.
  const double waited = dp_ ? dp_->lastWaitSeconds() : zero_->gatherSeconds();
  report.compute = now() - start - tpSeconds_ - waited;
  report.comm = tpSeconds_ + waited;
  return loss;
}

void Trainer::sumTiedEmbedding(std::span<float> grads) {
  gyreComm_t pair = mesh_->tiedEmbedding();
  if (pair == nullptr) return;
  const ParamInfo& wte = mesh_->firstStage() ? model_->layout().front() : model_->layout().back();
  float* g = grads.data() + wte.offset;
  checkGyre(gyreAllReduce(g, g, wte.size, gyreFloat32, gyreSum, pair, nullptr),
            "gyreAllReduce of the tied embedding's gradient", pair);
}

StepReport Trainer::step(int64_t step, DataLoader& loader) {
  StepReport report;
  report.step = step;
  report.tokens = static_cast<int64_t>(config_.batch) * config_.seq;
  report.lr = learningRate(config_.lr, static_cast<int>(step));
  const double start = now();
  tpSeconds_ = 0;
  if (zero_) zero_->beginStep(config_.microBatches);
  float loss = forwardBackward(step, loader, report);
  const double reduceStart = now();
  if (zero_) {
    zero_->finishBackward();
    if (pipeline_) sumTiedEmbedding(zero_->replicaGrads());
    loss = zero_->averageLoss(loss);
  } else {
    loss = dp_->averageLoss(loss);
  }
  report.comm += now() - reduceStart;
  if (config_.model.experts > 0) {
    // Each tp rank holds the same routing (tp is refused with experts), so
    // the world's sum counts each pipeline stage's blocks once per dp x sp rank.
    const Gpt::MoeCounts counts = model_->takeMoeCounts();
    double both[2] = {static_cast<double>(counts.slots), static_cast<double>(counts.dropped)};
    checkGyre(gyreAllReduce(both, both, 2, gyreFloat64, gyreSum, mesh_->world(), nullptr),
              "gyreAllReduce of the experts' dropped slots", mesh_->world());
    report.moeSlots = static_cast<int64_t>(both[0]);
    report.moeDropped = static_cast<int64_t>(both[1]);
  }
  const double optimizerStart = now();
  if (zero_) {
    report.gradNorm = zero_->step(report.lr, config_.clip);
  } else {
    // Every replica clips by its own norm (decentralized replicas differ);
    // the tensor-parallel ranks add their pieces' squares.
    double local = 0;
    const std::span<float> grads = model_->grads();
    for (const FlatRange& r : normRanges()) local += sumOfSquares(grads.subspan(r.begin, r.size()));
    report.gradNorm =
        std::sqrt(allReduceSum(local, mesh_->tp(), "gyreAllReduce of the gradient norm"));
    if (config_.clip > 0) clipToNorm(grads, report.gradNorm, config_.clip);
    adam_->step(model_->params(), grads, report.lr);
    dp_->afterStep(static_cast<uint64_t>(step));
  }
  report.optimizer = now() - optimizerStart;
  report.loss = loss;
  report.seconds = now() - start;
  return report;
}

std::map<std::string, std::string> Trainer::describe() const {
  auto d = modelMeta(config_.model);
  d["dp"] = std::to_string(config_.mesh.dp);
  d["sp"] = std::to_string(config_.mesh.sp);
  d["tp"] = std::to_string(config_.mesh.tp);
  d["pp"] = std::to_string(config_.mesh.pp);
  d["ep"] = std::to_string(config_.mesh.ep);
  d["zero"] = std::to_string(config_.zero);
  d["micro_batches"] = std::to_string(config_.microBatches);
  d["schedule"] = scheduleName(config_.schedule);
  d["batch"] = std::to_string(config_.batch);
  d["seq"] = std::to_string(config_.seq);
  d["seed"] = std::to_string(config_.seed);
  const char* codecs[] = {"none", "fp16", "bf16", "int8", "onebit"};
  d["codec"] = codecs[config_.codec];
  d["decentralized"] = config_.decentralized ? "yes" : "no";
  if (config_.flexsp.on) {
    // Only FlexSP's runs name it, so that other runs' indexes stay as before.
    const LengthDistribution& l = config_.flexsp.lengths;
    d["flexsp"] = "lognormal mu " + std::to_string(l.mu) + " sigma " + std::to_string(l.sigma) +
                  " in [" + std::to_string(l.minLen) + ", " + std::to_string(config_.seq) +
                  "], memory " + std::to_string(config_.flexsp.memoryTokens);
  }
  return d;
}

std::vector<float> Trainer::pieceParams() {
  if (zero_) return zero_->gatherParams();
  return {model_->params().begin(), model_->params().end()};
}

ZeroMemory Trainer::memory() const {
  if (zero_) return zero_->memory();
  const size_t bytes = model_->size() * sizeof(float);
  return {.params = bytes, .grads = bytes, .optimizer = 2 * bytes, .peakTransient = 0};
}

fs::path Trainer::save(const fs::path& dir, int64_t stepsDone) {
  // What this rank writes: its data-parallel shard of its piece's flat
  // arrays (ZeRO's, or the same cut of a whole replica), so that the dp
  // ranks of a piece write it once between them.
  // With expert parallelism each rank's experts are cut among the ranks
  // holding the same experts instead (Zero::expertShard), from the whole
  // arrays that stage 0 holds.
  FlatRange range, expertRange;
  size_t base = 0;  // the flat offset of params[0], m[0] and v[0]
  std::span<const float> params, m, v;
  std::vector<float> averaged;
  int steps = 0;
  if (zero_ && !experts_) {
    range = expertRange = zero_->shard();
    base = range.begin;
    params = zero_->shardParams();
    m = zero_->shardM();
    v = zero_->shardV();
    steps = zero_->adamSteps();
  } else if (zero_) {
    range = zero_->shard();
    expertRange = zero_->expertShard();
    params = zero_->wholeParams();
    m = zero_->wholeM();
    v = zero_->wholeV();
    steps = zero_->adamSteps();
  } else {
    range = expertRange = shardRange(model_->size(), mesh_->dataRank(), mesh_->dataSize());
    base = range.begin;
    std::span<const float> all = model_->params();
    if (config_.decentralized) {
      // The replicas differ: the checkpoint holds their average.
      averaged.assign(all.begin(), all.end());
      checkGyre(gyreAllReduce(averaged.data(), averaged.data(), averaged.size(), gyreFloat32,
                              gyreAvg, mesh_->data(), nullptr),
                "gyreAllReduce of the replicas for the checkpoint", mesh_->data());
      all = averaged;
    }
    params = all.subspan(range.begin, range.size());
    m = adam_->m().subspan(range.begin, range.size());
    v = adam_->v().subspan(range.begin, range.size());
    steps = adam_->steps();
  }
  std::vector<Entry> entries;
  for (const ParamInfo& p : model_->layout()) {
    if (p.tiedCopy || (p.split == TpSplit::None && mesh_->tpRank() != 0)) continue;
    const FlatRange& cut = p.split == TpSplit::ExpertRows ? expertRange : range;
    const size_t lo = std::max(cut.begin, p.offset), hi = std::min(cut.end, p.offset + p.size);
    if (lo >= hi) continue;
    std::vector<Run> runs;
    for (size_t i = lo - p.offset; i < hi - p.offset; ++i) {
      const uint64_t g = globalIndex(p, model_->shard(), i);
      if (!runs.empty() && runs.back().offset + runs.back().count == g) {
        ++runs.back().count;
      } else {
        runs.push_back({g, 1});
      }
    }
    const std::vector<int64_t> shape(p.globalShape.begin(), p.globalShape.end());
    const size_t at = lo - base, n = hi - lo;
    entries.push_back({p.name, "param", shape, runs, params.subspan(at, n)});
    entries.push_back({p.name, "adam.m", shape, runs, m.subspan(at, n)});
    entries.push_back({p.name, "adam.v", shape, runs, v.subspan(at, n)});
  }
  int worldSize = 0;
  checkGyre(gyreCommCount(mesh_->world(), &worldSize), "gyreCommCount", mesh_->world());
  const fs::path stepDir = prepareStepDir(dir, stepsDone);
  writeShard(stepDir, mesh_->rank(), worldSize, entries);
  checkGyre(gyreBarrier(mesh_->world(), nullptr), "gyreBarrier after writing the shards",
            mesh_->world());
  if (mesh_->rank() == 0) {
    auto meta = describe();
    meta["adam_steps"] = std::to_string(steps);
    writeIndex(stepDir, stepsDone, meta, readShardInfos(stepDir, worldSize));
  }
  checkGyre(gyreBarrier(mesh_->world(), nullptr), "gyreBarrier after writing the index",
            mesh_->world());
  return stepDir;
}

int64_t Trainer::load(const fs::path& stepDir) {
  CheckpointReader reader(stepDir);
  for (const Difference& d : differences(reader.meta(), modelMeta(config_.model))) {
    throw std::invalid_argument("checkpoint '" + (stepDir / "index.json").string() +
                                "' holds a model with " + d.key + " " + d.had +
                                "; this run's has " + d.wanted);
  }
  std::map<std::string, std::string> run;
  const std::map<std::string, std::string> mine = describe();
  for (const char* key : {"batch", "seed", "micro_batches", "schedule", "codec", "decentralized"})
    run[key] = mine.at(key);
  loadChanges_.clear();
  for (const Difference& d : differences(reader.meta(), run))
    loadChanges_.push_back(d.key + " " + d.had + " -> " + d.wanted);
  auto stepsIt = reader.meta().find("adam_steps");
  if (stepsIt == reader.meta().end())
    throw CheckpointError(stepDir.string() + ": the index has no adam_steps");
  const int steps = std::stoi(stepsIt->second);
  // Each of this piece's tensors from the whole global tensor, whichever
  // mesh wrote it: the reshard is this loop.
  const size_t n = model_->size();
  std::vector<float> arrays[3] = {std::vector<float>(n), std::vector<float>(n),
                                  std::vector<float>(n)};
  const char* kinds[3] = {"param", "adam.m", "adam.v"};
  for (const ParamInfo& p : model_->layout()) {
    for (int k = 0; k < 3; ++k) {
      const std::vector<float> global = reader.readGlobal(p.name, kinds[k]);
      for (size_t i = 0; i < p.size; ++i)
        arrays[k][p.offset + i] = global[globalIndex(p, model_->shard(), i)];
    }
  }
  if (zero_ && zero_->stage() == 0) {
    // Every rank holds the whole arrays and has just read them.
    zero_->loadWhole(arrays[0], arrays[1], arrays[2], steps);
  } else if (zero_) {
    const FlatRange r = zero_->shard();
    auto own = [&](const std::vector<float>& a) {
      return std::span<const float>(a).subspan(r.begin, r.size());
    };
    zero_->loadShard(own(arrays[0]), own(arrays[1]), own(arrays[2]), steps);
  } else {
    std::copy(arrays[0].begin(), arrays[0].end(), model_->params().begin());
    adam_->load(arrays[1], arrays[2], steps);
  }
  return reader.step();
}

}  // namespace gyre::harness
