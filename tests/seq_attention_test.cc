// Attention with sequence parallelism (DeepSpeed-Ulysses) equals attention
// on one rank, bit for bit: a packed batch of sequences of different
// lengths, split over the ranks with token counts that differ (one rank
// holding none), goes to heads (q, k and v packed, grouped-query attention);
// each rank attends over every token of its query heads, within each
// sequence (the batch's cumulative offsets apply as they are: after the
// exchange every rank holds the whole batch in order); the output comes back
// to the sequence shards (gyreHeadsToSeq). The reference runs the same
// function, one head at a time, on the whole batch: the same operations in
// the same order on the same values, so the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

constexpr int kHeads = 6, kKvHeads = 2;
constexpr size_t kDim = 8;
const std::vector<size_t> kSequences = {5, 9, 3, 7};  // the packed batch

// One head's attention over the tokens [begin, end) of a sequence: each
// row's softmax(q k^T / sqrt(dim)) v, in float32. Rows are `stride` floats
// apart. Not inlined, so that both paths run the very same instructions.
[[gnu::noinline]] void attendHead(const float* q, const float* k, const float* v, size_t inStride,
                                  float* out, size_t outStride, size_t begin, size_t end) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  std::vector<float> p(end - begin);
  for (size_t i = begin; i < end; ++i) {
    float top = -INFINITY;
    for (size_t j = begin; j < end; ++j) {
      float dot = 0;
      for (size_t d = 0; d < kDim; ++d) dot += q[i * inStride + d] * k[j * inStride + d];
      p[j - begin] = dot * scale;
      top = std::max(top, p[j - begin]);
    }
    float sum = 0;
    for (float& x : p) sum += (x = std::exp(x - top));
    for (size_t d = 0; d < kDim; ++d) {
      float acc = 0;
      for (size_t j = begin; j < end; ++j) acc += p[j - begin] * v[j * inStride + d];
      out[i * outStride + d] = acc / sum;
    }
  }
}

// The packed batch's q, k, v for every token: [S][heads + 2 kv][dim].
float input(size_t token, size_t head, size_t d) {
  const uint32_t x = static_cast<uint32_t>(token * 7919 + head * 104729 + d * 31337) * 2654435761u;
  return static_cast<float>(x >> 8) / static_cast<float>(1 << 24) - 0.5f;
}

struct Case {
  const char* transport;
  int nranks;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.transport << ", " << c.nranks << " ranks";
}

class SeqAttention : public testing::TestWithParam<Case> {};

TEST_P(SeqAttention, SequenceParallelAttentionEqualsOneRanksBitForBit) {
  const Case c = GetParam();
  RunOptions o;
  o.timeoutSec = 120;
  RunOutcome out = runRanks(
      c.nranks,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, c.transport);
        if (!comm) return 1;
        size_t S = 0;
        std::vector<size_t> cu = {0};  // the batch's cumulative offsets
        for (size_t len : kSequences) cu.push_back(S += len);
        // Token counts that differ, rank 1 holding none (with one rank, all).
        std::vector<size_t> tokens(n, 0), first(n + 1, 0);
        for (int r = 0; r < n; ++r) tokens[r] = r == 1 ? 0 : S / n + (r == 0 ? S % n : 0);
        if (n > 1) tokens[0] += S / n;
        for (int r = 0; r < n; ++r) first[r + 1] = first[r] + tokens[r];
        const size_t width = kHeads + 2 * kKvHeads, group = kHeads / kKvHeads;

        // The reference: the whole batch, one head at a time.
        std::vector<float> all(S * width * kDim), reference(S * kHeads * kDim);
        for (size_t T = 0; T < S; ++T)
          for (size_t w = 0; w < width; ++w)
            for (size_t d = 0; d < kDim; ++d) all[(T * width + w) * kDim + d] = input(T, w, d);
        for (size_t h = 0; h < kHeads; ++h) {
          const size_t kv = h / group;
          for (size_t s = 0; s + 1 < cu.size(); ++s)
            attendHead(&all[h * kDim], &all[(kHeads + kv) * kDim],
                       &all[(kHeads + kKvHeads + kv) * kDim], width * kDim, &reference[h * kDim],
                       kHeads * kDim, cu[s], cu[s + 1]);
        }

        // Sequence parallel: this rank's tokens to heads, attention on its
        // heads, the output back.
        gyreSeqLayout_t qkv{kHeads, kKvHeads, kDim, gyreSeqQKV, S, tokens.data()};
        int qFirst = 0, qCount = 0, kvFirst = 0, kvCount = 0;
        check.expectOk(gyreSeqHeads(&qkv, n, rank, &qFirst, &qCount, &kvFirst, &kvCount),
                       "seq heads");
        const size_t share = static_cast<size_t>(qCount + 2 * kvCount);
        std::vector<float> mine(all.begin() + first[rank] * width * kDim,
                                all.begin() + first[rank + 1] * width * kDim);
        std::vector<float> local(S * share * kDim), attended(S * qCount * kDim),
            result(tokens[rank] * kHeads * kDim);
        check.expectOk(gyreSeqToHeads(mine.data(), local.data(), &qkv, gyreFloat32, comm, nullptr),
                       "seq to heads");
        for (int j = 0; j < qCount; ++j) {
          const size_t kv = (qFirst + j) / group - kvFirst;
          for (size_t s = 0; s + 1 < cu.size(); ++s)
            attendHead(&local[j * kDim], &local[(qCount + kv) * kDim],
                       &local[(qCount + kvCount + kv) * kDim], share * kDim, &attended[j * kDim],
                       qCount * kDim, cu[s], cu[s + 1]);
        }
        gyreSeqLayout_t output{kHeads, kKvHeads, kDim, gyreSeqQ, S, tokens.data()};
        check.expectOk(
            gyreHeadsToSeq(attended.data(), result.data(), &output, gyreFloat32, comm, nullptr),
            "heads to seq");
        const float* want = &reference[first[rank] * kHeads * kDim];
        check.expect(
            result.empty() || std::memcmp(result.data(), want, result.size() * sizeof(float)) == 0,
            "rank " + std::to_string(rank) + "'s " + std::to_string(tokens[rank]) +
                " tokens of attention output differ from one rank's");
        gyreCommDestroy(comm);
        return check.failures() ? 1 : 0;
      },
      o);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Ranks, SeqAttention,
                         testing::Values(Case{"shm", 1}, Case{"shm", 2}, Case{"shm", 3},
                                         Case{"shm", 4}, Case{"tcp", 2}, Case{"tcp", 4}),
                         [](const testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.transport) + "_" +
                                  std::to_string(i.param.nranks);
                         });

}  // namespace
}  // namespace gyre::test
