#include "harness/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

namespace gyre::harness {

std::vector<DecaySegment> decaySegments(const std::vector<ParamInfo>& layout) {
  std::vector<DecaySegment> segments;
  for (const ParamInfo& p : layout) {
    if (!segments.empty() && segments.back().decay == p.decay &&
        segments.back().offset + segments.back().size == p.offset) {
      segments.back().size += p.size;
    } else {
      segments.push_back({p.offset, p.size, p.decay});
    }
  }
  return segments;
}

AdamW::AdamW(std::vector<DecaySegment> segments, size_t n, const AdamWConfig& config)
    : segments_(std::move(segments)), config_(config), m_(n, 0.0f), v_(n, 0.0f) {
  for (const DecaySegment& s : segments_) {
    if (s.offset + s.size > n)
      throw std::invalid_argument("AdamW: a segment reaches past the arrays");
  }
}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  if (params.size() != m_.size() || grads.size() != m_.size()) {
    throw std::invalid_argument("AdamW::step: params and grads must have the optimizer's size");
  }
  ++t_;
  const float b1 = config_.beta1, b2 = config_.beta2;
  // Bias corrections in double: 1 - 0.999^t loses most of its digits in float early on.
  const float c1 = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), t_));
  const float c2 = static_cast<float>(1.0 - std::pow(static_cast<double>(b2), t_));
  for (const DecaySegment& s : segments_) {
    const float wd = s.decay ? config_.weightDecay : 0.0f;
    for (size_t i = s.offset; i < s.offset + s.size; ++i) {
      float g = grads[i];
      m_[i] = b1 * m_[i] + (1.0f - b1) * g;
      v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
      float mhat = m_[i] / c1;
      float vhat = v_[i] / c2;
      params[i] -= lr * (mhat / (std::sqrt(vhat) + config_.eps) + wd * params[i]);
    }
  }
}

void AdamW::load(std::span<const float> m, std::span<const float> v, int steps) {
  if (m.size() != m_.size() || v.size() != v_.size())
    throw std::invalid_argument("AdamW::load: m and v must have the optimizer's size");
  if (steps < 0) throw std::invalid_argument("AdamW::load: a negative step count");
  m_.assign(m.begin(), m.end());
  v_.assign(v.begin(), v.end());
  t_ = steps;
}

double sumOfSquares(std::span<const float> grads) {
  double sum = 0.0;
  for (float g : grads) sum += static_cast<double>(g) * g;
  return sum;
}

float clipToNorm(std::span<float> grads, double norm, float maxNorm) {
  if (!(norm > maxNorm)) return 1.0f;
  const float scale = static_cast<float>(maxNorm / norm);
  for (float& g : grads) g *= scale;
  return scale;
}

float learningRate(const LrSchedule& s, int step) {
  if (step < s.warmupSteps)
    return s.maxLr * static_cast<float>(step + 1) / static_cast<float>(s.warmupSteps);
  if (step >= s.totalSteps) return s.minLr;
  double progress =
      static_cast<double>(step - s.warmupSteps) / std::max(1, s.totalSteps - s.warmupSteps);
  double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return static_cast<float>(s.minLr + cosine * (s.maxLr - s.minLr));
}

}  // namespace gyre::harness
