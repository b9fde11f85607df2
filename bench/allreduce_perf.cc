// gyre-allreduce-perf: AllReduce bandwidth in the nccl-tests layout (size,
// count, type, redop, root, time, algbw, busbw, #wrong for out-of-place and
// in-place). Runs as one rank under a launcher (gyrerun, mpirun, srun,
// torchrun: ranks from the environment) or spawns --ranks N itself.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "bench/fork_ranks.h"
#include "gyre/gyre.h"

namespace {

struct Options {
  size_t minBytes = 8, maxBytes = 256u << 20;
  double factor = 4;
  int iters = 20, warmup = 5;
  gyreDataType_t dtype = gyreFloat32;
  gyreRedOp_t op = gyreSum;
  bool check = true;
  int spawn = 0;      // --ranks N: fork N local ranks
  bool bind = false;  // --bind core: pin spawned rank i to CPU i
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "gyre-allreduce-perf: %s\n"
      "usage: gyre-allreduce-perf [-b min] [-e max] [-f factor] [-n iters] [-w warmup]\n"
      "                           [-d dtype] [-o op] [-c 0|1] [--ranks N] [--bind core|none]\n"
      "sizes take K, M, G suffixes; without --ranks, rank and size come from the launcher.\n",
      why);
  std::exit(2);
}

size_t parseBytes(const char* s) {
  char* end;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) usage("bad size");
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      ++end;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      ++end;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end) usage("bad size suffix");
  return static_cast<size_t>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "-b")
      o.minBytes = parseBytes(next());
    else if (a == "-e")
      o.maxBytes = parseBytes(next());
    else if (a == "-f")
      o.factor = std::atof(next());
    else if (a == "-n")
      o.iters = std::atoi(next());
    else if (a == "-w")
      o.warmup = std::atoi(next());
    else if (a == "-c")
      o.check = std::atoi(next()) != 0;
    else if (a == "--ranks")
      o.spawn = std::atoi(next());
    else if (a == "--bind")
      o.bind = std::string(next()) == "core";
    else if (a == "-d") {
      std::string d = next();
      int t = 0;
      for (; t < gyreNumTypes; ++t)
        if (d == gyre::test::dtypeLabel(static_cast<gyreDataType_t>(t)) ||
            (d == "float" && t == gyreFloat32) || (d == "half" && t == gyreFloat16) ||
            (d == "double" && t == gyreFloat64))
          break;
      if (t == gyreNumTypes) usage("unknown dtype");
      o.dtype = static_cast<gyreDataType_t>(t);
    } else if (a == "-o") {
      std::string op = next();
      int k = 0;
      for (; k < gyreNumOps; ++k)
        if (op == gyre::test::opLabel(static_cast<gyreRedOp_t>(k))) break;
      if (k == gyreNumOps) usage("unknown op");
      o.op = static_cast<gyreRedOp_t>(k);
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (o.factor <= 1 || o.iters < 1 || o.warmup < 0 || o.minBytes > o.maxBytes) usage("bad sweep");
  return o;
}

const char* typeName(gyreDataType_t t) {
  return t == gyreFloat32   ? "float"
         : t == gyreFloat16 ? "half"
         : t == gyreFloat64 ? "double"
                            : gyre::test::dtypeLabel(t);
}

#define CHECKG(call)                                                                           \
  do {                                                                                         \
    gyreResult_t r_ = (call);                                                                  \
    if (r_ != gyreSuccess) {                                                                   \
      std::fprintf(stderr, "gyre-allreduce-perf: %s: %s\n", #call, gyreGetLastError(nullptr)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Average of a per-rank value over all ranks.
double average(gyreComm_t comm, double v, int nranks) {
  CHECKG(gyreAllReduce(&v, &v, 1, gyreFloat64, gyreSum, comm, nullptr));
  return v / nranks;
}

int runRank(const Options& o, gyreComm_t comm) {
  int rank, nranks;
  CHECKG(gyreCommUserRank(comm, &rank));
  CHECKG(gyreCommCount(comm, &nranks));
  const size_t esz = gyre::test::dtypeBytes(o.dtype);
  std::vector<unsigned char> send(o.maxBytes + esz), recv(o.maxBytes + esz);
  if (rank == 0) {
    std::printf(
        "# gyre-allreduce-perf: nranks %d minBytes %zu maxBytes %zu step: %g(factor) warmup iters: "
        "%d iters: %d validation: %d\n",
        nranks, o.minBytes, o.maxBytes, o.factor, o.warmup, o.iters, o.check ? 1 : 0);
    const char* t = std::getenv("GYRE_TRANSPORT");
    const char* a = std::getenv("GYRE_ALGO");
    std::printf("# transport: %s   algorithm: %s\n#\n", t ? t : "auto", a ? a : "auto");
    // Labels centred over the two 33-column blocks that follow the 52 of
    // size/count/type/redop/root.
    std::printf("#%51s%22s%31s\n", "", "out-of-place", "in-place");
    std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong");
    std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
  }
  double busSum = 0;
  int rows = 0;
  long long wrongTotal = 0;
  for (double sz = static_cast<double>(o.minBytes);
       sz <= static_cast<double>(o.maxBytes) * 1.0000001; sz *= o.factor) {
    const size_t count = static_cast<size_t>(sz) / esz;
    const size_t bytes = count * esz;
    char cols[2][64];
    long long wrongRow = 0;
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      void* out = inPlace ? send.data() : recv.data();
      gyre::test::fillInput(send.data(), count, o.dtype, o.op, rank);
      for (int i = 0; i < o.warmup; ++i) {
        CHECKG(gyreAllReduce(send.data(), out, count, o.dtype, o.op, comm, nullptr));
        if (inPlace) gyre::test::fillInput(send.data(), count, o.dtype, o.op, rank);
      }
      double token = 0;
      CHECKG(gyreAllReduce(&token, &token, 1, gyreFloat64, gyreSum, comm,
                           nullptr));  // line up the ranks
      const double t0 = now();
      for (int i = 0; i < o.iters; ++i)
        CHECKG(gyreAllReduce(send.data(), out, count, o.dtype, o.op, comm, nullptr));
      const double usec = average(comm, (now() - t0) / o.iters * 1e6, nranks);
      long long wrong = 0;
      if (o.check) {
        gyre::test::fillInput(send.data(), count, o.dtype, o.op, rank);
        CHECKG(gyreAllReduce(send.data(), out, count, o.dtype, o.op, comm, nullptr));
        wrong = static_cast<long long>(
            gyre::test::countWrong(out, count, o.dtype, o.op, nranks, nullptr));
        double w = static_cast<double>(wrong);
        CHECKG(gyreAllReduce(&w, &w, 1, gyreFloat64, gyreSum, comm, nullptr));
        wrong = static_cast<long long>(w);
      }
      const double algbw = usec > 0 ? bytes / usec / 1e3 : 0;  // GB/s
      const double busbw = algbw * 2.0 * (nranks - 1) / nranks;
      if (inPlace) busSum += busbw, ++rows;
      wrongRow += wrong;
      char t[16];
      std::snprintf(t, sizeof(t), usec >= 10000 ? "%7.0f" : usec >= 100 ? "%7.1f" : "%7.2f", usec);
      std::snprintf(cols[inPlace], sizeof(cols[inPlace]), "  %7s  %6.2f  %6.2f  %6s", t, algbw,
                    busbw, o.check ? std::to_string(wrong).c_str() : "N/A");
    }
    wrongTotal += wrongRow;
    if (rank == 0)
      std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", bytes, count, typeName(o.dtype),
                  gyre::test::opLabel(o.op), -1, cols[0], cols[1]);
    std::fflush(stdout);
  }
  if (rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n#\n", rows ? busSum / rows : 0.0);
  }
  CHECKG(gyreCommDestroy(comm));
  return wrongTotal ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o = parse(argc, argv);
  if (o.spawn <= 0) {
    gyreComm_t comm;
    CHECKG(gyreCommInitFromEnv(&comm, nullptr));
    return runRank(o, comm);
  }
  return gyre::bench::forkRanks(o.spawn, o.bind, [&](int, gyreComm_t comm) { return runRank(o, comm); });
}
