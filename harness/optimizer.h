// AdamW, gradient clipping and the learning-rate schedule, over ranges of
// the model's flat arrays: ZeRO gives each rank one shard of them, so the
// optimizer never assumes it sees the whole model.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "harness/model.h"

namespace gyre::harness {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weightDecay = 0.1f;
};

// Elements [offset, offset + size) of the flat arrays, decayed or not.
struct DecaySegment {
  size_t offset = 0;
  size_t size = 0;
  bool decay = false;
};

// The model's segments, consecutive parameters with the same decay merged.
std::vector<DecaySegment> decaySegments(const std::vector<ParamInfo>& layout);

// AdamW (Loshchilov and Hutter): Adam's update plus a decay of the weights
// that does not pass through the moments, p -= lr * (mhat / (sqrt(vhat) + eps)
// + weightDecay * p).
class AdamW {
 public:
  // segments cover [0, n) of the arrays step() is given.
  AdamW(std::vector<DecaySegment> segments, size_t n, const AdamWConfig& config);

  void step(std::span<float> params, std::span<const float> grads, float lr);
  int steps() const { return t_; }
  // The moments, for checkpoints and for measuring ZeRO's memory.
  std::span<const float> m() const { return m_; }
  std::span<const float> v() const { return v_; }
  // Restores a checkpoint's moments and step count (m and v of the
  // optimizer's size).
  void load(std::span<const float> m, std::span<const float> v, int steps);

 private:
  std::vector<DecaySegment> segments_;
  AdamWConfig config_;
  std::vector<float> m_, v_;
  int t_ = 0;
};

// The sum of squares of grads, in double: a sharded run adds the shards'
// sums across ranks before taking the root, so this is the part each has.
double sumOfSquares(std::span<const float> grads);

// Scales grads so that their global norm is at most maxNorm, given the norm
// (sqrt of every shard's sumOfSquares). Returns the factor applied (1 when
// the norm is within bounds).
float clipToNorm(std::span<float> grads, double norm, float maxNorm);

// A linear warmup that reaches maxLr at step warmupSteps - 1 (step 0 gets
// maxLr / warmupSteps: a first step at 0 would be wasted), then a cosine
// decay from maxLr at step warmupSteps to minLr at totalSteps, and minLr
// after that. Steps count from 0.
struct LrSchedule {
  float maxLr = 3e-4f;
  float minLr = 3e-5f;
  int warmupSteps = 10;
  int totalSteps = 1000;
};
float learningRate(const LrSchedule& schedule, int step);

}  // namespace gyre::harness
