// Compressed collectives (docs/compression.md) in real rank processes:
// every codec, 1 to 5 ranks, shared memory and TCP, counts from 0 through
// chunk boundaries to several pieces. Each rank computes what every rank
// sends, from inputs it can regenerate, with the codec kernels, and the
// call's result must equal that reference bit for bit (the arithmetic is
// deterministic: the owner adds in rank order in float32), so every rank
// also has the same bits. Compressors carry error feedback across calls,
// which the reference carries alike. Bad input is refused with a named
// error, and ranks using different codecs are told so on every rank.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/compressed.h"
#include "kernels/cpu/codec.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

using kernels::Codec;
using kernels::DType;

DType dtypeOf(gyreDataType_t t) { return static_cast<DType>(t); }
size_t sizeOf(gyreDataType_t t) { return kernels::dtypeSize(dtypeOf(t)); }

// Rank r's input value i in call `call`, as float32: spread over about
// [-8, 8] with a bias per rank, so chunks have different ranges and signs.
float valueOf(int r, size_t i, int call) {
  uint64_t h = (static_cast<uint64_t>(r) + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xBF58476D1CE4E5B9ull ^
               (static_cast<uint64_t>(call) + 7) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  h *= 0xD6E8FEB86969F5Dull;
  h ^= h >> 29;
  return static_cast<float>(static_cast<int64_t>(h % 16001) - 8000) / 1000.0f + 0.25f * static_cast<float>(r);
}

// n values of rank r's input for `call`, from value `first`, in type t.
std::vector<unsigned char> inputOf(gyreDataType_t t, int r, size_t first, size_t n, int call) {
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = valueOf(r, first + i, call);
  std::vector<unsigned char> out(n * sizeOf(t));
  if (n) kernels::decode(Codec::None, f.data(), n, dtypeOf(t), out.data(), false);  // float32 -> t
  return out;
}

// What one rank's call should produce, computed as the plan does: block by
// block (the codecs' chunks restart at each block, as the plan's pieces
// keep them), each contribution encoded by its sender, added in rank order
// at the owner in float32. Residuals: per rank, of its input (and, for
// AllReduce, of its block of the result), kept across calls when
// feedback is on.
struct Reference {
  gyreDataType_t t;
  Codec codec;
  int n;
  bool feedback;
  std::vector<std::vector<float>> inputResidual, resultResidual;  // by rank

  Reference(gyreDataType_t type, Codec c, int ranks, bool fb)
      : t(type), codec(c), n(ranks), feedback(fb), inputResidual(ranks), resultResidual(ranks) {}

  float* residual(std::vector<float>& r, size_t size, size_t at) {
    if (!feedback) return nullptr;
    if (r.size() != size) r.assign(size, 0.0f);
    return r.data() + at;
  }
  // Rank r's block [begin, begin + len) of its input (whose size is inputSize), as its owner receives it
  // (decoded), added to sum (or, first, placed there).
  void contribute(int r, int owner, size_t begin, size_t len, size_t inputSize, int call, std::vector<float>& sum,
                  bool first) {
    const std::vector<unsigned char> in = inputOf(t, r, begin, len, call);
    if (r == owner) {
      kernels::widen(dtypeOf(t), in.data(), len, sum.data(), !first);
      return;
    }
    std::vector<unsigned char> msg(kernels::messageBytes(codec, len));
    kernels::encode(codec, dtypeOf(t), in.data(), len, msg.data(), residual(inputResidual[r], inputSize, begin));
    kernels::decode(codec, msg.data(), len, DType::Float32, sum.data(), !first);
  }
  std::vector<float> sumOf(int owner, size_t begin, size_t len, size_t inputSize, int call, bool avg) {
    std::vector<float> sum(len);
    for (int r = 0; r < n; ++r) contribute(r, owner, begin, len, inputSize, call, sum, r == 0);
    if (avg) kernels::divideBy(sum.data(), len, static_cast<uint32_t>(n));
    return sum;
  }

  std::vector<unsigned char> allReduce(size_t count, int call, bool avg) {
    std::vector<unsigned char> out(count * sizeOf(t));
    if (n == 1) return inputOf(t, 0, 0, count, call);
    const collectives::CodecBlocks blocks{count, n};
    for (int j = 0; j < n; ++j) {
      const size_t b = blocks.begin(j), len = blocks.size(j);
      if (!len) continue;
      std::vector<float> sum = sumOf(j, b, len, count, call, avg);
      std::vector<unsigned char> msg(kernels::messageBytes(codec, len));
      kernels::encode(codec, DType::Float32, sum.data(), len, msg.data(), residual(resultResidual[j], len, 0));
      kernels::decode(codec, msg.data(), len, dtypeOf(t), out.data() + b * sizeOf(t), false);
    }
    return out;
  }
  // The hierarchical plan's result (compressed.cc), ranks r on host r / L:
  // each shard summed within a host in float32 (rank order), the host sums
  // of each block encoded by its host's rank and added at the block's owner
  // in host order, the result encoded once.
  std::vector<unsigned char> allReduceHierarchical(size_t count, int call, bool avg, int L) {
    const int H = n / L;
    std::vector<unsigned char> out(count * sizeOf(t));
    const collectives::CodecBlocks shards{count, L};
    for (int l = 0; l < L; ++l) {
      const size_t s0 = shards.begin(l);
      const collectives::CodecBlocks blocks{shards.size(l), H};
      for (int j = 0; j < H; ++j) {
        const size_t b = s0 + blocks.begin(j), len = blocks.size(j);
        if (!len) continue;
        std::vector<float> sum(len);
        for (int h = 0; h < H; ++h) {
          std::vector<float> host(len);
          for (int q = 0; q < L; ++q) {
            const std::vector<unsigned char> in = inputOf(t, h * L + q, b, len, call);
            kernels::widen(dtypeOf(t), in.data(), len, host.data(), q > 0);
          }
          if (h == j) {
            kernels::widen(DType::Float32, host.data(), len, sum.data(), h > 0);
            continue;
          }
          std::vector<unsigned char> msg(kernels::messageBytes(codec, len));
          kernels::encode(codec, DType::Float32, host.data(), len, msg.data(),
                          residual(inputResidual[h * L + l], count, b));
          kernels::decode(codec, msg.data(), len, DType::Float32, sum.data(), h > 0);
        }
        if (avg) kernels::divideBy(sum.data(), len, static_cast<uint32_t>(n));
        std::vector<unsigned char> msg(kernels::messageBytes(codec, len));
        kernels::encode(codec, DType::Float32, sum.data(), len, msg.data(), residual(resultResidual[j * L + l], count, b));
        kernels::decode(codec, msg.data(), len, dtypeOf(t), out.data() + b * sizeOf(t), false);
      }
    }
    return out;
  }
  // Rank `me`'s output of a ReduceScatter of recvcount each.
  std::vector<unsigned char> reduceScatter(int me, size_t recvcount, int call, bool avg) {
    if (n == 1) return inputOf(t, 0, 0, recvcount, call);
    std::vector<unsigned char> out(recvcount * sizeOf(t));
    for (int j = 0; j < n; ++j) {  // every block, for every rank's residuals
      std::vector<float> sum = sumOf(j, j * recvcount, recvcount, recvcount * n, call, avg);
      if (j == me && recvcount) kernels::decode(Codec::None, sum.data(), recvcount, dtypeOf(t), out.data(), false);
    }
    return out;
  }
  // Rank r's input for AllGather is valueOf(r, i) for i < sendcount.
  std::vector<unsigned char> allGather(size_t sendcount, int call) {
    std::vector<unsigned char> out(sendcount * n * sizeOf(t));
    for (int r = 0; r < n; ++r) {
      const std::vector<unsigned char> in = inputOf(t, r, 0, sendcount, call);
      if (n == 1) return in;
      std::vector<unsigned char> msg(kernels::messageBytes(codec, sendcount));
      kernels::encode(codec, dtypeOf(t), in.data(), sendcount, msg.data(),
                      residual(inputResidual[r], sendcount, 0));
      kernels::decode(codec, msg.data(), sendcount, dtypeOf(t), out.data() + r * sendcount * sizeOf(t), false);
    }
    return out;
  }
};

// The first element where got and want differ, as a sentence; empty if none.
std::string firstDifference(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want,
                            gyreDataType_t t) {
  if (got.size() != want.size()) return "sizes differ";
  const size_t es = sizeOf(t);
  for (size_t i = 0; i < got.size() / es; ++i)
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) {
      float g = 0, w = 0;
      kernels::widen(dtypeOf(t), got.data() + i * es, 1, &g, false);
      kernels::widen(dtypeOf(t), want.data() + i * es, 1, &w, false);
      return "element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " + std::to_string(w);
    }
  return "";
}

struct Case {
  const char* transport;
  Codec codec;
  int ranks;
};

std::string nameOf(const ::testing::TestParamInfo<Case>& i) {
  return std::string(i.param.transport) + "_" + kernels::codecName(i.param.codec) + "_" +
         std::to_string(i.param.ranks) + "ranks";
}

class CompressedCollectives : public ::testing::TestWithParam<Case> {};

// Counts: none, one, a prime, around a chunk, several chunks spread over
// ranks, and (at 2 ranks) more than one piece per block.
std::vector<size_t> countsFor(int n) {
  std::vector<size_t> c = {0, 1, 13, 4095, 4096, 4097, 3 * 4096 * static_cast<size_t>(n) + 77};
  if (n == 2) c.push_back(600011);
  return c;
}

TEST_P(CompressedCollectives, EveryRankGetsTheReferencesBits) {
  const Case p = GetParam();
  RunOptions o;
  o.timeoutSec = 240;
  RunOutcome out = runRanks(
      p.ranks,
      [p](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, p.transport);
        if (!comm) return 1;
        const gyreCodec_t codec = static_cast<gyreCodec_t>(p.codec);
        const gyreDataType_t types[] = {gyreFloat32, gyreBfloat16, gyreFloat16};
        int call = 0;
        for (size_t count : countsFor(n)) {
          for (gyreDataType_t t : types) {
            if (t != gyreFloat32 && count > 5000) continue;  // the 16-bit types at small counts only
            const std::string what = std::string(kernels::codecName(p.codec)) + ", " + std::to_string(count) +
                                     " x type " + std::to_string(t);
            const size_t es = sizeOf(t);
            const bool avg = call % 2 == 1;
            Reference ref(t, p.codec, n, false);
            // AllReduce, out of place and (next call) in place.
            std::vector<unsigned char> in = inputOf(t, rank, 0, count, call), got(count * es);
            if (check.expectOk(gyreAllReduceCodec(in.data(), got.data(), count, t, avg ? gyreAvg : gyreSum, codec,
                                                  comm, nullptr),
                               "allreduce " + what)) {
              const std::string d = firstDifference(got, ref.allReduce(count, call, avg), t);
              check.expect(d.empty(), "allreduce " + what + ": " + d);
            }
            ++call;
            got = inputOf(t, rank, 0, count, call);
            if (check.expectOk(gyreAllReduceCodec(got.data(), got.data(), count, t, gyreSum, codec, comm, nullptr),
                               "allreduce in place " + what)) {
              const std::string d = firstDifference(got, ref.allReduce(count, call, false), t);
              check.expect(d.empty(), "allreduce in place " + what + ": " + d);
            }
            ++call;
            // ReduceScatter of count each, and AllGather of count each.
            const size_t all = count * n;
            in.assign(all * es, 0);
            for (int j = 0; j < n; ++j) {
              const std::vector<unsigned char> part = inputOf(t, rank, j * count, count, call);
              std::copy(part.begin(), part.end(), in.begin() + j * count * es);
            }
            got.assign(count * es, 0);
            if (check.expectOk(gyreReduceScatterCodec(in.data(), got.data(), count, t, gyreSum, codec, comm, nullptr),
                               "reducescatter " + what)) {
              const std::string d = firstDifference(got, ref.reduceScatter(rank, count, call, false), t);
              check.expect(d.empty(), "reducescatter " + what + ": " + d);
            }
            ++call;
            in = inputOf(t, rank, 0, count, call);
            got.assign(all * es, 0);
            if (check.expectOk(gyreAllGatherCodec(in.data(), got.data(), count, t, codec, comm, nullptr),
                               "allgather " + what)) {
              const std::string d = firstDifference(got, ref.allGather(count, call), t);
              check.expect(d.empty(), "allgather " + what + ": " + d);
            }
            ++call;
          }
        }
        check.expectOk(gyreCommDestroy(comm), "destroy");
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// A compressor's residuals carry over: three calls of each operation, each
// against the reference that keeps the same residuals.
TEST_P(CompressedCollectives, CompressorsCarryErrorFeedbackAcrossCalls) {
  const Case p = GetParam();
  RunOptions o;
  o.timeoutSec = 240;
  RunOutcome out = runRanks(
      p.ranks,
      [p](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, p.transport);
        if (!comm) return 1;
        const gyreCodec_t codec = static_cast<gyreCodec_t>(p.codec);
        const gyreDataType_t t = gyreFloat32;
        const size_t count = 2 * 4096 * static_cast<size_t>(n) + 333, per = count / n;
        gyreCompressor_t ar = nullptr, rs = nullptr, ag = nullptr;
        check.expectOk(gyreCompressorCreate(&ar, comm, codec, count, t, GYRE_COMPRESSOR_ERROR_FEEDBACK), "create");
        check.expectOk(gyreCompressorCreate(&rs, comm, codec, per * n, t, GYRE_COMPRESSOR_ERROR_FEEDBACK), "create");
        check.expectOk(gyreCompressorCreate(&ag, comm, codec, per * n, t, GYRE_COMPRESSOR_ERROR_FEEDBACK), "create");
        Reference refAr(t, p.codec, n, true), refRs(t, p.codec, n, true), refAg(t, p.codec, n, true);
        for (int call = 0; call < 3; ++call) {
          const std::string what = std::string(kernels::codecName(p.codec)) + " call " + std::to_string(call);
          std::vector<unsigned char> in = inputOf(t, rank, 0, count, call), got(count * sizeof(float));
          if (check.expectOk(gyreCompressedAllReduce(in.data(), got.data(), count, t, gyreAvg, ar, comm, nullptr),
                             "allreduce " + what)) {
            const std::string d = firstDifference(got, refAr.allReduce(count, call, true), t);
            check.expect(d.empty(), "allreduce " + what + ": " + d);
          }
          in = inputOf(t, rank, 0, per * n, call);
          got.assign(per * sizeof(float), 0);
          if (check.expectOk(gyreCompressedReduceScatter(in.data(), got.data(), per, t, gyreSum, rs, comm, nullptr),
                             "reducescatter " + what)) {
            const std::string d = firstDifference(got, refRs.reduceScatter(rank, per, call, false), t);
            check.expect(d.empty(), "reducescatter " + what + ": " + d);
          }
          in = inputOf(t, rank, 0, per, call);
          got.assign(per * n * sizeof(float), 0);
          if (check.expectOk(gyreCompressedAllGather(in.data(), got.data(), per, t, ag, comm, nullptr),
                             "allgather " + what)) {
            const std::string d = firstDifference(got, refAg.allGather(per, call), t);
            check.expect(d.empty(), "allgather " + what + ": " + d);
          }
        }
        for (gyreCompressor_t c : {ar, rs, ag}) check.expectOk(gyreCompressorDestroy(c), "destroy compressor");
        check.expectOk(gyreCommDestroy(comm), "destroy");
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const char* tr : {"shm", "tcp"})
    for (Codec c : {Codec::Fp16, Codec::Bf16, Codec::Int8, Codec::OneBit})
      for (int n = 1; n <= 5; ++n) {
        if (std::string(tr) == "tcp" && (n == 1 || n == 5)) continue;  // shm covers them
        cases.push_back({tr, c, n});
      }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressedCollectives, ::testing::ValuesIn(allCases()), nameOf);

// Ranks on several hosts (GYRE_HOSTID), several on each: the hierarchical
// plan (full precision within a host, over shared memory; the codec
// between hosts, over TCP), with error feedback carried over three calls.
struct HostsCase {
  Codec codec;
  int hosts, perHost;
};

class HierarchicalCompression : public ::testing::TestWithParam<HostsCase> {};

TEST_P(HierarchicalCompression, EveryRankGetsTheReferencesBits) {
  const HostsCase p = GetParam();
  RunOptions o;
  o.timeoutSec = 240;
  RunOutcome out = runRanks(
      p.hosts * p.perHost,
      [p](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        const std::string host = "compression-host-" + std::to_string(rank / p.perHost);
        setenv("GYRE_HOSTID", host.c_str(), 1);
        gyreComm_t comm = initRank(rank, n, id);
        if (!comm) return 1;
        const gyreCodec_t codec = static_cast<gyreCodec_t>(p.codec);
        int call = 0;
        for (gyreDataType_t t : {gyreFloat32, gyreBfloat16}) {
          for (size_t count : {size_t{0}, size_t{1}, size_t{4097}, size_t{5} * 4096 * n + 3, size_t{700001}}) {
            if (t != gyreFloat32 && count > 5000) continue;
            const std::string what = std::string(kernels::codecName(p.codec)) + ", " + std::to_string(count) +
                                     " x type " + std::to_string(t);
            Reference ref(t, p.codec, n, true);
            gyreCompressor_t z = nullptr;
            check.expectOk(gyreCompressorCreate(&z, comm, codec, count, t, GYRE_COMPRESSOR_ERROR_FEEDBACK), "create");
            for (int round = 0; round < 3; ++round, ++call) {
              const bool avg = round == 1;
              std::vector<unsigned char> in = inputOf(t, rank, 0, count, call), got(count * sizeOf(t));
              unsigned char* dst = round == 2 ? in.data() : got.data();  // the last in place
              if (check.expectOk(gyreCompressedAllReduce(in.data(), dst, count, t, avg ? gyreAvg : gyreSum, z, comm,
                                                         nullptr),
                                 "allreduce " + what)) {
                std::vector<unsigned char> result(dst, dst + count * sizeOf(t));
                const std::string d = firstDifference(result, ref.allReduceHierarchical(count, call, avg, p.perHost), t);
                check.expect(d.empty(), "allreduce " + what + " round " + std::to_string(round) + ": " + d);
              }
            }
            check.expectOk(gyreCompressorDestroy(z), "destroy compressor");
          }
        }
        check.expectOk(gyreCommDestroy(comm), "destroy");
        return check.failures() ? 1 : 0;
      },
      o);
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Hosts, HierarchicalCompression,
    ::testing::Values(HostsCase{Codec::Int8, 2, 2}, HostsCase{Codec::OneBit, 2, 2}, HostsCase{Codec::Fp16, 2, 3},
                      HostsCase{Codec::Bf16, 3, 2}, HostsCase{Codec::Int8, 2, 3}),
    [](const ::testing::TestParamInfo<HostsCase>& i) {
      return std::string(kernels::codecName(i.param.codec)) + "_" + std::to_string(i.param.hosts) + "hosts_" +
             std::to_string(i.param.perHost) + "each";
    });

// Arguments compression cannot take: a named invalid-argument error, and
// the communicator stays usable.
TEST(CompressedCollectivesBadInput, IsRefusedByName) {
  RunOutcome out = runRanks(1, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm");
    if (!comm) return 1;
    std::vector<float> a(64, 1.0f), b(64);
    auto refused = [&](gyreResult_t r, const char* needle, const std::string& what) {
      const std::string msg = gyreGetLastError(comm);
      check.expect(r == gyreInvalidArgument, what + ": result " + std::to_string(r));
      check.expect(msg.find(needle) != std::string::npos, what + ": message '" + msg + "' lacks '" + needle + "'");
    };
    refused(gyreAllReduceCodec(a.data(), b.data(), 16, gyreInt32, gyreSum, gyreCodecInt8, comm, nullptr),
            "float32, float16 or bfloat16", "int32 with a codec");
    refused(gyreAllReduceCodec(a.data(), b.data(), 16, gyreFloat32, gyreMax, gyreCodecFp16, comm, nullptr),
            "gyreSum or gyreAvg", "max with a codec");
    refused(gyreAllReduceCodec(a.data(), b.data(), 16, gyreFloat32, gyreSum, static_cast<gyreCodec_t>(9), comm,
                               nullptr),
            "not a gyreCodec_t", "codec 9");
    refused(gyreReduceScatterCodec(a.data(), b.data(), 16, gyreFloat64, gyreSum, gyreCodecBf16, comm, nullptr),
            "float32, float16 or bfloat16", "float64 reducescatter with a codec");
    gyreCompressor_t z = nullptr;
    refused(gyreCompressorCreate(&z, comm, gyreCodecInt8, 64, gyreInt8, 0), "float32, float16 or bfloat16",
            "an int8 compressor");
    refused(gyreCompressorCreate(&z, comm, gyreCodecInt8, 64, gyreFloat32, 8), "flags", "bad flags");
    check.expectOk(gyreCompressorCreate(&z, comm, gyreCodecOneBit, 64, gyreFloat32, GYRE_COMPRESSOR_ERROR_FEEDBACK),
                   "create");
    refused(gyreCompressedAllReduce(a.data(), b.data(), 32, gyreFloat32, gyreSum, z, comm, nullptr), "tensor of 64",
            "another count");
    refused(gyreCompressedAllReduce(a.data(), b.data(), 64, gyreBfloat16, gyreSum, z, comm, nullptr),
            "made for float32", "another type");
    refused(gyreCompressedAllReduce(a.data(), b.data(), 64, gyreFloat32, gyreSum, nullptr, comm, nullptr),
            "compressor is NULL", "no compressor");
    // Another communicator (a second one-rank world).
    gyreUniqueId other;
    gyreComm_t comm2 = nullptr;
    if (check.expectOk(gyreGetUniqueId(&other), "id") && check.expectOk(gyreCommInitRank(&comm2, 1, other, 0), "init")) {
      refused(gyreCompressedAllReduce(a.data(), b.data(), 64, gyreFloat32, gyreSum, z, comm2, nullptr),
              "another communicator", "another communicator");
      check.expectOk(gyreCommDestroy(comm2), "destroy the second");
    }
    check.expectOk(gyreCompressedAllReduce(a.data(), b.data(), 64, gyreFloat32, gyreSum, z, comm, nullptr),
                   "the right call still runs");
    check.expect(b[5] == 1.0f, "one rank: the values as they are");
    check.expectOk(gyreCompressorDestroy(z), "destroy compressor");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures() ? 1 : 0;
  });
  ASSERT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Ranks that disagree on the codec (or on compressing at all) fail with
// an error naming the codecs, on every rank (the rank that sees it first,
// and the others through its failure notice), instead of misreading bytes.
TEST(CompressedCollectivesMismatch, DifferentCodecsAreNamedOnEveryRank) {
  for (int variant = 0; variant < 2; ++variant) {
    RunOptions o;
    o.timeoutSec = 120;
    RunOutcome out = runRanks(
        3,
        [variant](int rank, int n, const gyreUniqueId& id) {
          Checker check(rank);
          gyreComm_t comm = initRank(rank, n, id, "tcp", 20000);
          if (!comm) return 1;
          std::vector<float> a(50000, 1.0f), b(50000);
          // Variant 0: rank 1 uses fp16 where the others use int8; variant
          // 1: rank 1 makes the plain call.
          gyreResult_t r;
          if (rank == 1 && variant == 1) {
            r = gyreAllReduce(a.data(), b.data(), a.size(), gyreFloat32, gyreSum, comm, nullptr);
          } else {
            const gyreCodec_t codec = rank == 1 ? gyreCodecFp16 : gyreCodecInt8;
            r = gyreAllReduceCodec(a.data(), b.data(), a.size(), gyreFloat32, gyreSum, codec, comm, nullptr);
          }
          const std::string msg = gyreGetLastError(nullptr);
          check.expect(r != gyreSuccess, "the call fails");
          check.expect(msg.find("compressed as") != std::string::npos, "message names the codecs: " + msg);
          gyreCommDestroy(comm);
          return check.failures() ? 1 : 0;
        },
        o);
    ASSERT_FALSE(out.timedOut) << out.describe();
    EXPECT_TRUE(out.allSucceeded()) << out.describe();
  }
}

}  // namespace
}  // namespace gyre::test
