#include "bench/gyre_bench/options.h"

#include <cstdio>
#include <cstdlib>

#include "bench/exact_values.h"
#include "bench/gyre_bench/collectives.h"
#include "bench/gyre_bench/plot.h"

namespace gyre::bench {

namespace {

const char* const kUsage =
    "usage: gyre-bench <collective> [flags]\n"
    "       gyre-bench plot -o OUT.svg|OUT.png [--title TEXT] RUN.json...\n"
    "sweep (nccl-tests' flags; sizes take K, M, G suffixes):\n"
    "  -b, --minbytes N        smallest size (default 8)\n"
    "  -e, --maxbytes N        largest size (default 256M)\n"
    "  -f, --stepfactor F      multiply the size by F each row (default 2)\n"
    "  -i, --stepbytes N       or add N bytes each row\n"
    "  -n, --iters N           timed iterations per row (default 20)\n"
    "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
    "  -c, --check 0|1         check every result exactly (default 1; --codec: measure its error)\n"
    "  -d, --datatype T|all    int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 (default float)\n"
    "  -o, --op OP|all         sum prod max min avg (default sum)\n"
    "  -r, --root R            root rank of rooted collectives (default 0)\n"
    "  -a, --average 0|1|2|3   time across ranks: 0 rank 0's, 1 average, 2 min, 3 max (default 1)\n"
    "  -T, --timeout S         end with exit 3 when any row takes longer than S seconds (default 0: none)\n"
    "  -R, --local_register 0|1  1: buffers from gyreMemAllocHost, registered, and GYRE_MAPPED_BUFFERS=1 (default 0: malloc)\n"
    "gyre:\n"
    "  --ranks N               fork N local ranks (otherwise ranks come from gyrerun, mpirun, srun, torchrun)\n"
    "  --bind core|none        with --ranks, pin rank i to CPU i\n"
    "  --transport shm|tcp     force a transport (default: shm within a host, tcp across)\n"
    "  --algo NAME             force an algorithm (default: the tuner's choice)\n"
    "  --skew K                alltoallv: each rank sends its next rank K times as much\n"
    "  --heads H, --kv-heads K, --head-dim D, --parts q|k|v|kv|qkv\n"
    "                          seqtoheads, headstoseq: the layout (default 32 heads, kv heads as many,\n"
    "                          head dim 128, q); a row is size / (width x D) tokens per rank\n"
    "  --codec none|fp16|bf16|int8|onebit\n"
    "                          allreduce, allgather, reducescatter compressed on the wire\n"
    "                          (-d float, half or bfloat16; -o sum or avg). Inputs get fractions;\n"
    "                          the check reports maxerr and rmserr in place of #wrong: the largest\n"
    "                          and the root-mean-square |result - exact| over every rank's output,\n"
    "                          relative to the largest |exact| value there; wire and plain: bytes\n"
    "                          a rank sends per call, compressed and uncompressed (busbw: plain)\n"
    "  --peers shift_one|ring|random\n"
    "                          peeraverage: the peers each call averages with (default ring);\n"
    "                          each call is the next step\n"
    "  --device host|cuda      cuda: buffers in GPU memory, calls on a CUDA stream (default host)\n"
    "output:\n"
    "  --percentiles           time each iteration; add p50/p99 latency columns\n"
    "  --stats                 after the table, every rank's calls, bytes, time and bytes sent by transport\n"
    "  --json FILE, --csv FILE every row and the run's settings\n"
    "  --plot FILE.svg|.png    busbw and latency against size\n"
    "  --label NAME            the run's name in plots and result files\n"
    "  -h, --help              this text\n"
    "exit status: 0 ok, 1 wrong results or a failed call, 2 bad usage, 3 -T timeout\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "gyre-bench: %s\n%scollectives: %s\n", why.c_str(), kUsage, collectiveNames().c_str());
  std::exit(2);
}

[[noreturn]] void help() {
  std::printf("%scollectives: %s\n", kUsage, collectiveNames().c_str());
  std::exit(0);
}

int parseInt(const std::string& flag, const char* v, int lo, int hi = 1 << 30) {
  char* end;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end || x < lo || x > hi) usage("bad value '" + std::string(v) + "' for " + flag);
  return static_cast<int>(x);
}

// nccl-tests' long names, mapped onto the short flags.
std::string shortFlag(const std::string& a) {
  static const char* const pairs[][2] = {
      {"--minbytes", "-b"}, {"--maxbytes", "-e"}, {"--stepfactor", "-f"}, {"--stepbytes", "-i"},
      {"--iters", "-n"},    {"--warmup_iters", "-w"}, {"--check", "-c"},  {"--datatype", "-d"},
      {"--op", "-o"},       {"--root", "-r"},     {"--average", "-a"},    {"--timeout", "-T"},
      {"--local_register", "-R"}, {"--help", "-h"}};
  for (const auto& p : pairs)
    if (a == p[0]) return p[1];
  return a;
}

void parseTypes(Options& o, const std::string& d) {
  o.dtypeArg = d;
  o.dtypes.clear();
  for (int t = 0; t < gyreNumTypes; ++t) {
    const auto type = static_cast<gyreDataType_t>(t);
    if (d == "all" || d == test::dtypeLabel(type) || d == typeName(type)) o.dtypes.push_back(type);
  }
  if (o.dtypes.empty()) usage("unknown dtype '" + d + "'");
}

void parseOps(Options& o, const std::string& op) {
  o.opArg = op;
  o.ops.clear();
  for (int k = 0; k < gyreNumOps; ++k)
    if (op == "all" || op == test::opLabel(static_cast<gyreRedOp_t>(k))) o.ops.push_back(static_cast<gyreRedOp_t>(k));
  if (o.ops.empty()) usage("unknown op '" + op + "'");
}

Aggregate parseAverage(const std::string& v) {
  for (int a = 0; a < 4; ++a)
    if (v == std::to_string(a) || v == aggregateName(static_cast<Aggregate>(a))) return static_cast<Aggregate>(a);
  usage("-a takes 0 (rank 0), 1 (avg), 2 (min) or 3 (max), not '" + v + "'");
}

gyrePeers_t parsePeers(const std::string& v) {
  const char* names[] = {"shift_one", "ring", "random"};
  for (int p = 0; p < gyreNumPeerSelections; ++p)
    if (v == names[p]) return static_cast<gyrePeers_t>(p);
  usage("--peers takes shift_one, ring or random, not '" + v + "'");
}

gyreCodec_t parseCodec(const std::string& v) {
  for (int c = 0; c < gyreNumCodecs; ++c)
    if (v == codecName(static_cast<gyreCodec_t>(c))) return static_cast<gyreCodec_t>(c);
  usage("--codec takes none, fp16, bf16, int8 or onebit, not '" + v + "'");
}

// What the compressed calls take (gyre.h): refused here, before measuring,
// rather than as a failed call.
void checkCodec(const Options& o) {
  if (o.codec == gyreCodecNone) return;
  if (!findCollective(o.collective)->lossy) usage("--codec is for allreduce, allgather and reducescatter");
  for (gyreDataType_t t : o.dtypes)
    if (t != gyreFloat32 && t != gyreFloat16 && t != gyreBfloat16)
      usage("--codec takes -d float, half or bfloat16, not " + std::string(typeName(t)));
  if (!findCollective(o.collective)->reduces) return;
  for (gyreRedOp_t op : o.ops)
    if (op != gyreSum && op != gyreAvg) usage("--codec takes -o sum or avg, not " + std::string(test::opLabel(op)));
}

double parseFactor(const char* v) {
  char* end;
  const double f = std::strtod(v, &end);
  if (end == v || *end) usage("bad value '" + std::string(v) + "' for -f");
  return f;
}

std::string fileName(const std::string& flag, const char* v) {
  if (!*v) usage(flag + " needs a file name");
  return v;
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

static int parseParts(const std::string& v) {
  int parts = 0;
  size_t at = 0;  // q, k, v in that order, each at most once
  for (auto [letter, bit] : {std::pair{'q', gyreSeqQ}, {'k', gyreSeqK}, {'v', gyreSeqV}})
    if (at < v.size() && v[at] == letter) parts |= bit, ++at;
  if (!parts || at != v.size()) usage("--parts takes q, k, v, kv, qk, qv or qkv, not '" + v + "'");
  return parts;
}

const char* typeName(gyreDataType_t t) {
  return t == gyreFloat32 ? "float" : t == gyreFloat16 ? "half" : t == gyreFloat64 ? "double" : test::dtypeLabel(t);
}

const char* codecName(gyreCodec_t c) {
  static const char* const names[] = {"none", "fp16", "bf16", "int8", "onebit"};
  static_assert(sizeof(names) / sizeof(names[0]) == gyreNumCodecs);
  return static_cast<int>(c) >= 0 && c < gyreNumCodecs ? names[c] : "?";
}

Options parseOptions(int argc, char** argv) {
  Options o;
  int i = 1;
  if (i < argc && argv[i][0] != '-') o.collective = argv[i++];
  bool factorGiven = false;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    std::string inlineValue;  // --flag=value
    bool hasInline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      inlineValue = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      hasInline = true;
    }
    a = shortFlag(a);
    auto next = [&]() -> const char* {
      if (hasInline) return hasInline = false, inlineValue.c_str();
      if (i + 1 >= argc) usage("missing value for " + a);
      return argv[++i];
    };
    if (a == "-h") help();
    else if (a == "-b") o.minBytes = parseBytes(next());
    else if (a == "-e") o.maxBytes = parseBytes(next());
    else if (a == "-f") { o.factor = parseFactor(next()); factorGiven = true; }
    else if (a == "-i") o.step = parseBytes(next());
    else if (a == "-n") o.iters = parseInt(a, next(), 1);
    else if (a == "-w") o.warmup = parseInt(a, next(), 0);
    else if (a == "-c") o.check = parseInt(a, next(), 0, 1) != 0;
    else if (a == "-r") o.root = parseInt(a, next(), 0);
    else if (a == "-T") o.timeoutSec = parseInt(a, next(), 0, 1 << 20);
    else if (a == "-a") o.average = parseAverage(next());
    else if (a == "-R") o.registered = parseInt(a, next(), 0, 1) != 0;
    else if (a == "-d") parseTypes(o, next());
    else if (a == "-o") parseOps(o, next());
    else if (a == "--ranks") o.spawn = parseInt(a, next(), 1, 4096);
    else if (a == "--skew") o.skew = parseInt(a, next(), 1);
    else if (a == "--heads") o.seqHeads = parseInt(a, next(), 1, 4095);
    else if (a == "--kv-heads") o.seqKvHeads = parseInt(a, next(), 0, 4095);
    else if (a == "--head-dim") o.seqHeadDim = static_cast<size_t>(parseInt(a, next(), 1, (1 << 20) - 1));
    else if (a == "--parts") o.seqParts = parseParts(next());
    else if (a == "--transport") o.transport = next();
    else if (a == "--algo") o.algo = next();
    else if (a == "--device") o.device = next();
    else if (a == "--codec") o.codec = parseCodec(next());
    else if (a == "--peers") o.peers = parsePeers(next());
    else if (a == "--percentiles") o.percentiles = true;
    else if (a == "--stats") o.commStats = true;
    else if (a == "--json") o.jsonPath = fileName(a, next());
    else if (a == "--csv") o.csvPath = fileName(a, next());
    else if (a == "--plot") o.plotPath = fileName(a, next());
    else if (a == "--label") o.label = next();
    else if (a == "--bind") {
      const std::string b = next();
      if (b != "core" && b != "none") usage("--bind takes core or none");
      o.bind = b == "core";
    } else {
      usage("unknown option " + a);
    }
    if (hasInline) usage(a + " takes no value");
  }
  if (o.collective.empty()) usage("which collective?");
  if (!findCollective(o.collective)) usage("unknown collective '" + o.collective + "'");
  if (o.step && !factorGiven) o.factor = 1;
  if ((o.factor <= 1 && !o.step) || o.minBytes > o.maxBytes) usage("bad sweep (-b, -e, -f, -i)");
  if (o.transport != "" && o.transport != "shm" && o.transport != "tcp") usage("--transport takes shm or tcp");
  if (o.device != "host" && o.device != "cuda") usage("--device takes host or cuda");
  checkCodec(o);
  if (o.seqKvHeads && o.seqHeads % o.seqKvHeads) usage("--kv-heads must divide --heads");
  if (o.device == "cuda" && o.registered) usage("-R 1 is for host buffers; --device cuda allocates device memory");
  std::string why;
  if (!o.plotPath.empty() && !plotPathUsable(o.plotPath, why)) usage(why);
  o.dtype = o.dtypes[0];
  o.op = o.ops[0];
  return o;
}

PlotArgs parsePlotArgs(int argc, char** argv) {
  PlotArgs p;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value for " + a);
      return argv[++i];
    };
    if (a == "-h" || a == "--help") help();
    else if (a == "-o") p.out = next();
    else if (a == "--title") p.title = next();
    else if (!a.empty() && a[0] == '-') usage("unknown option " + a + " for plot");
    else p.inputs.push_back(a);
  }
  if (p.out.empty()) usage("plot: which output file (-o FILE.svg)?");
  if (p.inputs.empty()) usage("plot: which result files (written by --json)?");
  std::string why;
  if (!plotPathUsable(p.out, why)) usage(why);
  return p;
}

}  // namespace gyre::bench
