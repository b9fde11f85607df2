#include "bench/gyre_bench/options.h"

#include <cstdio>
#include <cstdlib>

#include "bench/gyre_bench/collectives.h"
#include "tests/support/exact_values.h"

namespace gyre::bench {

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gyre-bench: %s\n"
               "usage: gyre-bench <collective> [-b minbytes] [-e maxbytes] [-f factor | -i step] [-n iters]\n"
               "                  [-w warmup] [-c 0|1] [-d dtype] [-o op] [-r root] [-T timeout_s]\n"
               "                  [--ranks N] [--bind core|none] [--transport shm|tcp] [--algo NAME]\n"
               "                  [--skew K]\n"
               "collectives: %s\n"
               "sizes take K, M, G suffixes; without --ranks, rank and size come from the launcher\n"
               "(gyrerun, mpirun, srun, torchrun).\n",
               why.c_str(), collectiveNames().c_str());
  std::exit(2);
}

int parseInt(const std::string& flag, const char* v, int lo) {
  char* end;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end || x < lo || x > 1 << 30) usage("bad value '" + std::string(v) + "' for " + flag);
  return static_cast<int>(x);
}

}  // namespace

size_t parseBytes(const std::string& s) {
  char* end;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) usage("bad size '" + s + "'");
  switch (*end) {
    case 'K': case 'k': v *= 1024; ++end; break;
    case 'M': case 'm': v *= 1024.0 * 1024; ++end; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end) usage("bad size suffix in '" + s + "'");
  return static_cast<size_t>(v);
}

const char* typeName(gyreDataType_t t) {
  return t == gyreFloat32 ? "float" : t == gyreFloat16 ? "half" : t == gyreFloat64 ? "double" : test::dtypeLabel(t);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  int i = 1;
  if (i < argc && argv[i][0] != '-') o.collective = argv[i++];
  if (o.collective.empty()) usage("which collective?");
  if (!findCollective(o.collective)) usage("unknown collective '" + o.collective + "'");
  bool factorGiven = false;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage("missing value for " + a);
      return argv[++i];
    };
    if (a == "-b") o.minBytes = parseBytes(next());
    else if (a == "-e") o.maxBytes = parseBytes(next());
    else if (a == "-f") { o.factor = std::atof(next()); factorGiven = true; }
    else if (a == "-i") o.step = parseBytes(next());
    else if (a == "-n") o.iters = parseInt(a, next(), 1);
    else if (a == "-w") o.warmup = parseInt(a, next(), 0);
    else if (a == "-c") o.check = parseInt(a, next(), 0) != 0;
    else if (a == "-r") o.root = parseInt(a, next(), 0);
    else if (a == "-T") o.timeoutSec = parseInt(a, next(), 0);
    else if (a == "--ranks") o.spawn = parseInt(a, next(), 1);
    else if (a == "--skew") o.skew = parseInt(a, next(), 1);
    else if (a == "--transport") o.transport = next();
    else if (a == "--algo") o.algo = next();
    else if (a == "--bind") {
      const std::string b = next();
      if (b != "core" && b != "none") usage("--bind takes core or none");
      o.bind = b == "core";
    } else if (a == "-d") {
      const std::string d = next();
      int t = 0;
      for (; t < gyreNumTypes; ++t)
        if (d == test::dtypeLabel(static_cast<gyreDataType_t>(t)) || d == typeName(static_cast<gyreDataType_t>(t)))
          break;
      if (t == gyreNumTypes) usage("unknown dtype '" + d + "'");
      o.dtype = static_cast<gyreDataType_t>(t);
    } else if (a == "-o") {
      const std::string op = next();
      int k = 0;
      for (; k < gyreNumOps; ++k)
        if (op == test::opLabel(static_cast<gyreRedOp_t>(k))) break;
      if (k == gyreNumOps) usage("unknown op '" + op + "'");
      o.op = static_cast<gyreRedOp_t>(k);
    } else {
      usage("unknown option " + a);
    }
  }
  if (o.step && !factorGiven) o.factor = 1;
  if ((o.factor <= 1 && !o.step) || o.minBytes > o.maxBytes) usage("bad sweep (-b, -e, -f, -i)");
  if (o.transport != "" && o.transport != "shm" && o.transport != "tcp") usage("--transport takes shm or tcp");
  return o;
}

}  // namespace gyre::bench
