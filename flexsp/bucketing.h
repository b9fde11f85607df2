// FlexSP's bucketing (its section 4): sequences of nearly equal length are
// one bucket, so the MIP decides how many of each bucket a group takes
// instead of where each sequence goes, and stays small whatever the batch.
#pragma once

#include <cstdint>
#include <vector>

namespace gyre::flexsp {

struct Bucket {
  int64_t length = 0;          // its longest sequence: the bound for time and memory
  std::vector<int> sequences;  // indices into the lengths, longest first
};

// At most maxBuckets buckets of consecutive lengths (in sorted order),
// chosen by dynamic programming to minimise the padding: the sum over
// sequences of (their bucket's length - their own). With no more distinct
// lengths than maxBuckets every bucket is one length (no error at all).
// Buckets come shortest first.
std::vector<Bucket> bucketLengths(const std::vector<int64_t>& lengths, int maxBuckets);

}  // namespace gyre::flexsp
