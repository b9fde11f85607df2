#include "harness/zero.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace gyre::harness {

namespace {

int checkedStage(int stage) {
  if (stage < 0 || stage > 3)
    throw std::invalid_argument("Zero: stage " + std::to_string(stage) + " is not 0, 1, 2 or 3");
  return stage;
}

std::vector<ParamInfo> checkedLayout(std::vector<ParamInfo> layout) {
  if (layout.empty()) throw std::invalid_argument("Zero: an empty layout");
  return layout;
}

int commRank(gyreComm_t comm) {
  int rank = 0;
  checkGyre(gyreCommUserRank(comm, &rank), "gyreCommUserRank", comm);
  return rank;
}

int commCount(gyreComm_t comm) {
  int count = 0;
  checkGyre(gyreCommCount(comm, &count), "gyreCommCount", comm);
  return count;
}

std::string errorOf(gyreResult_t r, gyreComm_t comm) {
  const char* detail = gyreGetLastError(comm);
  return std::string(gyreGetErrorString(r)) +
         (detail && *detail ? std::string(": ") + detail : std::string());
}

}  // namespace

size_t shardStride(size_t n, int ranks) {
  if (ranks <= 0) throw std::invalid_argument("shardStride: " + std::to_string(ranks) + " ranks");
  const size_t r = static_cast<size_t>(ranks);
  return (n + r - 1) / r;
}

FlatRange shardRange(size_t n, int rank, int ranks) {
  if (ranks <= 0 || rank < 0 || rank >= ranks) {
    throw std::invalid_argument("shardRange: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks));
  }
  const size_t stride = shardStride(n, ranks);
  const size_t begin = std::min(n, static_cast<size_t>(rank) * stride);
  return {begin, std::min(n, begin + stride)};
}

std::vector<DecaySegment> cutSegments(const std::vector<DecaySegment>& segments, size_t begin,
                                      size_t end) {
  if (end < begin) {
    throw std::invalid_argument("cutSegments: [" + std::to_string(begin) + ", " +
                                std::to_string(end) + ") ends before it begins");
  }
  std::vector<DecaySegment> cut;
  for (const DecaySegment& s : segments) {
    const size_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.size);
    if (lo < hi) cut.push_back({lo - begin, hi - lo, s.decay});
  }
  return cut;
}

Zero::Zero(gyreComm_t comm, std::vector<ParamInfo> layout, int stage, const AdamWConfig& adam,
           size_t bucketElems)
    : comm_(comm),
      layout_(checkedLayout(std::move(layout))),
      stage_(checkedStage(stage)),
      rank_(commRank(comm)),
      ranks_(commCount(comm)),
      n_(layout_.back().offset + layout_.back().size),
      stride_(shardStride(n_, ranks_)),
      shard_(shardRange(n_, rank_, ranks_)),
      buckets_(gradBuckets(layout_, bucketElems)),
      adam_(stage_ == 0 ? decaySegments(layout_)
                        : cutSegments(decaySegments(layout_), shard_.begin, shard_.end),
            stage_ == 0 ? n_ : shard_.size(), adam) {
  for (const PartRange& r : partRanges(layout_)) {
    parts_.emplace_back();
    parts_.back().range = r;
  }
  params_.assign(stage_ < 3 ? stride_ * ranks_ : stride_, 0.0f);
  grads_.assign(stage_ < 2 ? n_ : shard_.size(), 0.0f);
  if (stage_ >= 2) buckets_.clear();  // they reduce part by part
  normRanges_ = {{0, n_}};
}

Zero::~Zero() {
  std::string ignored;
  gyreResult_t first = gyreSuccess;
  drain(&ignored, &first);  // only after an exception escaped a step midway
}

// --- Parameters ---

void Zero::setParams(std::span<const float> full) {
  if (full.size() != n_) {
    throw std::invalid_argument("Zero::setParams: " + std::to_string(full.size()) +
                                " elements for a model of " + std::to_string(n_));
  }
  if (stage_ < 3) {
    std::copy(full.begin(), full.end(), params_.begin());
  } else {
    std::copy(full.begin() + shard_.begin, full.begin() + shard_.end, params_.begin());
  }
}

std::vector<float> Zero::gatherParams() {
  if (stage_ < 3) return std::vector<float>(params_.begin(), params_.begin() + n_);
  std::vector<float> all(stride_ * ranks_);
  checkGyre(gyreAllGather(params_.data(), all.data(), stride_, gyreFloat32, comm_, nullptr),
            "gyreAllGather of the parameter shards", comm_);
  all.resize(n_);
  return all;
}

void Zero::allGatherParams(const char* what) {
  // In place: this rank's shard already sits at rank * stride.
  float* p = params_.data();
  checkGyre(gyreAllGather(p + static_cast<size_t>(rank_) * stride_, p, stride_, gyreFloat32, comm_,
                          nullptr),
            what, comm_);
}

// --- The model's storage ---

Zero::PartState& Zero::partState(int id, const char* caller) {
  for (PartState& p : parts_)
    if (p.range.part == id) return p;
  throw std::invalid_argument(std::string("Zero::") + caller + ": the layout has no part " +
                              std::to_string(id));
}

std::vector<std::pair<int, FlatRange>> Zero::owners(size_t begin, size_t end) const {
  std::vector<std::pair<int, FlatRange>> pieces;
  for (size_t lo = begin; lo < end;) {
    const size_t owner = lo / stride_;
    const size_t hi = std::min(end, (owner + 1) * stride_);
    pieces.push_back({static_cast<int>(owner), {lo, hi}});
    lo = hi;
  }
  return pieces;
}

void Zero::allocTransient(std::vector<float>& buffer, size_t n) {
  buffer.assign(n, 0.0f);
  transient_ += n * sizeof(float);
  peakTransient_ = std::max(peakTransient_, transient_);
}

void Zero::freeTransient(std::vector<float>& buffer) {
  transient_ -= buffer.size() * sizeof(float);
  std::vector<float>().swap(buffer);  // give the memory back, not just the size
}

const float* Zero::acquireParams(int id) {
  PartState& p = partState(id, "acquireParams");
  if (stage_ < 3) return params_.data() + p.range.begin;
  if (p.paramRefs++ > 0) return p.params.data();
  // Gather: every owner of a piece of the part broadcasts it, all at once.
  const auto start = std::chrono::steady_clock::now();
  allocTransient(p.params, p.range.size);
  std::vector<gyreRequest_t> requests;
  gyreResult_t failed = gyreSuccess;
  std::string error;
  for (const auto& [owner, piece] : owners(p.range.begin, p.range.begin + p.range.size)) {
    const float* send = owner == rank_ ? params_.data() + (piece.begin - shard_.begin) : nullptr;
    gyreRequest_t request = nullptr;
    const gyreResult_t r = gyreIbroadcast(send, p.params.data() + (piece.begin - p.range.begin),
                                          piece.size(), gyreFloat32, owner, comm_, &request);
    if (r != gyreSuccess) {
      failed = r;
      error = "gyreIbroadcast of part " + std::to_string(id) +
              "'s parameters failed: " + errorOf(r, comm_);
      break;
    }
    requests.push_back(request);
  }
  for (gyreRequest_t request : requests) {
    const gyreResult_t r = gyreWait(request);
    if (r != gyreSuccess && failed == gyreSuccess) {
      failed = r;
      error = "gyreWait on the gather of part " + std::to_string(id) +
              "'s parameters failed: " + errorOf(r, comm_);
    }
  }
  if (failed != gyreSuccess) {
    p.paramRefs = 0;
    freeTransient(p.params);
    throw GyreError(error, failed);
  }
  gatherSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p.params.data();
}

void Zero::releaseParams(int id) {
  PartState& p = partState(id, "releaseParams");
  if (stage_ < 3) return;
  if (p.paramRefs == 0)
    throw std::logic_error("Zero::releaseParams: part " + std::to_string(id) + " is not acquired");
  if (--p.paramRefs == 0) freeTransient(p.params);
}

float* Zero::acquireGrads(int id) {
  PartState& p = partState(id, "acquireGrads");
  if (phase_ != Phase::Backward)
    throw std::logic_error("Zero: a backward outside beginStep() ... finishBackward()");
  if (stage_ < 2) return grads_.data() + p.range.begin;
  if (p.gradRefs++ == 0) allocTransient(p.grads, p.range.size);  // zeroed
  return p.grads.data();
}

void Zero::releaseGrads(int id) {
  PartState& p = partState(id, "releaseGrads");
  if (phase_ != Phase::Backward)
    throw std::logic_error("Zero: a backward outside beginStep() ... finishBackward()");
  // The last part backward finishes (the embeddings, on a whole model) ends a pass.
  const bool lastOfPass = id == parts_.front().range.part;
  if (stage_ < 2) {
    if (passes_ == microBatches_ - 1) launchBuckets(id);
  } else {
    if (p.gradRefs == 0)
      throw std::logic_error("Zero::releaseGrads: part " + std::to_string(id) + " is not acquired");
    if (--p.gradRefs == 0) reducePart(p);
  }
  if (lastOfPass) ++passes_;
}

void Zero::launchBuckets(int id) {
  float* grads = grads_.data();
  while (nextBucket_ < buckets_.size() && buckets_[nextBucket_].part == id) {
    const GradBucket& b = buckets_[nextBucket_];
    Pending pending;
    pending.what = "gyreIallReduce of a gradient bucket";
    pending_.push_back(std::move(pending));
    ++nextBucket_;
    for (const auto& [piece, expert] : expertPieces(b.offset, b.offset + b.size)) {
      float* g = grads + piece.begin;
      gyreComm_t comm = comm_;
      if (expert) {
        // Averaged over the expert group's ranks, times its share of the
        // data-parallel ranks: the sum over all their batches over their count.
        const float share = static_cast<float>(expertRanks_) / static_cast<float>(ranks_);
        for (size_t i = 0; i < piece.size(); ++i) g[i] *= share;
        comm = expertComm_;
      }
      gyreRequest_t request = nullptr;
      // gyreAvg: the same bits on every rank, so stage 0's replicas stay identical.
      checkGyre(gyreIallReduce(g, g, piece.size(), gyreFloat32, gyreAvg, comm, &request),
                "gyreIallReduce of a gradient bucket", comm);
      pending_.back().requests.push_back(request);
    }
  }
}

std::vector<std::pair<FlatRange, bool>> Zero::expertPieces(size_t begin, size_t end) const {
  std::vector<std::pair<FlatRange, bool>> pieces;
  size_t at = begin;
  for (const FlatRange& r : expertRanges_) {  // sorted, disjoint
    const size_t lo = std::max(r.begin, at), hi = std::min(r.end, end);
    if (lo >= hi) continue;
    if (at < lo) pieces.push_back({{at, lo}, false});
    pieces.push_back({{lo, hi}, true});
    at = hi;
  }
  if (at < end) pieces.push_back({{at, end}, false});
  return pieces;
}

void Zero::requireStage0(const char* what) const {
  if (stage_ != 0) {
    throw std::logic_error(std::string("Zero::") + what + ": stage " + std::to_string(stage_) +
                           " does not hold the whole arrays (stage 0 does)");
  }
}

void Zero::setExpertGroup(gyreComm_t comm, std::vector<FlatRange> ranges) {
  if (stage_ != 0) {
    throw std::invalid_argument(
        "expert parallelism with ZeRO stage " + std::to_string(stage_) +
        ": ZeRO's shards cut one flat layout over the data-parallel ranks, and expert-parallel "
        "ranks hold different experts in theirs; use stage 0");
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const FlatRange& a, const FlatRange& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].end < ranges[i].begin || ranges[i].end > n_ ||
        (i > 0 && ranges[i].begin < ranges[i - 1].end))
      throw std::invalid_argument("Zero::setExpertGroup: a range outside the layout or overlapping");
  }
  expertComm_ = comm;
  expertRanges_ = std::move(ranges);
  expertRanks_ = commCount(comm);
  expertShard_ = shardRange(n_, commRank(comm), expertRanks_);
}

// Stages 2 and 3: one gyreIreduce (average) per owner of a piece of the
// part, in place in the part's buffer; the owner adds its piece into its
// shard once the reduction is done (retire). The buffer moves into pending_
// and lives until then.
void Zero::reducePart(PartState& p) {
  Pending pending;
  pending.bufferBegin = p.range.begin;
  pending.what = "gyreIreduce of part " + std::to_string(p.range.part) + "'s gradients";
  pending.buffer = std::move(p.grads);
  p.grads = {};
  gyreResult_t failed = gyreSuccess;
  for (const auto& [owner, piece] : owners(p.range.begin, p.range.begin + p.range.size)) {
    float* data = pending.buffer.data() + (piece.begin - p.range.begin);
    gyreRequest_t request = nullptr;
    failed = gyreIreduce(data, owner == rank_ ? data : nullptr, piece.size(), gyreFloat32, gyreAvg,
                         owner, comm_, &request);
    if (failed != gyreSuccess) break;
    pending.requests.push_back(request);
  }
  const std::string error = failed == gyreSuccess ? "" : errorOf(failed, comm_);
  pending_.push_back(std::move(pending));
  if (failed != gyreSuccess) throw GyreError(pending_.back().what + " failed: " + error, failed);
  // Keep at most this part's and the one before in flight: retire the older
  // ones, which had the whole of this part's backward to complete.
  if (pending_.size() > 1) {
    std::string wait;
    gyreResult_t first = gyreSuccess;
    for (size_t i = 0; i + 1 < pending_.size(); ++i) retire(pending_[i], &wait, &first);
    pending_.erase(pending_.begin(), pending_.end() - 1);
    if (first != gyreSuccess) throw GyreError(wait, first);
  }
}

void Zero::retire(Pending& p, std::string* error, gyreResult_t* first) {
  gyreResult_t failed = gyreSuccess;
  for (gyreRequest_t request : p.requests) {
    const gyreResult_t r = gyreWait(request);
    if (r != gyreSuccess && failed == gyreSuccess) failed = r;
  }
  p.requests.clear();
  if (failed != gyreSuccess && *first == gyreSuccess) {
    *first = failed;
    *error = "gyreWait on the " + p.what + " failed: " + errorOf(failed, comm_);
  }
  if (!p.buffer.empty()) {
    if (failed == gyreSuccess) {
      // The own piece of the reduced part, added to the shard's gradients.
      const size_t lo = std::max(p.bufferBegin, shard_.begin);
      const size_t hi = std::min(p.bufferBegin + p.buffer.size(), shard_.end);
      for (size_t i = lo; i < hi; ++i) grads_[i - shard_.begin] += p.buffer[i - p.bufferBegin];
    }
    freeTransient(p.buffer);
  }
}

void Zero::drain(std::string* error, gyreResult_t* first) {
  for (Pending& p : pending_) retire(p, error, first);
  pending_.clear();
}

// --- The step ---

void Zero::beginStep(int microBatches) {
  if (microBatches < 1) {
    throw std::invalid_argument("Zero::beginStep: " + std::to_string(microBatches) +
                                " micro-batches");
  }
  gatherSeconds_ = 0;
  if (!pending_.empty()) {
    std::string ignored;  // the interrupted step already threw its error
    gyreResult_t first = gyreSuccess;
    drain(&ignored, &first);
  }
  for (PartState& p : parts_) {
    if (p.paramRefs > 0) {  // stage 3: gathered before this step's update
      p.paramRefs = 0;
      freeTransient(p.params);
    }
    if (p.gradRefs > 0) {
      p.gradRefs = 0;
      freeTransient(p.grads);
    }
  }
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  microBatches_ = microBatches;
  passes_ = 0;
  nextBucket_ = 0;
  phase_ = Phase::Backward;
}

void Zero::finishBackward() {
  if (phase_ != Phase::Backward) throw std::logic_error("Zero::finishBackward before beginStep");
  std::string error;
  gyreResult_t first = gyreSuccess;
  drain(&error, &first);
  if (first != gyreSuccess) throw GyreError(error, first);
  if (passes_ != microBatches_ || (stage_ < 2 && nextBucket_ != buckets_.size())) {
    throw std::logic_error("Zero::finishBackward: " + std::to_string(passes_) + " of " +
                           std::to_string(microBatches_) + " backward passes have run");
  }
  phase_ = Phase::Reduced;
}

float Zero::averageLoss(float localLoss) {
  float loss = localLoss;
  checkGyre(gyreAllReduce(&loss, &loss, 1, gyreFloat32, gyreAvg, comm_, nullptr),
            "gyreAllReduce of the loss", comm_);
  return loss;
}

std::span<float> Zero::shardGrads() {
  if (stage_ < 2) return std::span<float>(grads_).subspan(shard_.begin, shard_.size());
  return grads_;
}

std::span<float> Zero::replicaGrads() {
  if (stage_ >= 2) {
    throw std::logic_error("Zero::replicaGrads: stage " + std::to_string(stage_) +
                           " holds only its shard of the gradients");
  }
  return std::span<float>(grads_).first(n_);
}

void Zero::setGlobalSumSq(GlobalSumSq f) { globalSumSq_ = std::move(f); }

void Zero::setNormRanges(std::vector<FlatRange> ranges) {
  for (const FlatRange& r : ranges) {
    if (r.end < r.begin || r.end > n_)
      throw std::invalid_argument("Zero::setNormRanges: a range outside the layout");
  }
  normRanges_ = std::move(ranges);
}

double Zero::step(float lr, float maxNorm) {
  if (phase_ != Phase::Reduced) throw std::logic_error("Zero::step before finishBackward");
  // The norm: each rank counts its own shard (stages 0 and 1 hold every
  // gradient, but then each would be counted R times).
  const std::span<float> own = shardGrads();
  double local = 0;
  for (const FlatRange& r : normRanges_) {
    if (!expertRanges_.empty()) {
      // Stage 0 with experts: the experts counted by their own group's cut.
      for (const auto& [piece, expert] : expertPieces(r.begin, r.end)) {
        const FlatRange& cut = expert ? expertShard_ : shard_;
        const size_t lo = std::max(piece.begin, cut.begin), hi = std::min(piece.end, cut.end);
        if (lo < hi) local += sumOfSquares(std::span<const float>(grads_).subspan(lo, hi - lo));
      }
      continue;
    }
    const size_t lo = std::max(r.begin, shard_.begin), hi = std::min(r.end, shard_.end);
    if (lo < hi) local += sumOfSquares(own.subspan(lo - shard_.begin, hi - lo));
  }
  double global = local;
  if (globalSumSq_) {
    global = globalSumSq_(local);
  } else {
    checkGyre(gyreAllReduce(&global, &global, 1, gyreFloat64, gyreSum, comm_, nullptr),
              "gyreAllReduce of the gradients' sum of squares", comm_);
  }
  const double norm = std::sqrt(global);
  phase_ = Phase::Idle;
  std::span<float> params(params_);
  if (stage_ == 0) {
    if (maxNorm > 0) clipToNorm(grads_, norm, maxNorm);
    adam_.step(params.first(n_), grads_, lr);
    return norm;
  }
  if (maxNorm > 0) clipToNorm(own, norm, maxNorm);
  adam_.step(params.subspan(stage_ < 3 ? shard_.begin : 0, shard_.size()), own, lr);
  if (stage_ < 3) allGatherParams("gyreAllGather of the updated parameters");
  return norm;
}

// --- Checkpoints ---

std::span<const float> Zero::shardParams() const {
  return std::span<const float>(params_).subspan(stage_ < 3 ? shard_.begin : 0, shard_.size());
}

std::span<const float> Zero::shardM() const {
  return stage_ == 0 ? adam_.m().subspan(shard_.begin, shard_.size()) : adam_.m();
}

std::span<const float> Zero::shardV() const {
  return stage_ == 0 ? adam_.v().subspan(shard_.begin, shard_.size()) : adam_.v();
}

std::span<const float> Zero::wholeParams() const {
  requireStage0("wholeParams");
  return std::span<const float>(params_).first(n_);
}

std::span<const float> Zero::wholeM() const {
  requireStage0("wholeM");
  return adam_.m();
}

std::span<const float> Zero::wholeV() const {
  requireStage0("wholeV");
  return adam_.v();
}

void Zero::loadWhole(std::span<const float> params, std::span<const float> m,
                     std::span<const float> v, int steps) {
  requireStage0("loadWhole");
  if (params.size() != n_ || m.size() != n_ || v.size() != n_) {
    throw std::invalid_argument("Zero::loadWhole: the model holds " + std::to_string(n_) +
                                " elements; got " + std::to_string(params.size()) + ", " +
                                std::to_string(m.size()) + " and " + std::to_string(v.size()));
  }
  std::copy(params.begin(), params.end(), params_.begin());
  adam_.load(m, v, steps);
}

void Zero::loadShard(std::span<const float> params, std::span<const float> m,
                     std::span<const float> v, int steps) {
  const size_t s = shard_.size();
  if (params.size() != s || m.size() != s || v.size() != s) {
    throw std::invalid_argument("Zero::loadShard: the shard holds " + std::to_string(s) +
                                " elements; got " + std::to_string(params.size()) + ", " +
                                std::to_string(m.size()) + " and " + std::to_string(v.size()));
  }
  const size_t at = stage_ < 3 ? shard_.begin : 0;
  std::copy(params.begin(), params.end(), params_.begin() + at);
  if (stage_ < 3) allGatherParams("gyreAllGather of the loaded parameters");
  if (stage_ > 0) {
    adam_.load(m, v, steps);
    return;
  }
  // Stage 0 holds every moment: gather them from the shards.
  auto gather = [&](std::span<const float> mine, const char* what) {
    std::vector<float> all(stride_ * ranks_);
    std::copy(mine.begin(), mine.end(), all.begin() + shard_.begin);
    checkGyre(gyreAllGather(all.data() + static_cast<size_t>(rank_) * stride_, all.data(), stride_,
                            gyreFloat32, comm_, nullptr),
              what, comm_);
    all.resize(n_);
    return all;
  };
  const std::vector<float> allM = gather(m, "gyreAllGather of the loaded first moments");
  const std::vector<float> allV = gather(v, "gyreAllGather of the loaded second moments");
  adam_.load(allM, allV, steps);
}

ZeroMemory Zero::memory() const {
  return {.params = params_.size() * sizeof(float),
          .grads = grads_.size() * sizeof(float),
          .optimizer = (adam_.m().size() + adam_.v().size()) * sizeof(float),
          .peakTransient = peakTransient_};
}

}  // namespace gyre::harness
