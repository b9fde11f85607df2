// DeepSpeed-Ulysses' exchanges (gyreSeqToHeads, gyreHeadsToSeq): how heads
// are dealt out (without processes), then real ranks over shared memory and
// TCP, 1 to 8 of them, every shape (equal shares, heads that do not divide,
// packed q/k/v, grouped-query attention with fewer and more key/value heads
// than ranks, per-rank token counts with an empty rank, fewer heads than
// ranks, k and v alone) in every data type, both ways, against a reference
// built from the whole sequence on one rank: bit for bit, bytes past the
// output untouched. Then the nonblocking forms and a call on a stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "base/hash.h"
#include "bench/exact_values.h"
#include "kernels/cpu/half.h"
#include "tests/support/emulated_gpu.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

// ---- the heads each rank holds ----

struct Share {
  int qFirst = 0, qCount = 0, kvFirst = 0, kvCount = 0;
};

Share shareOf(const gyreSeqLayout_t& l, int n, int r) {
  Share s;
  EXPECT_EQ(gyreSeqHeads(&l, n, r, &s.qFirst, &s.qCount, &s.kvFirst, &s.kvCount), gyreSuccess)
      << gyreGetLastError(nullptr);
  return s;
}

TEST(SeqHeads, QueryHeadsAreDealtEvenlyFirstRanksTakingOneMore) {
  for (int n = 1; n <= 9; ++n)
    for (int heads = 1; heads <= 20; ++heads) {
      gyreSeqLayout_t l{heads, 0, 8, gyreSeqQ, 0, nullptr};
      int next = 0;
      for (int r = 0; r < n; ++r) {
        const Share s = shareOf(l, n, r);
        EXPECT_EQ(s.qFirst, next) << heads << " heads, rank " << r << " of " << n;
        EXPECT_EQ(s.qCount, heads / n + (r < heads % n ? 1 : 0))
            << heads << " heads, rank " << r << " of " << n;
        next += s.qCount;
        // Without grouping, a rank's key/value heads are its query heads.
        EXPECT_EQ(s.kvFirst, s.qCount ? s.qFirst : s.kvFirst);
        EXPECT_EQ(s.kvCount, s.qCount);
      }
      EXPECT_EQ(next, heads);
    }
}

TEST(SeqHeads, KeyValueHeadsAreThoseTheQueryHeadsUse) {
  for (int n = 1; n <= 9; ++n)
    for (int kv = 1; kv <= 8; ++kv)
      for (int group = 1; group <= 4; ++group) {
        const int heads = kv * group;
        gyreSeqLayout_t l{heads, kv, 8, gyreSeqQKV, 0, nullptr};
        std::vector<int> holders(kv, 0);
        for (int r = 0; r < n; ++r) {
          const Share s = shareOf(l, n, r);
          std::vector<int> used;  // the kv head of each of its query heads, in order
          for (int h = s.qFirst; h < s.qFirst + s.qCount; ++h)
            if (used.empty() || used.back() != h / group) used.push_back(h / group);
          ASSERT_EQ(s.kvCount, static_cast<int>(used.size()))
              << heads << "/" << kv << " rank " << r << " of " << n;
          for (int i = 0; i < s.kvCount; ++i) {
            EXPECT_EQ(s.kvFirst + i, used[i]);
            ++holders[s.kvFirst + i];
          }
        }
        for (int h = 0; h < kv; ++h) EXPECT_GE(holders[h], 1) << "every key/value head is held";
      }
}

TEST(SeqHeads, RefusesWhatIsNoLayout) {
  gyreSeqLayout_t l{8, 3, 8, gyreSeqQKV, 0, nullptr};
  int q = 0;
  EXPECT_EQ(gyreSeqHeads(&l, 4, 0, &q, nullptr, nullptr, nullptr), gyreInvalidArgument);
  EXPECT_NE(std::string(gyreGetLastError(nullptr)).find("kvHeads 3 does not divide heads 8"),
            std::string::npos);
  l.kvHeads = 2;
  EXPECT_EQ(gyreSeqHeads(&l, 4, 4, &q, nullptr, nullptr, nullptr), gyreInvalidArgument);
  EXPECT_NE(std::string(gyreGetLastError(nullptr)).find("rank 4"), std::string::npos)
      << gyreGetLastError(nullptr);
  EXPECT_EQ(gyreSeqHeads(nullptr, 4, 0, &q, nullptr, nullptr, nullptr), gyreInvalidArgument);
}

// ---- the exchanges against a one-rank reference ----

// A test shape for n ranks. tokens empty: `each` per rank (layout->tokens NULL).
struct Shape {
  std::string name;
  int heads, kvHeads;
  size_t dim;
  int parts;
  std::vector<size_t> tokens;
  size_t each = 0;
  bool large = false;  // only a few dtypes (the time it takes)
};

std::vector<Shape> shapesFor(int n) {
  std::vector<size_t> varied(n), fewHeads(n);
  for (int r = 0; r < n; ++r) {
    varied[r] = (3 * static_cast<size_t>(r) + 2) % 5 + 1;
    fewHeads[r] = static_cast<size_t>(r) + 1;
  }
  varied[n > 1 ? 1 : 0] = 0;  // a rank with no tokens
  const int kvBelow = std::max(1, n / 2);
  return {
      {"equal_heads_divisible", 2 * n, 0, 4, gyreSeqQ, {}, 3},
      {"heads_not_divisible", 2 * n + 1, 0, 3, gyreSeqQ, {}, 2},
      {"packed_qkv", n + 2, 0, 2, gyreSeqQKV, {}, 2},
      {"gqa_kv_below_ranks", 2 * n, kvBelow, 3, gyreSeqQKV, {}, 2},
      {"gqa_kv_above_ranks", 2 * (n + 1), n + 1, 3, gyreSeqQKV, {}, 2},
      {"mqa_varied_tokens_one_rank_empty", n + 1, 1, 5, gyreSeqQKV, varied},
      {"fewer_heads_than_ranks", std::max(1, n / 2), 1, 2, gyreSeqQKV, fewHeads},
      {"kv_alone_gqa", 2 * (n + 1), n + 1, 2, gyreSeqK | gyreSeqV, {}, 2},
      {"k_alone_varied_tokens", 4, 2, 3, gyreSeqK, varied},
      {"large_pieces", 2 * n + 1, 1, 64, gyreSeqQKV, {}, 700, true},
      // Runs of 2 KiB and more: over TCP they go through sendmsg and readv
      // as they lie (with a replicated key/value head's run into scratch).
      {"wide_heads", 2 * n, 0, 512, gyreSeqQ, {}, 40, true},
      {"wide_gqa_varied_tokens", 2 * (n + 1), n + 1, 512, gyreSeqQKV, varied, 0, true},
  };
}

// The shape resolved: each rank's tokens and first token, the sequence
// side's heads per token, and which of them each rank's share holds.
struct Resolved {
  gyreSeqLayout_t layout{};
  std::vector<size_t> tokens, first;
  size_t width = 0;
  std::vector<std::vector<size_t>> cols;  // by rank: the sequence side's head of each share head
  std::vector<int> holders;               // by sequence-side head: how many ranks hold it
};

Resolved resolve(const Shape& s, int n) {
  Resolved v;
  v.tokens = s.tokens.empty() ? std::vector<size_t>(n, s.each) : s.tokens;
  v.first.assign(n + 1, 0);
  for (int r = 0; r < n; ++r) v.first[r + 1] = v.first[r] + v.tokens[r];
  const int kv = s.kvHeads ? s.kvHeads : s.heads;
  v.layout = gyreSeqLayout_t{s.heads, s.kvHeads, s.dim, s.parts, v.first[n], nullptr};
  const size_t qAt = 0, kAt = (s.parts & gyreSeqQ) ? s.heads : 0,
               vAt = kAt + ((s.parts & gyreSeqK) ? kv : 0);
  v.width = vAt + ((s.parts & gyreSeqV) ? kv : 0);
  v.holders.assign(v.width, 0);
  for (int r = 0; r < n; ++r) {
    const Share sh = shareOf(v.layout, n, r);
    std::vector<size_t> c;
    if (s.parts & gyreSeqQ)
      for (int j = 0; j < sh.qCount; ++j) c.push_back(qAt + sh.qFirst + j);
    for (auto [bit, at] : {std::pair{gyreSeqK, kAt}, {gyreSeqV, vAt}})
      if (s.parts & bit)
        for (int j = 0; j < sh.kvCount; ++j) c.push_back(at + sh.kvFirst + j);
    for (size_t w : c) ++v.holders[w];
    v.cols.push_back(c);
  }
  return v;
}

// An element's bytes: a hash of where it is, so that anything misplaced
// shows (and, as bits, every value a type has: NaNs too; copies keep them).
void hashedElement(unsigned char* out, size_t esz, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t x[4] = {a, b, c, d};
  uint64_t h = fnv1a(x, sizeof x);
  for (size_t i = 0; i < esz; ++i) {
    if (i % 8 == 0 && i) h = fnv1a(&h, sizeof h);
    out[i] = static_cast<unsigned char>(h >> (8 * (i % 8)));
  }
}

// v (a small integer) as type t stores it.
void storeSmall(unsigned char* out, gyreDataType_t t, int v) {
  switch (t) {
    case gyreInt8:
      *reinterpret_cast<int8_t*>(out) = static_cast<int8_t>(v);
      break;
    case gyreUint8:
      *out = static_cast<uint8_t>(v);
      break;
    case gyreInt32:
      std::memcpy(out, &v, 4);
      break;
    case gyreUint32:
      std::memcpy(out, &v, 4);
      break;
    case gyreInt64:
    case gyreUint64: {
      const int64_t w = v;
      std::memcpy(out, &w, 8);
      break;
    }
    case gyreFloat16: {
      const uint16_t h = kernels::floatToHalf(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      break;
    }
    case gyreBfloat16: {
      const uint16_t h = kernels::floatToBfloat16(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      break;
    }
    case gyreFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      break;
    }
    default: {
      const double f = v;
      std::memcpy(out, &f, 8);
    }
  }
}

constexpr size_t kGuard = 64;
constexpr unsigned char kFill = 0xA5;

struct RankRun {
  const char* transport;
  int nranks;
};

void PrintTo(const RankRun& r, std::ostream* os) {
  *os << r.transport << ", " << r.nranks << " ranks";
}

std::string runName(const testing::TestParamInfo<RankRun>& i) {
  return std::string(i.param.transport) + "_" + std::to_string(i.param.nranks);
}

const gyreDataType_t kTypes[] = {gyreInt8,   gyreUint8,   gyreInt32,   gyreUint32,  gyreInt64,
                                 gyreUint64, gyreFloat16, gyreFloat32, gyreFloat64, gyreBfloat16};

// One exchange each way of shape s in type t on this rank, checked. seed
// varies the data between calls; nonblocking: the gyreI... forms.
void checkShape(gyreComm_t comm, int me, int n, const Shape& s, gyreDataType_t t, uint64_t seed,
                bool nonblocking, Checker& check) {
  const Resolved v = resolve(s, n);
  gyreSeqLayout_t layout = v.layout;
  layout.tokens = s.tokens.empty() ? nullptr : v.tokens.data();
  const size_t esz = dtypeBytes(t), dim = s.dim, S = v.first[n], mine = v.tokens[me];
  const size_t share = v.cols[me].size();
  const std::string what = s.name + " " + dtypeLabel(t);

  // Seq to heads: the sequence side X[T][w][d] of the whole sequence is
  // hashed bytes; this rank's input is its tokens' rows of it.
  std::vector<unsigned char> in(mine * v.width * dim * esz),
      out(S * share * dim * esz + kGuard, kFill);
  for (size_t t2 = 0; t2 < mine; ++t2)
    for (size_t w = 0; w < v.width; ++w)
      for (size_t d = 0; d < dim; ++d)
        hashedElement(&in[((t2 * v.width + w) * dim + d) * esz], esz, seed, v.first[me] + t2, w, d);
  // (By reference: the request is set by the call in the argument before it.)
  auto wait = [&](gyreResult_t r, gyreRequest_t& req) {
    return r == gyreSuccess ? gyreWait(req) : r;
  };
  gyreRequest_t req = nullptr;
  gyreResult_t r = nonblocking
                       ? wait(gyreIseqToHeads(in.data(), out.data(), &layout, t, comm, &req), req)
                       : gyreSeqToHeads(in.data(), out.data(), &layout, t, comm, nullptr);
  if (!check.expectOk(r, "seq to heads, " + what)) return;
  std::vector<unsigned char> want(esz);
  size_t wrong = 0;
  std::string firstWrong;
  for (size_t T = 0; T < S; ++T)
    for (size_t j = 0; j < share; ++j)
      for (size_t d = 0; d < dim; ++d) {
        hashedElement(want.data(), esz, seed, T, v.cols[me][j], d);
        if (std::memcmp(&out[((T * share + j) * dim + d) * esz], want.data(), esz) && !wrong++)
          firstWrong = "token " + std::to_string(T) + ", share head " + std::to_string(j) +
                       ", element " + std::to_string(d);
      }
  for (size_t i = S * share * dim * esz; i < out.size(); ++i) wrong += out[i] != kFill;
  check.expect(!wrong, "seq to heads, " + what + ": " + std::to_string(wrong) +
                           " wrong bytes or elements, first " + firstWrong);

  // Heads to seq: rank q's head side Y_q[T][j][d]; a head several ranks
  // hold gets small integers (their sum is exact in every type), any other
  // hashed bytes. The reference adds the holders' copies in rank order.
  std::vector<unsigned char> back(S * share * dim * esz),
      seqOut(mine * v.width * dim * esz + kGuard, kFill);
  auto headSide = [&](unsigned char* at, int q, size_t T, size_t j, size_t d) {
    const size_t w = v.cols[q][j];
    if (v.holders[w] > 1) {
      storeSmall(at, t, static_cast<int>(fnv1a(&T, sizeof T, seed + 31 * w + 7 * d + q) % 7));
    } else {
      hashedElement(at, esz, seed + 1, T, w, d);
    }
  };
  for (size_t T = 0; T < S; ++T)
    for (size_t j = 0; j < share; ++j)
      for (size_t d = 0; d < dim; ++d)
        headSide(&back[((T * share + j) * dim + d) * esz], me, T, j, d);
  r = nonblocking ? wait(gyreIheadsToSeq(back.data(), seqOut.data(), &layout, t, comm, &req), req)
                  : gyreHeadsToSeq(back.data(), seqOut.data(), &layout, t, comm, nullptr);
  if (!check.expectOk(r, "heads to seq, " + what)) return;
  wrong = 0;
  for (size_t t2 = 0; t2 < mine; ++t2) {
    const size_t T = v.first[me] + t2;
    for (size_t w = 0; w < v.width; ++w)
      for (size_t d = 0; d < dim; ++d) {
        if (v.holders[w] > 1) {
          int sum = 0;
          for (int q = 0; q < n; ++q)
            for (size_t j = 0; j < v.cols[q].size(); ++j)
              if (v.cols[q][j] == w)
                sum += static_cast<int>(fnv1a(&T, sizeof T, seed + 31 * w + 7 * d + q) % 7);
          storeSmall(want.data(), t, sum);
        } else {
          hashedElement(want.data(), esz, seed + 1, T, w, d);
        }
        if (std::memcmp(&seqOut[((t2 * v.width + w) * dim + d) * esz], want.data(), esz) &&
            !wrong++)
          firstWrong = "token " + std::to_string(T) + ", head " + std::to_string(w) + " (" +
                       std::to_string(v.holders[w]) + " holders), element " + std::to_string(d);
      }
  }
  for (size_t i = mine * v.width * dim * esz; i < seqOut.size(); ++i) wrong += seqOut[i] != kFill;
  check.expect(!wrong, "heads to seq, " + what + ": " + std::to_string(wrong) +
                           " wrong elements, first " + firstWrong);
}

class SeqExchange : public testing::TestWithParam<RankRun> {};

TEST_P(SeqExchange, EveryShapeAndTypeBothWaysIsBitExact) {
  const RankRun run = GetParam();
  RunOptions o;
  o.timeoutSec = 240;
  RunOutcome out = runRanks(
      run.nranks,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, run.transport);
        if (!comm) return 1;
        uint64_t seed = 0;
        for (const Shape& s : shapesFor(n))
          for (gyreDataType_t t : kTypes) {
            if (s.large && t != gyreFloat32 && t != gyreBfloat16 && t != gyreInt8) continue;
            checkShape(comm, rank, n, s, t, ++seed, false, check);
          }
        // The same calls again (their plans reused), and nonblocking.
        for (const Shape& s : shapesFor(n)) {
          if (s.large) continue;
          checkShape(comm, rank, n, s, gyreFloat32, ++seed, false, check);
          checkShape(comm, rank, n, s, gyreFloat16, ++seed, true, check);
        }
        gyreCommDestroy(comm);
        return check.failures() ? 1 : 0;
      },
      o);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

std::vector<RankRun> runs() {
  std::vector<RankRun> v;
  for (const char* t : {"shm", "tcp"})
    for (int n : {1, 2, 3, 4, 8}) v.push_back({t, n});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ranks, SeqExchange, testing::ValuesIn(runs()), runName);

// ---- on a stream: staged through host memory, as gyreAllToAllv is ----

class SeqExchangeOnStream : public testing::TestWithParam<const char*> {};

TEST_P(SeqExchangeOnStream, DeviceBuffersAreStagedAndExact) {
  const char* transport = GetParam();
  RunOutcome out = runRanks(3, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    EmulatedGpu gpu;
    gyreComm_t comm = initRank(rank, n, id, transport);
    if (!comm) return 1;
    device::Stream s = gpu.emu.createStream(0);
    // 5 heads, one key/value head, q+k+v; 4 tokens each; head dim 3.
    const int heads = 5;
    const size_t dim = 3, each = 4, S = each * n, width = heads + 2;
    gyreSeqLayout_t l{heads, 1, dim, gyreSeqQKV, S, nullptr};
    const Share sh = shareOf(l, n, rank);
    const size_t share = sh.qCount + 2 * sh.kvCount;
    auto value = [](size_t T, size_t w, size_t d) {
      return static_cast<float>(T * 100 + w * 10 + d);
    };
    std::vector<float> mine(each * width * dim);
    for (size_t t = 0; t < each; ++t)
      for (size_t w = 0; w < width; ++w)
        for (size_t d = 0; d < dim; ++d)
          mine[(t * width + w) * dim + d] = value(rank * each + t, w, d);
    float* in = gpu.floats(mine.size());
    float* byHeads = gpu.floats(S * share * dim);
    float* back = gpu.floats(mine.size());
    gpu.fill(s, in, mine);
    check.expectOk(gyreSeqToHeads(in, byHeads, &l, gyreFloat32, comm, s),
                   "seq to heads on a stream");
    const std::vector<float> got = gpu.read(s, byHeads, S * share * dim);
    size_t wrong = 0;
    for (size_t T = 0; T < S; ++T)
      for (size_t j = 0; j < share; ++j) {
        const size_t w = j < size_t(sh.qCount) ? sh.qFirst + j
                         : j < size_t(sh.qCount + sh.kvCount)
                             ? heads + sh.kvFirst + (j - sh.qCount)
                             : heads + 1 + sh.kvFirst + (j - sh.qCount - sh.kvCount);
        for (size_t d = 0; d < dim; ++d) wrong += got[(T * share + j) * dim + d] != value(T, w, d);
      }
    check.expect(!wrong, std::to_string(wrong) + " wrong elements after seq to heads on a stream");
    // Back, queries only (no sums): the input again.
    gyreSeqLayout_t q{heads, 1, dim, gyreSeqQ, S, nullptr};
    std::vector<float> qHeads(S * sh.qCount * dim);
    for (size_t T = 0; T < S; ++T)
      for (int j = 0; j < sh.qCount; ++j)
        for (size_t d = 0; d < dim; ++d)
          qHeads[(T * sh.qCount + j) * dim + d] = value(T, sh.qFirst + j, d);
    float* qIn = gpu.floats(qHeads.size() + 1);
    gpu.fill(s, qIn, qHeads);
    check.expectOk(gyreHeadsToSeq(qIn, back, &q, gyreFloat32, comm, s), "heads to seq on a stream");
    const std::vector<float> seq = gpu.read(s, back, each * heads * dim);
    wrong = 0;
    for (size_t t = 0; t < each; ++t)
      for (int w = 0; w < heads; ++w)
        for (size_t d = 0; d < dim; ++d)
          wrong += seq[(t * heads + w) * dim + d] != value(rank * each + t, w, d);
    check.expect(!wrong, std::to_string(wrong) + " wrong elements after heads to seq on a stream");
    gyreCommDestroy(comm);
    return check.failures() ? 1 : 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Ways, SeqExchangeOnStream, testing::Values("shm", "tcp"));

}  // namespace
}  // namespace gyre::test
