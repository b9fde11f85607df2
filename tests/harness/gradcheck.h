// Central finite differences for the harness's gradient checks. Everything
// is float, as the layers are: steps of 1e-2 keep the rounding of a float
// forward (about 1e-7 of each output) well below the differences measured,
// and the truncation error (h^2 times the third derivative) below 1e-4.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "harness/random.h"

namespace gyre::harness::test {

inline std::vector<float> normals(size_t n, Random& rng, float mean = 0.0f, float stddev = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal(mean, stddev);
  return v;
}

// A scalar from outputs: sum(out * weights) in double, so that the gradient
// reaching the outputs (the weights) is arbitrary rather than all ones.
inline double weightedSum(std::span<const float> out, std::span<const float> weights) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * weights[i];
  return s;
}

// d loss / d x[i] for every i, by (loss(x + h) - loss(x - h)) / 2h; x is
// restored afterwards.
inline std::vector<double> numericGradient(std::span<float> x, const std::function<double()>& loss,
                                           float h = 1e-2f) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    // The step actually taken, as float rounded saved +- h.
    g[i] = (up - down) / (static_cast<double>(saved + h) - static_cast<double>(saved - h));
  }
  return g;
}

// Each element within atol + rtol * |numeric|, and the whole vector within
// rtol in norm: the elements catch a wrong entry, the norm a small error
// spread over all of them.
inline testing::AssertionResult gradientsAgree(std::span<const float> analytic,
                                               std::span<const double> numeric, double rtol,
                                               double atol) {
  if (analytic.size() != numeric.size()) return testing::AssertionFailure() << "sizes differ";
  double diff2 = 0.0, ref2 = 0.0;
  std::ostringstream bad;
  int nbad = 0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    const double d = analytic[i] - numeric[i];
    diff2 += d * d;
    ref2 += numeric[i] * numeric[i];
    if (std::fabs(d) > atol + rtol * std::fabs(numeric[i]) && nbad++ < 5) {
      bad << " [" << i << "] analytic " << analytic[i] << " numeric " << numeric[i] << ";";
    }
  }
  const double rel = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-12);
  if (nbad > 0 || rel > rtol) {
    return testing::AssertionFailure()
           << nbad << " of " << analytic.size() << " elements differ, relative error " << rel
           << " in norm:" << bad.str();
  }
  if (ref2 == 0.0)
    return testing::AssertionFailure() << "the numeric gradient is all zero: nothing was checked";
  return testing::AssertionSuccess() << "relative error " << rel;
}

}  // namespace gyre::harness::test
