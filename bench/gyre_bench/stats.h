// The arithmetic behind a table cell: bandwidths from a size and a time,
// per-iteration percentiles, and -a's cross-rank aggregation. Pure
// functions, so the tests can check them without running ranks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gyre::bench {

// -a: how one value per rank becomes the reported one (nccl-tests' meanings
// and numbering; nccl-tests defaults to the average).
enum class Aggregate { Rank0 = 0, Avg = 1, Min = 2, Max = 3 };
const char* aggregateName(Aggregate a);  // "rank0", "avg", "min", "max"
double aggregate(const std::vector<double>& perRank, Aggregate a);

// algbw in GB/s (10^9 bytes per second) of `bytes` moved in `usec`; 0 when no time.
double algBandwidth(size_t bytes, double usec);
// busbw: algbw times the collective's factor (collectives.h busFactor).
inline double busBandwidth(double algbw, double factor) { return algbw * factor; }

// The p-th percentile (0 < p <= 100) by the nearest-rank method: the
// smallest sample with at least p% of the samples at or below it. Sorts a
// copy; -1 when there are no samples.
double percentile(std::vector<double> samples, double p);

}  // namespace gyre::bench
