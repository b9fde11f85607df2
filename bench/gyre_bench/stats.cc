#include "bench/gyre_bench/stats.h"

#include <algorithm>
#include <cmath>

namespace gyre::bench {

const char* aggregateName(Aggregate a) {
  switch (a) {
    case Aggregate::Rank0: return "rank0";
    case Aggregate::Avg: return "avg";
    case Aggregate::Min: return "min";
    case Aggregate::Max: return "max";
  }
  return "?";
}

double aggregate(const std::vector<double>& v, Aggregate a) {
  if (v.empty()) return 0;
  switch (a) {
    case Aggregate::Rank0: return v[0];
    case Aggregate::Min: return *std::min_element(v.begin(), v.end());
    case Aggregate::Max: return *std::max_element(v.begin(), v.end());
    case Aggregate::Avg: break;
  }
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double algBandwidth(size_t bytes, double usec) { return usec > 0 ? double(bytes) / usec / 1e3 : 0; }

double percentile(std::vector<double> s, double p) {
  if (s.empty()) return -1;
  std::sort(s.begin(), s.end());
  const double rank = std::ceil(p / 100.0 * double(s.size()));
  const size_t i = rank < 1 ? 0 : std::min(s.size(), static_cast<size_t>(rank)) - 1;
  return s[i];
}

}  // namespace gyre::bench
