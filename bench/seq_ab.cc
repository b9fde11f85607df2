// gyre-seq-ab: the sequence exchanges against a plain AllToAll of the same
// bytes, interleaved call for call in the same processes, so that a noisy
// host's drift hits the three alike (docs/PERFORMANCE-sequence.md).
//
//   gyre-seq-ab --ranks N [--transport shm|tcp] [--heads 32] [--head-dim 128]
//               [--sizes 64K,256K,1M,4M,16M,64M] [--rounds 21] [--huge-pages 1]
//
// Per size: a round times each of AllToAll, gyreSeqToHeads and
// gyreHeadsToSeq over a few calls, in turn (the first of them rotating from
// round to round), each call's time the slowest rank's; the table gives
// each one's median over the rounds, and the median over the rounds of each
// exchange's time over the same round's AllToAll. float32, query heads only
// (the heads divide among the ranks, so every row moves what AllToAll's does).
// --huge-pages 1: the buffers in transparent huge pages (madvise), where the
// kernel allows them: a strided slice of small runs touches a page for every
// few runs, and each page is a TLB miss (a page walk, costlier in a VM).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/fork_ranks.h"
#include "gyre/gyre.h"

namespace {

struct Args {
  int ranks = 2, heads = 32, rounds = 21;
  bool hugePages = false;
  size_t headDim = 128;
  std::string transport;
  std::vector<size_t> sizes = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gyre-seq-ab: %s\nusage: gyre-seq-ab --ranks N [--transport shm|tcp] [--heads H] "
               "[--head-dim D] "
               "[--sizes 64K,1M,...] [--rounds R] [--huge-pages 1]\n",
               why.c_str());
  std::exit(2);
}

size_t parseSize(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  const std::string unit = end;
  const size_t scale = unit == "K"    ? 1 << 10
                       : unit == "M"  ? 1 << 20
                       : unit == "G"  ? 1 << 30
                       : unit.empty() ? 1
                                      : 0;
  if (end == s.c_str() || !scale) usage("bad size '" + s + "'");
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
    else if (f == "--head-dim")
      a.headDim = parseSize(v);
    else if (f == "--rounds")
      a.rounds = std::atoi(v.c_str());
    else if (f == "--huge-pages")
      a.hugePages = v == "1";
    else if (f == "--sizes") {
      a.sizes.clear();
      for (size_t at = 0; at <= v.size();) {
        const size_t comma = std::min(v.find(',', at), v.size());
        a.sizes.push_back(parseSize(v.substr(at, comma - at)));
        at = comma + 1;
      }
    } else
      usage("unknown flag " + f);
  }
  if (a.ranks < 1 || a.heads < 1 || a.heads % a.ranks || a.rounds < 1)
    usage("--heads must be a multiple of --ranks");
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Calls per timing: each timing a few milliseconds at least.
int callsFor(size_t bytes) { return bytes <= (256 << 10) ? 50 : bytes <= (4 << 20) ? 10 : 3; }

int rank(const Args& a, int me, gyreComm_t comm) {
  const int n = a.ranks;
  const size_t tokenBytes = size_t(a.heads) * a.headDim * sizeof(float);
  size_t most = 0;
  for (size_t s : a.sizes) most = std::max(most, s);
  // Buffers of whole 2 MiB pages, so that madvise can make them huge ones.
  const size_t bufBytes = (most + (2 << 20)) & ~size_t((2 << 20) - 1);
  auto buffer = [&]() {
    void* p = std::aligned_alloc(2 << 20, bufBytes);
    if (a.hugePages) madvise(p, bufBytes, MADV_HUGEPAGE);
    std::memset(p, 1, bufBytes);
    return static_cast<float*>(p);
  };
  float* const in = buffer();
  float* const out = buffer();
  const char* names[] = {"alltoall", "seqtoheads", "headstoseq"};
  if (me == 0) {
    std::printf(
        "%d ranks, %s, float32, %d query heads of %zu elements; median of %d rounds, each op's "
        "time the "
        "slowest rank's mean over its calls; ratio: the median over the rounds of op / AllToAll in "
        "the "
        "same round\n\n| size | alltoall (us) | seqtoheads (us) | ratio | headstoseq (us) | ratio "
        "|\n"
        "|---:|---:|---:|---:|---:|---:|\n",
        n, a.transport.empty() ? "auto" : a.transport.c_str(), a.heads, a.headDim, a.rounds);
  }
  for (size_t bytes : a.sizes) {
    const size_t tokens = bytes / tokenBytes;
    const size_t elems = tokens * tokenBytes / sizeof(float);
    gyreSeqLayout_t l{a.heads, 0, a.headDim, gyreSeqQ, tokens * size_t(n), nullptr};
    auto call = [&](int op) {
      switch (op) {
        case 0:
          return gyreAllToAll(in, out, elems / size_t(n), gyreFloat32, comm, nullptr);
        case 1:
          return gyreSeqToHeads(in, out, &l, gyreFloat32, comm, nullptr);
        default:
          return gyreHeadsToSeq(in, out, &l, gyreFloat32, comm, nullptr);
      }
    };
    const int calls = callsFor(bytes);
    for (int op = 0; op < 3; ++op)  // warm up: plans, pages, connections
      for (int c = 0; c < 2; ++c)
        if (call(op) != gyreSuccess)
          return std::fprintf(stderr, "%s: %s\n", names[op], gyreGetLastError(comm)), 1;
    std::vector<double> us(3 * size_t(a.rounds));
    for (int r = 0; r < a.rounds; ++r)
      for (int k = 0; k < 3; ++k) {
        const int op = (r + k) % 3;
        const auto t0 = std::chrono::steady_clock::now();
        for (int c = 0; c < calls; ++c)
          if (call(op) != gyreSuccess)
            return std::fprintf(stderr, "%s: %s\n", names[op], gyreGetLastError(comm)), 1;
        us[size_t(r) * 3 + op] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() /
            calls;
      }
    if (gyreAllReduce(us.data(), us.data(), us.size(), gyreFloat64, gyreMax, comm, nullptr) !=
        gyreSuccess)
      return 1;
    if (me != 0) continue;
    std::vector<double> each[3], ratio[3];
    for (int r = 0; r < a.rounds; ++r)
      for (int op = 0; op < 3; ++op) {
        each[op].push_back(us[size_t(r) * 3 + op]);
        ratio[op].push_back(us[size_t(r) * 3 + op] / us[size_t(r) * 3]);
      }
    const double kib = double(elems * sizeof(float)) / 1024;
    std::printf("| %s | %.1f | %.1f | %.2f | %.1f | %.2f |\n",
                kib >= 1024 ? (std::to_string(size_t(kib / 1024)) + " MiB").c_str()
                            : (std::to_string(size_t(kib)) + " KiB").c_str(),
                median(each[0]), median(each[1]), median(ratio[1]), median(each[2]),
                median(ratio[2]));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (!a.transport.empty()) setenv("GYRE_TRANSPORT", a.transport.c_str(), 1);
  return gyre::bench::forkRanks(a.ranks, false, [&](int me, gyreComm_t comm) {
    const int status = rank(a, me, comm);
    gyreCommDestroy(comm);
    return status;
  });
}
