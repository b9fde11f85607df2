// The planner's time model for Ulysses sequence parallelism: compute from
// constants calibrated on this machine (gyre-flexsp-calibrate), the
// all-to-alls from gyre's own cost model (gyreEstimate), for groups that
// need not exist yet.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "flexsp/plan.h"
#include "gyre/gyre.h"

namespace gyre::flexsp {

// One transformer layer's forward and backward on one rank, for a
// sequence of L tokens: attentionSeconds * L^2 + linearSeconds * L (the
// attention's score and value products grow with the square of the
// length, every projection and the MLP with the length).
struct ComputeModel {
  double attentionSeconds = 0;  // per token squared
  double linearSeconds = 0;     // per token
  int hidden = 0;               // the width it was measured at
  int heads = 0;
  std::string source;  // how it was measured

  // gyre-flexsp-calibrate's numbers on the 2-core development host (the
  // command and the fit are in time_model.cc).
  static ComputeModel calibrated();
};

struct UlyssesConfig {
  ComputeModel compute = ComputeModel::calibrated();
  int layers = 1;
  // The activations the all-to-alls carry: hidden values a token.
  gyreDataType_t dtype = gyreFloat32;
};

// Seconds of one sequence of L tokens in a group of P ranks under Ulysses:
// compute (a L^2 + b L) / P (each rank has 1/P of the heads over the whole
// sequence, and 1/P of the tokens in the projections), and per layer 8
// all-to-alls (q, k, v and the output forward, their gradients backward),
// each of L/P tokens x hidden values a rank in P blocks, priced by
// gyreEstimate(AllToAll, nranks = P) on comm (groups placed as comm's
// ranks are). P = 1 has no all-to-all. Thread-safe.
class UlyssesTime {
 public:
  UlyssesTime(UlyssesConfig config, gyreComm_t comm) : config_(std::move(config)), comm_(comm) {}

  double compute(int64_t length, int ranks) const;
  double communication(int64_t length, int ranks) const;
  double operator()(int64_t length, int ranks) const {
    return compute(length, ranks) + communication(length, ranks);
  }
  // As the planner takes it; valid while this object lives.
  SequenceTime function() const {
    return [this](int64_t length, int ranks) { return (*this)(length, ranks); };
  }

 private:
  double allToAllSeconds(size_t count, int ranks) const;

  UlyssesConfig config_;
  gyreComm_t comm_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<size_t, int>, double> estimates_;  // (block count, ranks): seconds
};

}  // namespace gyre::flexsp
