#include "flexsp/bucketing.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

namespace gyre::flexsp {

std::vector<Bucket> bucketLengths(const std::vector<int64_t>& lengths, int maxBuckets) {
  std::vector<int> order(lengths.size());  // longest first
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return lengths[a] > lengths[b]; });
  // Distinct lengths, ascending, and how many sequences have each.
  std::vector<int64_t> value, count;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (value.empty() || value.back() != lengths[*it]) {
      value.push_back(lengths[*it]);
      count.push_back(0);
    }
    ++count.back();
  }
  const size_t k = value.size();
  if (k == 0) return {};
  const size_t buckets = std::clamp<size_t>(static_cast<size_t>(std::max(maxBuckets, 1)), 1, k);
  // Prefix sums make a bucket's padding O(1): lengths i..j (ascending)
  // padded to value[j] cost value[j] * n(i..j) - sum(i..j).
  std::vector<double> n(k + 1, 0), sum(k + 1, 0);
  for (size_t i = 0; i < k; ++i) {
    n[i + 1] = n[i] + double(count[i]);
    sum[i + 1] = sum[i] + double(count[i]) * double(value[i]);
  }
  auto padding = [&](size_t i, size_t j) {
    return double(value[j]) * (n[j + 1] - n[i]) - (sum[j + 1] - sum[i]);
  };
  // best[b][j]: the least padding of lengths 0..j in b+1 buckets; start[b][j]:
  // where the last of them starts.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(buckets, std::vector<double>(k, kInf));
  std::vector<std::vector<size_t>> start(buckets, std::vector<size_t>(k, 0));
  for (size_t j = 0; j < k; ++j) best[0][j] = padding(0, j);
  for (size_t b = 1; b < buckets; ++b)
    for (size_t j = b; j < k; ++j)
      for (size_t i = b; i <= j; ++i) {
        const double c = best[b - 1][i - 1] + padding(i, j);
        if (c < best[b][j]) best[b][j] = c, start[b][j] = i;
      }
  // The cuts, walked back from the longest length.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t b = buckets, end = k; end > 0; --b) {
    const size_t i = b == 1 ? 0 : start[b - 1][end - 1];
    ranges.emplace_back(i, end - 1);
    end = i;
  }
  std::vector<Bucket> out;
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    Bucket bucket;
    bucket.length = value[it->second];
    for (int s : order)
      if (lengths[s] >= value[it->first] && lengths[s] <= bucket.length)
        bucket.sequences.push_back(s);
    out.push_back(std::move(bucket));
  }
  return out;
}

}  // namespace gyre::flexsp
