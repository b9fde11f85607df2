// gyre-moe-ab: the MoE dispatch with its counts sent ahead of the rows
// (one call) against the same dispatch with the counts exchanged first
// (gyreMoeExchangeCounts, then the dispatch) and against what a caller
// does without gyre's MoE calls (pack the rows by rank, AllToAll of the
// counts, AllToAllv of the rows): interleaved call for call in the same
// processes, so that a noisy host's drift hits the three alike (docs/moe.md).
//
//   gyre-moe-ab --ranks N [--transport shm|tcp] [--tokens 64,512,4096]
//               [--hidden 1024] [--k 2] [--experts-per-rank 2] [--rounds 21]
//
// Each variant's time includes making the routing from the choices (the
// baseline: packing its rows), each call's time the slowest rank's; the
// table gives each one's median over the rounds and the median over the
// rounds of the counts-first and baseline times over the same round's
// counts-ahead time. float32 rows, uniform random top-k choices, no capacity.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/fork_ranks.h"
#include "gyre/gyre.h"

namespace {

struct Args {
  int ranks = 2, k = 2, perRank = 2, rounds = 21;
  size_t hidden = 1024;
  std::string transport;
  std::vector<size_t> tokens = {64, 512, 4096};
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gyre-moe-ab: %s\nusage: gyre-moe-ab --ranks N [--transport shm|tcp] [--tokens 64,512,...] "
               "[--hidden H] [--k K] [--experts-per-rank E] [--rounds R]\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage("missing value for " + f);
    const std::string v = argv[i + 1];
    if (f == "--ranks") a.ranks = std::atoi(v.c_str());
    else if (f == "--transport") a.transport = v;
    else if (f == "--hidden") a.hidden = std::strtoull(v.c_str(), nullptr, 10);
    else if (f == "--k") a.k = std::atoi(v.c_str());
    else if (f == "--experts-per-rank") a.perRank = std::atoi(v.c_str());
    else if (f == "--rounds") a.rounds = std::atoi(v.c_str());
    else if (f == "--tokens") {
      a.tokens.clear();
      size_t at = 0;
      while (at <= v.size()) {
        const size_t comma = std::min(v.find(',', at), v.size());
        a.tokens.push_back(std::strtoull(v.substr(at, comma - at).c_str(), nullptr, 10));
        at = comma + 1;
      }
    } else usage("unknown flag " + f);
  }
  if (a.ranks < 1 || a.k < 1 || a.perRank < 1 || a.rounds < 1 || a.hidden < 1) usage("bad values");
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

using Clock = std::chrono::steady_clock;

int check(gyreResult_t r, const char* what) {
  if (r != gyreSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, gyreGetLastError(nullptr));
    std::exit(1);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (!a.transport.empty()) setenv("GYRE_TRANSPORT", a.transport.c_str(), 1);
  return gyre::bench::forkRanks(a.ranks, false, [&](int me, gyreComm_t comm) {
    const int n = a.ranks, E = n * a.perRank;
    const size_t H = a.hidden, K = static_cast<size_t>(a.k), rowBytes = H * sizeof(float);
    if (me == 0)
      std::printf("# gyre-moe-ab: %d ranks, transport %s, top-%d of %d experts, hidden %zu float32, %d rounds\n"
                  "# time: the slowest rank's, median over rounds (us); ratio: median over rounds of variant / "
                  "counts-ahead\n"
                  "%8s %12s %14s %14s %14s %10s %10s\n",
                  n, a.transport.empty() ? "auto" : a.transport.c_str(), a.k, E, H, a.rounds, "tokens",
                  "bytes/rank", "ahead_us", "first_us", "a2av_us", "first/ah", "a2av/ah");
    for (size_t T : a.tokens) {
      std::mt19937 rng(static_cast<unsigned>(1234 + me * 7919 + T));
      std::vector<int32_t> choices(T * K);
      for (auto& c : choices) c = static_cast<int32_t>(rng() % static_cast<unsigned>(E));
      std::vector<float> x(T * H);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97);
      const size_t bound = T * K * static_cast<size_t>(n);
      std::vector<float> out(bound * H), packed(T * K * H), out2(bound * H);
      std::vector<double> ahead, first, a2av, r1, r2;
      for (int round = -2; round < a.rounds; ++round) {  // two warm-up rounds
        double t[3] = {0, 0, 0};
        for (int j = 0; j < 3; ++j) {
          const int v = (j + round + 3) % 3;
          check(gyreAllReduce(nullptr, nullptr, 0, gyreFloat32, gyreSum, comm, nullptr), "sync");
          const auto t0 = Clock::now();
          if (v == 0) {  // counts ahead
            gyreMoeRouting_t r;
            check(gyreMoeRoutingCreate(&r, choices.data(), T, a.k, E, nullptr, 0, comm), "routing");
            check(gyreMoeDispatch(x.data(), out.data(), bound, H, gyreFloat32, 0, r, comm, nullptr), "dispatch");
            gyreMoeRoutingDestroy(r);
          } else if (v == 1) {  // counts first
            gyreMoeRouting_t r;
            check(gyreMoeRoutingCreate(&r, choices.data(), T, a.k, E, nullptr, 0, comm), "routing");
            check(gyreMoeExchangeCounts(r, comm), "counts");
            size_t rows = 0;
            gyreMoeRecvCounts(r, nullptr, nullptr, &rows);
            check(gyreMoeDispatch(x.data(), out.data(), rows, H, gyreFloat32, 0, r, comm, nullptr), "dispatch");
            gyreMoeRoutingDestroy(r);
          } else {  // by hand: pack by rank, AllToAll of counts, AllToAllv of rows
            std::vector<size_t> sendc(n, 0), sendd(n, 0), recvc(n), recvd(n);
            std::vector<uint64_t> cnt(n, 0), rc(n);
            for (size_t i = 0; i < T * K; ++i) ++cnt[static_cast<size_t>(choices[i] / a.perRank)];
            std::vector<size_t> at(n, 0);
            for (int q = 1; q < n; ++q) at[q] = at[q - 1] + cnt[q - 1];
            for (int q = 0; q < n; ++q) sendd[q] = at[q] * H;
            for (size_t s = 0; s < K; ++s)
              for (size_t tk = 0; tk < T; ++tk) {
                const int q = choices[tk * K + s] / a.perRank;
                std::memcpy(&packed[at[q]++ * H], &x[tk * H], rowBytes);
              }
            check(gyreAllToAll(cnt.data(), rc.data(), 1, gyreUint64, comm, nullptr), "alltoall");
            size_t off = 0;
            for (int q = 0; q < n; ++q) {
              sendc[q] = cnt[q] * H;
              recvc[q] = rc[q] * H;
              recvd[q] = off;
              off += recvc[q];
            }
            check(gyreAllToAllv(packed.data(), sendc.data(), sendd.data(), out2.data(), recvc.data(), recvd.data(),
                                gyreFloat32, comm, nullptr),
                  "alltoallv");
          }
          t[v] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        }
        check(gyreAllReduce(t, t, 3, gyreFloat64, gyreMax, comm, nullptr), "max");
        if (round < 0) continue;
        ahead.push_back(t[0]);
        first.push_back(t[1]);
        a2av.push_back(t[2]);
        r1.push_back(t[1] / t[0]);
        r2.push_back(t[2] / t[0]);
      }
      if (me == 0)
        std::printf("%8zu %12zu %14.1f %14.1f %14.1f %10.3f %10.3f\n", T, T * K * rowBytes, median(ahead),
                    median(first), median(a2av), median(r1), median(r2));
      std::fflush(stdout);
    }
    gyreCommDestroy(comm);
    return 0;
  });
}
