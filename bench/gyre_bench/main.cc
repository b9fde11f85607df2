// gyre-bench <collective>: bandwidth and latency of one collective over a
// sweep of sizes, in the nccl-tests layout (size, count, type, redop, root,
// then time/algbw/busbw/#wrong out of place and in place). Runs as one rank
// under a launcher (ranks from the environment) or forks --ranks N itself.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/gyre_bench/collectives.h"
#include "bench/gyre_bench/options.h"
#include "gyre/gyre.h"
#include "tests/support/exact_values.h"

namespace gyre::bench {
namespace {

#define CHECKG(call)                                                                             \
  do {                                                                                           \
    gyreResult_t r_ = (call);                                                                    \
    if (r_ != gyreSuccess) {                                                                     \
      std::fprintf(stderr, "gyre-bench: %s failed: %s\n", #call, gyreGetLastError(nullptr));     \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double sumOverRanks(gyreComm_t comm, double v) {
  CHECKG(gyreAllReduce(&v, &v, 1, gyreFloat64, gyreSum, comm, nullptr));
  return v;
}

void printHeader(const Options& o, const Collective& coll, int nranks) {
  int version = 0;
  gyreGetVersion(&version);
  std::printf("# gyre-bench %s: gyre %d.%d.%d, nranks %d, minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d "
              "iters: %d validation: %d\n",
              coll.name, version / 10000, version / 100 % 100, version % 100, nranks, o.minBytes, o.maxBytes,
              o.step ? double(o.step) : o.factor, o.step ? "bytes" : "factor", o.warmup, o.iters, o.check ? 1 : 0);
  const char* t = std::getenv("GYRE_TRANSPORT");
  const char* a = std::getenv("GYRE_ALGO");
  std::printf("# transport: %s   algorithm: %s%s\n#\n", t && *t ? t : "auto", a && *a ? a : "auto",
              coll.name == std::string("alltoallv") ? ("   skew: " + std::to_string(o.skew)).c_str() : "");
  std::printf("#%51s%22s%31s\n", "", "out-of-place", "in-place");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

// Times one placement of one row; returns microseconds per call and the
// number of wrong elements over all ranks (or -1 when not checked).
struct Timing {
  double usec = 0;
  long long wrong = -1;
};

Timing timeRow(const Collective& coll, Call& c, const Options& o) {
  coll.fill(c);
  for (int i = 0; i < o.warmup; ++i) CHECKG(coll.run(c));
  CHECKG(gyreBarrier(c.comm, nullptr));  // line the ranks up
  const double t0 = now();
  for (int i = 0; i < o.iters; ++i) CHECKG(coll.run(c));
  Timing t;
  t.usec = sumOverRanks(c.comm, (now() - t0) / o.iters * 1e6) / c.nranks;
  if (o.check) {
    coll.fill(c);
    CHECKG(coll.run(c));
    t.wrong = static_cast<long long>(sumOverRanks(c.comm, double(coll.wrong(c))));
  }
  return t;
}

std::string columns(const Timing& t, size_t bytes, double factor) {
  const double algbw = t.usec > 0 ? double(bytes) / t.usec / 1e3 : 0;
  char time[16], out[80];
  std::snprintf(time, sizeof(time), t.usec >= 10000 ? "%7.0f" : t.usec >= 100 ? "%7.1f" : "%7.2f", t.usec);
  std::snprintf(out, sizeof(out), "  %7s  %6.2f  %6.2f  %6s", time, algbw, algbw * factor,
                t.wrong < 0 ? "N/A" : std::to_string(t.wrong).c_str());
  return out;
}

int runRank(const Options& o, gyreComm_t comm) {
  const Collective& coll = *findCollective(o.collective);
  Call c;
  c.comm = comm;
  c.opt = &o;
  CHECKG(gyreCommUserRank(comm, &c.rank));
  CHECKG(gyreCommCount(comm, &c.nranks));
  if (coll.rooted && o.root >= c.nranks) {
    std::fprintf(stderr, "gyre-bench: root %d is not a rank (there are %d)\n", o.root, c.nranks);
    return 2;
  }
  const size_t esz = test::dtypeBytes(o.dtype);
  // Buffers for the largest row (AllToAllv may send a little more than a row).
  Call big = c;
  coll.shape(big, o.maxBytes / esz);
  std::vector<unsigned char> a((big.sendElems + 64) * esz), b((big.recvElems + 64) * esz);
  if (c.rank == 0) printHeader(o, coll, c.nranks);
  const double factor = coll.busFactor(c.nranks);
  double busSum = 0;
  int rows = 0;
  long long wrongTotal = 0;
  const bool sizeless = coll.name == std::string("barrier");
  for (size_t sz = sizeless ? 0 : o.minBytes; sz <= o.maxBytes;) {
    coll.shape(c, sz / esz);
    const size_t rowElems = coll.name == std::string("alltoallv") ? c.sendElems
                            : c.sendElems > c.recvElems ? c.sendElems : c.recvElems;
    const size_t bytes = rowElems * esz;
    std::string cols[2];
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      if (inPlace && !coll.hasInPlace) {
        cols[1] = "  " + std::string(7, ' ') + "     N/A     N/A     N/A";
        continue;
      }
      c.inPlace = inPlace;
      coll.place(c, a.data(), b.data());
      const Timing t = timeRow(coll, c, o);
      wrongTotal += t.wrong > 0 ? t.wrong : 0;
      cols[inPlace] = columns(t, bytes, factor);
      const double algbw = t.usec > 0 ? double(bytes) / t.usec / 1e3 : 0;
      if (inPlace == (coll.hasInPlace ? 1 : 0)) busSum += algbw * factor, ++rows;
    }
    if (c.rank == 0)
      std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", bytes, rowElems, typeName(o.dtype),
                  coll.reduces ? test::opLabel(o.op) : "none", coll.rooted ? o.root : -1, cols[0].c_str(),
                  cols[1].c_str());
    if (sizeless) break;
    const size_t nextSz = o.factor > 1 ? static_cast<size_t>(double(sz) * o.factor) : sz + o.step;
    if (nextSz <= sz) break;
    sz = nextSz;
  }
  if (c.rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n#\n", rows ? busSum / rows : 0.0);
  }
  CHECKG(gyreCommDestroy(comm));
  return wrongTotal ? 1 : 0;
}

void applySettings(const Options& o) {
  if (!o.transport.empty()) setenv("GYRE_TRANSPORT", o.transport.c_str(), 1);
  if (!o.algo.empty()) setenv("GYRE_ALGO", (o.collective + ":" + o.algo).c_str(), 1);
  if (o.timeoutSec) setenv("GYRE_TIMEOUT_MS", std::to_string(o.timeoutSec * 1000).c_str(), 1);
}

}  // namespace
}  // namespace gyre::bench

int main(int argc, char** argv) {
  using namespace gyre::bench;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const Options o = parseOptions(argc, argv);
  applySettings(o);
  if (o.spawn <= 0) {
    gyreComm_t comm;
    CHECKG(gyreCommInitFromEnv(&comm, nullptr));
    return runRank(o, comm);
  }
  gyreUniqueId id;
  CHECKG(gyreGetUniqueId(&id));
  std::vector<pid_t> pids;
  for (int r = 0; r < o.spawn; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (o.bind) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r % sysconf(_SC_NPROCESSORS_ONLN), &set);
        sched_setaffinity(0, sizeof(set), &set);
      }
      gyreComm_t comm;
      CHECKG(gyreCommInitRank(&comm, o.spawn, id, r));
      std::fflush(stdout);
      _exit(runRank(o, comm));
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) ++failed;
  }
  return failed ? 1 : 0;
}
