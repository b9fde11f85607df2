#include "flexsp/time_model.h"

#include <stdexcept>

namespace gyre::flexsp {

// On the 2-core development host (shared with other builds: load average
// 6.8; the faster of two runs, the other 29% slower), 2026-12:
//   $ gyre-flexsp-calibrate --lengths 256,512,1024,2048,4096 --reps 3
//   # gyre-flexsp-calibrate --hidden 512 --heads 8 (one layer, forward and backward, 1 thread, best
//   of 3) attention_seconds = 1.05389e-07  # per token^2 linear_seconds = 0.000210405  # per token
//   L =    256: measured 0.06263 s, fit 0.06077 s (-3.0%)
//   L =    512: measured 0.1345 s, fit 0.1354 s (+0.6%)
//   L =   1024: measured 0.3166 s, fit 0.326 s (+3.0%)
//   L =   2048: measured 0.8582 s, fit 0.8729 s (+1.7%)
//   L =   4096: measured 2.701 s, fit 2.63 s (-2.6%)
ComputeModel ComputeModel::calibrated() {
  return ComputeModel{
      1.05389e-07, 0.000210405, 512, 8,
      "gyre-flexsp-calibrate --lengths 256,512,1024,2048,4096 --reps 3 (hidden 512, 8 heads, "
      "fp32, 1 thread, the 2-core development host)"};
}

double UlyssesTime::compute(int64_t length, int ranks) const {
  const double l = double(length);
  const ComputeModel& c = config_.compute;
  return config_.layers * (c.attentionSeconds * l * l + c.linearSeconds * l) / ranks;
}

double UlyssesTime::communication(int64_t length, int ranks) const {
  if (ranks <= 1) return 0;
  // A rank holds ceil(L / P) tokens of hidden values and sends a block of
  // them to each of the P ranks.
  const int64_t tokens = (length + ranks - 1) / ranks;
  const size_t elements = static_cast<size_t>(tokens) * static_cast<size_t>(config_.compute.hidden);
  const size_t block = (elements + static_cast<size_t>(ranks) - 1) / static_cast<size_t>(ranks);
  return config_.layers * 8 * allToAllSeconds(block, ranks);
}

double UlyssesTime::allToAllSeconds(size_t count, int ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = estimates_.try_emplace({count, ranks}, 0.0);
  if (fresh) {
    double us = 0;
    if (gyreEstimate(gyreCallAllToAll, count, config_.dtype, ranks, comm_, &us) != gyreSuccess) {
      estimates_.erase(it);
      throw std::runtime_error(std::string("flexsp: gyreEstimate: ") + gyreGetLastError(comm_));
    }
    it->second = us * 1e-6;
  }
  return it->second;
}

}  // namespace gyre::flexsp
