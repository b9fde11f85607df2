// What every multi-process harness test checks against the single-rank run
// (dp_rank.cc, zero_rank.cc, pipeline_rank.cc, train_rank.cc): the loss of
// every step, each tensor of the rank's piece in global coordinates, and
// that data-parallel replicas hold the same bits. Each check prints what
// failed, naming the rank, and returns how many things failed. A NaN always
// fails (the comparisons are written !(r <= tolerance)).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data_parallel.h"
#include "harness/layout.h"
#include "harness/token_file.h"

namespace gyre::harness::test {

// The run every rank program checks against one rank: 20 steps of a global
// batch of 8 sequences of 32 tokens from one seed, held to 1e-5 relative.
inline constexpr int kSteps = 20, kBatch = 8, kSeq = 32;
inline constexpr uint64_t kSeed = 1234;
inline constexpr double kTolerance = 1e-5;

inline double relative(double a, double b) {
  const double scale = std::max(std::fabs(a), std::fabs(b));
  return scale == 0 ? 0 : std::fabs(a - b) / scale;
}

// Step by step, got against want (the single-rank losses); *worst becomes
// the largest relative difference.
inline int checkLosses(std::span<const float> got, std::span<const float> want, double tolerance,
                       const std::string& who, double* worst) {
  int failures = 0;
  for (size_t s = 0; s < got.size(); ++s) {
    const double r = relative(got[s], want[s]);
    *worst = std::max(*worst, r);
    if (!(r <= tolerance)) {
      std::printf("%s: step %zu loss %.9g, single-rank %.9g (relative %.3g)\n", who.c_str(), s,
                  got[s], want[s], r);
      ++failures;
    }
  }
  return failures;
}

// Per tensor of the piece (layout, shard; its flat parameters `got`), the
// norm of the difference from the whole model's tensor at the same global
// elements (wantLayout and wantParams: the single-rank model's), relative to
// that tensor's norm: an element near 0, a bias that crossed zero, has no
// meaningful relative difference of its own. Prints the first few over the
// tolerance; counts one failure if any; *worst becomes the largest.
inline int checkTensors(const std::vector<ParamInfo>& layout, const ModelShard& shard,
                        std::span<const float> got, const std::vector<ParamInfo>& wantLayout,
                        std::span<const float> wantParams, double tolerance, const std::string& who,
                        double* worst) {
  int bad = 0;
  for (const ParamInfo& p : layout) {
    auto w = std::find_if(wantLayout.begin(), wantLayout.end(),
                          [&](const ParamInfo& q) { return q.name == p.name; });
    if (w == wantLayout.end()) {
      std::printf("%s: the single-rank model has no %s\n", who.c_str(), p.name.c_str());
      ++bad;
      continue;
    }
    double diff = 0, norm = 0;
    for (size_t i = 0; i < p.size; ++i) {
      const double want = wantParams[w->offset + globalIndex(p, shard, i)];
      const double d = got[p.offset + i] - want;
      diff += d * d;
      norm += want * want;
    }
    const double r = norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
    *worst = std::max(*worst, r);
    if (!(r <= tolerance) && bad++ < 5) {
      std::printf("%s: %s%s differs from the single-rank run by %.3g of its norm\n", who.c_str(),
                  p.name.c_str(), p.tiedCopy ? " (the tied copy)" : "", r);
    }
  }
  return bad > 0 ? 1 : 0;
}

// Every rank of comm holds the same bits as this one (a hash of them,
// gathered).
inline int checkReplicas(gyreComm_t comm, std::span<const float> params, const std::string& who) {
  int ranks = 0;
  checkGyre(gyreCommCount(comm, &ranks), "gyreCommCount", comm);
  const auto* bytes = reinterpret_cast<const uint8_t*>(params.data());
  uint64_t hash = fnv1a64({bytes, params.size() * sizeof(float)});
  std::vector<uint64_t> hashes(ranks);
  checkGyre(gyreAllGather(&hash, hashes.data(), 1, gyreUint64, comm, nullptr),
            "gyreAllGather of the replicas' hashes", comm);
  int failures = 0;
  for (int r = 0; r < ranks; ++r) {
    if (hashes[r] != hash) {
      std::printf("%s: replica %d holds other parameters (hash %016llx, not %016llx)\n",
                  who.c_str(), r, static_cast<unsigned long long>(hashes[r]),
                  static_cast<unsigned long long>(hash));
      ++failures;
    }
  }
  return failures;
}

// main() of a rank program: body's status, or 1 with the exception's text.
inline int runRank(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace gyre::harness::test
