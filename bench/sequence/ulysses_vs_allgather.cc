// gyre-ulysses-ab: one attention layer's forward communication two ways, for
// a sequence of S tokens split over P ranks (S/P each), alternated call for
// call in the same processes (docs/PERFORMANCE-sequence.md, "Ulysses against
// an all-gathered sequence"):
//   ulysses    gyreSeqToHeads of the packed Q,K,V, then (attention's place:
//              nothing is computed) gyreHeadsToSeq of the output (parts q)
//   allgather  each rank keeps its queries and gyreAllGather's every token's
//              K and V (packed per token, one call); no output exchange
//
//   gyre-ulysses-ab [--ranks N] [--transport shm|tcp] [--heads 16] [--kv-heads 0]
//                   [--head-dim 128] [--dtype bf16|fp16|fp32] [--seq 4K,16K]
//                   [--rounds 5] [--calls 1] [--iface NAME] [--alltoall 1]
//
// --ranks N forks N ranks here; without it each process is one rank of a
// job started from the environment (GYRE_RANK, GYRE_WORLD_SIZE, GYRE_COMM_ID:
// tools/netns_ulysses_bench.sh starts one per network namespace). --iface
// NAME: each rank also counts what left its interface NAME
// (/sys/class/net/NAME/statistics/tx_bytes, which `ip netns exec` shows for
// the rank's own namespace) around each method's calls, so the bytes the
// formulas predict are checked against what the link carried.
// --alltoall 1 adds a control, "alltoall": two contiguous gyreAllToAll
// calls of exactly Ulysses' bytes (heads must then divide evenly among the
// ranks, key/value heads too), which tells the all-to-all pattern's cost on
// the links apart from the strided exchanges'.
//
// Every round runs both methods (which goes first alternates), each over
// --calls layers between two barriers (so one method's bytes cannot trail
// into the other's count); a layer's time is the slowest rank's mean. The
// table gives medians over the rounds and the median of the per-round ratio
// allgather / ulysses. Before timing, one layer of each is checked exactly
// against the pattern the inputs were filled with.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/fork_ranks.h"
#include "gyre/gyre.h"

namespace {

struct Args {
  int ranks = 0, heads = 16, kvHeads = 0, rounds = 5, calls = 1;
  bool control = false;  // --alltoall 1: a third method, the control
  size_t headDim = 128;
  std::string transport, dtype = "bf16", iface;
  std::vector<size_t> seqs = {4096, 16384};
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gyre-ulysses-ab: %s\nusage: gyre-ulysses-ab [--ranks N] [--transport shm|tcp] "
               "[--heads H] [--kv-heads KV] [--head-dim D] [--dtype bf16|fp16|fp32] "
               "[--seq 4K,16K] [--rounds R] [--calls C] [--iface NAME] [--alltoall 1]\n",
               why.c_str());
  std::exit(2);
}

size_t parseCount(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  const std::string unit = end;
  const size_t scale = unit == "K" ? 1024 : unit.empty() ? 1 : 0;
  if (end == s.c_str() || !scale) usage("bad count '" + s + "'");
  return static_cast<size_t>(v) * scale;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage("missing value for " + f);
    const std::string v = argv[++i];
    if (f == "--ranks")
      a.ranks = std::atoi(v.c_str());
    else if (f == "--transport")
      a.transport = v;
    else if (f == "--heads")
      a.heads = std::atoi(v.c_str());
    else if (f == "--kv-heads")
      a.kvHeads = std::atoi(v.c_str());
    else if (f == "--head-dim")
      a.headDim = parseCount(v);
    else if (f == "--dtype")
      a.dtype = v;
    else if (f == "--rounds")
      a.rounds = std::atoi(v.c_str());
    else if (f == "--calls")
      a.calls = std::atoi(v.c_str());
    else if (f == "--iface")
      a.iface = v;
    else if (f == "--alltoall")
      a.control = v == "1";
    else if (f == "--seq") {
      a.seqs.clear();
      for (size_t at = 0; at <= v.size();) {
        const size_t comma = std::min(v.find(',', at), v.size());
        a.seqs.push_back(parseCount(v.substr(at, comma - at)));
        at = comma + 1;
      }
    } else
      usage("unknown flag " + f);
  }
  if (a.kvHeads == 0) a.kvHeads = a.heads;
  if (a.heads < 1 || a.kvHeads < 1 || a.heads % a.kvHeads || a.rounds < 1 || a.calls < 1)
    usage("--kv-heads must divide --heads; rounds and calls at least 1");
  if (a.dtype != "bf16" && a.dtype != "fp16" && a.dtype != "fp32") usage("bad --dtype");
  return a;
}

// The test pattern: small integers (1..251), exact in every dtype here, that
// differ from token to token, head to head and element to element. A slot is
// a head of a part: query heads 0..H-1, key heads H..H+KV-1, value heads
// H+KV..H+2KV-1 (a token's parts in gyre's order Q, K, V).
unsigned pattern(size_t token, size_t slot, size_t e) {
  return unsigned((token * 7 + slot * 13 + e * 3) % 251 + 1);
}

// n (1..2047) in the dtype's bits: bfloat16 is float32's top half; half
// precision is built from n's exponent and the bits under its leading one.
uint32_t encode(unsigned n, const std::string& dtype) {
  const float f = float(n);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (dtype == "fp32") return bits;
  if (dtype == "bf16") return bits >> 16;
  int exp = 0;
  while ((n >> (exp + 1)) != 0) ++exp;
  return uint32_t((exp + 15) << 10) | ((n << (10 - exp)) & 0x3ffu);
}

struct Buffer {
  std::vector<unsigned char> bytes;
  size_t esz;
  Buffer(size_t elems, size_t esz_) : bytes(elems * esz_, 0), esz(esz_) {}
  void* data() { return bytes.data(); }
  void set(size_t i, uint32_t v) { std::memcpy(&bytes[i * esz], &v, esz); }
  uint32_t get(size_t i) const {
    uint32_t v = 0;
    std::memcpy(&v, &bytes[i * esz], esz);
    return v;
  }
};

// What left the interface so far (0 without one: the column then reads "-").
uint64_t txBytes(const std::string& iface) {
  if (iface.empty()) return 0;
  std::ifstream f("/sys/class/net/" + iface + "/statistics/tx_bytes");
  uint64_t v = 0;
  f >> v;
  return v;
}

// TCP segments this namespace has retransmitted so far (/proc/net/snmp, the
// "Tcp:" value line's RetransSegs): where the shaped links' short queues
// overflow, a method's time is lost there, not to the bytes.
uint64_t retransmits(const std::string& iface) {
  if (iface.empty()) return 0;
  std::ifstream f("/proc/net/snmp");
  std::string names, values, line;
  while (std::getline(f, line))
    if (line.rfind("Tcp:", 0) == 0) (names.empty() ? names : values) = line;
  size_t column = 0, at = 0;
  for (size_t i = names.find(' '); i != std::string::npos; i = names.find(' ', i + 1), ++column)
    if (names.compare(i + 1, 11, "RetransSegs") == 0) break;
  for (size_t c = 0; c <= column && at != std::string::npos; ++c) at = values.find(' ', at + 1);
  return at == std::string::npos ? 0 : std::strtoull(values.c_str() + at + 1, nullptr, 10);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

#define CHECK_GYRE(call)                                                                 \
  do {                                                                                   \
    if ((call) != gyreSuccess) {                                                         \
      std::fprintf(stderr, "rank %d: %s: %s\n", me, #call, gyreGetLastError(comm));      \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int rank(const Args& a, gyreComm_t comm) {
  int me = 0, n = 1;
  gyreCommUserRank(comm, &me);
  gyreCommCount(comm, &n);
  const gyreDataType_t dt = a.dtype == "fp32"   ? gyreFloat32
                            : a.dtype == "bf16" ? gyreBfloat16
                                                : gyreFloat16;
  const size_t esz = a.dtype == "fp32" ? 4 : 2, d = a.headDim;
  const size_t H = size_t(a.heads), KV = size_t(a.kvHeads), width = H + 2 * KV;
  // Every rank's heads after seq-to-heads: the bytes each one sends follow.
  std::vector<int> qFirst(n), qCount(n), kvFirst(n), kvCount(n);
  gyreSeqLayout_t probe{a.heads, a.kvHeads, d, gyreSeqQKV, 0, nullptr};
  for (int r = 0; r < n; ++r)
    if (gyreSeqHeads(&probe, n, r, &qFirst[r], &qCount[r], &kvFirst[r], &kvCount[r]) != gyreSuccess)
      return std::fprintf(stderr, "gyreSeqHeads: %s\n", gyreGetLastError(nullptr)), 1;
  const bool even = a.heads % n == 0 && a.kvHeads % n == 0;
  if (a.control && !even) {
    if (me == 0) std::fprintf(stderr, "--alltoall 1 needs heads and kv-heads that divide among %d ranks\n", n);
    return 2;
  }
  const int methods = a.control ? 3 : 2;
  if (me == 0)
    std::printf(
        "%d ranks, %s, %s, %zu query heads, %zu key/value heads, head dim %zu; forward only, no "
        "compute; %d rounds of %d layer(s) per method; time: the slowest rank's mean per layer, "
        "median over rounds; bytes: per rank per layer, the formula's payload and (with --iface) "
        "what the rank's link sent and the TCP segments it retransmitted, mean over ranks\n\n"
        "| S | method | payload sent (MiB) | link sent (MiB) | link / payload | TCP retransmits | "
        "time per layer (ms) |\n|---:|---|---:|---:|---:|---:|---:|\n",
        n, std::getenv("GYRE_TRANSPORT") ? std::getenv("GYRE_TRANSPORT") : "transport auto",
        a.dtype.c_str(), H, KV, d, a.rounds, a.calls);
  std::vector<std::string> ratioRows, controlRows;
  for (size_t S : a.seqs) {
    if (S % size_t(n)) return std::fprintf(stderr, "S=%zu is not a multiple of %d\n", S, n), 1;
    const size_t T = S / size_t(n), t0 = T * size_t(me);  // my tokens [t0, t0 + T)
    const size_t share = size_t(qCount[me] + 2 * kvCount[me]);
    gyreSeqLayout_t qkv{a.heads, a.kvHeads, d, gyreSeqQKV, S, nullptr};
    gyreSeqLayout_t out{a.heads, a.kvHeads, d, gyreSeqQ, S, nullptr};
    // The pattern's 251 values in the dtype's bits, looked up per element.
    uint32_t bits[252];
    for (unsigned v = 1; v <= 251; ++v) bits[v] = encode(v, a.dtype);
    auto want = [&](size_t token, size_t slot, size_t e) { return bits[pattern(token, slot, e)]; };
    Buffer qkvIn(T * width * d, esz), heads(S * share * d, esz), attn(S * size_t(qCount[me]) * d, esz),
        back(T * H * d, esz), kvIn(T * 2 * KV * d, esz), kvAll(S * 2 * KV * d, esz);
    for (size_t t = 0; t < T; ++t)
      for (size_t s = 0; s < width; ++s)
        for (size_t e = 0; e < d; ++e) {
          const uint32_t v = want(t0 + t, s, e);
          qkvIn.set((t * width + s) * d + e, v);
          if (s >= H) kvIn.set((t * 2 * KV + s - H) * d + e, v);
        }
    auto ulysses = [&]() {
      if (gyreSeqToHeads(qkvIn.data(), heads.data(), &qkv, dt, comm, nullptr) != gyreSuccess) return false;
      return gyreHeadsToSeq(attn.data(), back.data(), &out, dt, comm, nullptr) == gyreSuccess;
    };
    // The control: Ulysses' blocks, each peer's contiguous (the same
    // buffers, so the same bytes; the result is not a head split).
    auto alltoall = [&]() {
      if (gyreAllToAll(qkvIn.data(), heads.data(), T * width * d / size_t(n), dt, comm, nullptr) != gyreSuccess)
        return false;
      return gyreAllToAll(attn.data(), back.data(), T * H * d / size_t(n), dt, comm, nullptr) == gyreSuccess;
    };
    auto allgather = [&]() {
      return gyreAllGather(kvIn.data(), kvAll.data(), T * 2 * KV * d, dt, comm, nullptr) == gyreSuccess;
    };

    // The check: seq-to-heads' share, and heads-to-seq of an "attention"
    // that copies the queries through (so every rank gets its own queries
    // back); the gathered keys and values of every token.
    size_t bad = 0;
    CHECK_GYRE(gyreSeqToHeads(qkvIn.data(), heads.data(), &qkv, dt, comm, nullptr));
    for (size_t t = 0; t < S; ++t)
      for (size_t c = 0; c < share; ++c) {
        const size_t q = size_t(qCount[me]), kv = size_t(kvCount[me]);
        const size_t slot = c < q        ? size_t(qFirst[me]) + c
                            : c < q + kv ? H + size_t(kvFirst[me]) + c - q
                                         : H + KV + size_t(kvFirst[me]) + c - q - kv;
        for (size_t e = 0; e < d; ++e) {
          const uint32_t v = heads.get((t * share + c) * d + e);
          bad += v != want(t, slot, e);
          if (c < q) attn.set((t * q + c) * d + e, v);
        }
      }
    CHECK_GYRE(gyreHeadsToSeq(attn.data(), back.data(), &out, dt, comm, nullptr));
    for (size_t t = 0; t < T; ++t)
      for (size_t h = 0; h < H; ++h)
        for (size_t e = 0; e < d; ++e)
          bad += back.get((t * H + h) * d + e) != want(t0 + t, h, e);
    CHECK_GYRE(gyreAllGather(kvIn.data(), kvAll.data(), T * 2 * KV * d, dt, comm, nullptr));
    for (size_t t = 0; t < S; ++t)
      for (size_t j = 0; j < 2 * KV; ++j)
        for (size_t e = 0; e < d; ++e)
          bad += kvAll.get((t * 2 * KV + j) * d + e) != want(t, H + j, e);
    double badAll = double(bad);
    CHECK_GYRE(gyreAllReduce(&badAll, &badAll, 1, gyreFloat64, gyreSum, comm, nullptr));
    if (badAll != 0) {
      if (me == 0) std::fprintf(stderr, "S=%zu: %.0f wrong elements across the ranks\n", S, badAll);
      return 1;
    }

    // The formulas' payload, per rank (then the mean over ranks). Ulysses:
    // to each peer j, my T tokens of j's share (seq-to-heads), then every
    // token of peer j's T of my query heads (heads-to-seq). All-gather: my
    // block of T tokens' keys and values reaches each of the n - 1 others
    // once (ring or direct alike).
    double ulyssesPayload = 0;
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < n; ++j)
        if (j != r) ulyssesPayload += double(T * size_t(qCount[j] + 2 * kvCount[j]) * d * esz) +
                                      double(T * size_t(qCount[r]) * d * esz);
    ulyssesPayload /= n;
    const double allgatherPayload = double(size_t(n - 1) * T * 2 * KV * d * esz);

    // Rounds: [round][method] times (us) and link bytes; methods 0 ulysses,
    // 1 allgather, 2 the alltoall control.
    const size_t M = size_t(methods);
    std::vector<double> us(size_t(a.rounds) * M), sent(size_t(a.rounds) * M), resent(size_t(a.rounds) * M);
    for (int r = 0; r < a.rounds; ++r)
      for (int k = 0; k < methods; ++k) {
        const int m = (r + k) % methods;
        CHECK_GYRE(gyreBarrier(comm, nullptr));
        const uint64_t before = txBytes(a.iface), retransBefore = retransmits(a.iface);
        const auto start = std::chrono::steady_clock::now();
        for (int c = 0; c < a.calls; ++c)
          if (!(m == 0 ? ulysses() : m == 1 ? allgather() : alltoall()))
            return std::fprintf(stderr, "rank %d: method %d: %s\n", me, m,
                                gyreGetLastError(comm)),
                   1;
        us[size_t(r) * M + m] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
            a.calls;
        // Once every rank is past the barrier, every byte of the layer has
        // arrived, so it has left its sender's link.
        CHECK_GYRE(gyreBarrier(comm, nullptr));
        sent[size_t(r) * M + m] = double(txBytes(a.iface) - before) / a.calls;
        resent[size_t(r) * M + m] = double(retransmits(a.iface) - retransBefore) / a.calls;
      }
    CHECK_GYRE(gyreAllReduce(us.data(), us.data(), us.size(), gyreFloat64, gyreMax, comm, nullptr));
    CHECK_GYRE(gyreAllReduce(sent.data(), sent.data(), sent.size(), gyreFloat64, gyreSum, comm, nullptr));
    CHECK_GYRE(gyreAllReduce(resent.data(), resent.data(), resent.size(), gyreFloat64, gyreSum, comm, nullptr));
    if (me != 0) continue;
    std::vector<double> time[3], bytes[3], again[3], ratio, controlRatio;
    for (int r = 0; r < a.rounds; ++r) {
      for (int m = 0; m < methods; ++m) {
        time[m].push_back(us[size_t(r) * M + m]);
        bytes[m].push_back(sent[size_t(r) * M + m] / n);
        again[m].push_back(resent[size_t(r) * M + m] / n);
      }
      ratio.push_back(us[size_t(r) * M + 1] / us[size_t(r) * M]);
      if (a.control) controlRatio.push_back(us[size_t(r) * M + 2] / us[size_t(r) * M]);
    }
    const double mib = 1024.0 * 1024.0;
    const char* names[3] = {"ulysses", "allgather", "alltoall"};
    const double payload[3] = {ulyssesPayload, allgatherPayload, ulyssesPayload};
    for (int m = 0; m < methods; ++m) {
      char link[64] = "-", per[64] = "-", re[64] = "-";
      if (!a.iface.empty()) {
        std::snprintf(link, sizeof link, "%.2f", median(bytes[m]) / mib);
        std::snprintf(per, sizeof per, "%.3f", median(bytes[m]) / payload[m]);
        std::snprintf(re, sizeof re, "%.0f", median(again[m]));
      }
      std::printf("| %zu | %s | %.2f | %s | %s | %s | %.1f |\n", S, names[m], payload[m] / mib, link, per,
                  re, median(time[m]) / 1e3);
    }
    std::sort(ratio.begin(), ratio.end());
    char row[256];
    std::snprintf(row, sizeof row, "| %zu | %.3f | %s | %.3f | %.3f-%.3f |", S,
                  allgatherPayload / ulyssesPayload,
                  a.iface.empty() ? "-"
                                  : std::to_string(median(bytes[1]) / median(bytes[0])).substr(0, 5).c_str(),
                  median(ratio), ratio.front(), ratio.back());
    ratioRows.push_back(row);
    if (a.control) {
      std::sort(controlRatio.begin(), controlRatio.end());
      std::snprintf(row, sizeof row, "| %zu | %.3f | %.3f-%.3f |", S, median(controlRatio),
                    controlRatio.front(), controlRatio.back());
      controlRows.push_back(row);
    }
    std::fflush(stdout);
  }
  if (me == 0) {
    std::printf(
        "\nallgather / ulysses per layer (time ratio: median and range of the per-round ratios)\n\n"
        "| S | payload ratio | link bytes ratio | time ratio | range |\n|---:|---:|---:|---:|---:|\n");
    for (const std::string& r : ratioRows) std::printf("%s\n", r.c_str());
    if (a.control) {
      std::printf("\nthe control: AllToAll of Ulysses' bytes over Ulysses' time\n\n"
                  "| S | time ratio | range |\n|---:|---:|---:|\n");
      for (const std::string& r : controlRows) std::printf("%s\n", r.c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (!a.transport.empty()) setenv("GYRE_TRANSPORT", a.transport.c_str(), 1);
  if (a.ranks > 0)
    return gyre::bench::forkRanks(a.ranks, false, [&](int, gyreComm_t comm) {
      const int status = rank(a, comm);
      gyreCommDestroy(comm);
      return status;
    });
  gyreComm_t comm;
  if (gyreCommInitFromEnv(&comm, nullptr) != gyreSuccess)
    return std::fprintf(stderr, "gyreCommInitFromEnv: %s\n", gyreGetLastError(nullptr)), 1;
  const int status = rank(a, comm);
  gyreCommDestroy(comm);
  return status;
}
