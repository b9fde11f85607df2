#include "harness/train/options.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>

namespace gyre::harness {

namespace {

long long integer(const std::string& flag, const std::string& value, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    throw UsageError(flag + " takes a whole number from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", not '" + value + "'");
  }
  return v;
}

float real(const std::string& flag, const std::string& value, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= lo && v <= hi)) {
    throw UsageError(flag + " takes a number from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", not '" + value + "'");
  }
  return static_cast<float>(v);
}

std::string oneOf(const std::string& flag, const std::string& value,
                  const std::vector<std::string>& choices) {
  std::string list;
  for (const std::string& c : choices) {
    if (c == value) return value;
    list += (list.empty() ? "" : "|") + c;
  }
  throw UsageError(flag + " takes " + list + ", not '" + value + "'");
}

// --elastic MIN:MAX, 1 <= MIN <= MAX.
void elasticRange(const std::string& flag, const std::string& value, TrainOptions& o) {
  const size_t colon = value.find(':');
  if (colon == std::string::npos)
    throw UsageError(flag + " takes MIN:MAX (the fewest and the most ranks to go on with), not '" + value + "'");
  o.elasticMin = static_cast<int>(integer(flag + "'s MIN", value.substr(0, colon), 1, 4096));
  o.elasticMax = static_cast<int>(integer(flag + "'s MAX", value.substr(colon + 1), 1, 4096));
  if (o.elasticMin > o.elasticMax)
    throw UsageError(flag + " " + value + ": MIN is above MAX");
}

// What elastic training needs: it varies data parallelism alone, restarts
// from checkpoints, and must split the global batch over any count it may
// meet, so that every count trains the same batches.
void checkElastic(const TrainOptions& o) {
  const std::string e = "--elastic " + std::to_string(o.elasticMin) + ":" + std::to_string(o.elasticMax);
  if (o.checkpointDir.empty() || o.checkpointEvery <= 0)
    throw UsageError(e + " needs --checkpoint-dir and --checkpoint-every: a lost rank's work is redone "
                         "from the last checkpoint, where new processes join too");
  if (o.dp != 0 || o.sp != 1 || o.tp != 1 || o.pp != 1 || o.ep != 1 || o.flexsp)
    throw UsageError(e + " varies data parallelism over whoever is there: no --dp, --sp, --tp, --pp, "
                         "--ep or --flexsp");
  if (o.codec != "none" || !o.decentralized.empty())
    throw UsageError(e + " needs exact data parallelism (no --codec, no --decentralized)");
  const int micro = o.microBatches > 0 ? o.microBatches : 1;
  for (int n = o.elasticMin; n <= o.elasticMax; ++n)
    if (o.batch % (n * micro) != 0)
      throw UsageError(e + ": --batch " + std::to_string(o.batch) + " does not split into " + std::to_string(n) +
                       " ranks x " + std::to_string(micro) + " micro-batches; it must for every count from MIN to "
                       "MAX (e.g. --batch 12 for 2:4)");
}

}  // namespace

std::string trainUsage() {
  return "usage: gyre-train [--dp N] [--sp N] [--tp N] [--pp N] [--zero 0-3]\n"
         "                  [--codec none|fp16|bf16|int8|onebit]\n"
         "                  [--decentralized ring|shift_one|random] [--schedule gpipe|1f1b]\n"
         "                  [--micro-batches M] [--steps N] [--batch B] [--seq T] [--layers L]\n"
         "                  [--dim C] [--heads H] [--experts E] [--top-k K] [--ep N]\n"
         "                  [--capacity-factor X] [--aux-coef X] [--lr X] [--min-lr X] [--warmup N] [--clip X]\n"
         "                  [--weight-decay X] [--seed S] --data TEXT [--checkpoint-dir DIR]\n"
         "                  [--checkpoint-every N] [--resume] [--elastic MIN:MAX] [--log FILE.jsonl]\n"
         "                  [--plot FILE.svg|png] [--quiet]\n"
         "                  [--flexsp [--flexsp-median N] [--flexsp-sigma X] [--flexsp-min N]\n"
         "                   [--flexsp-memory TOKENS] [--flexsp-plan-seconds X] "
         "[--flexsp-ulysses]\n"
         "                   [--flexsp-attention-seconds A] [--flexsp-linear-seconds B]]\n"
         "       gyre-train --plot FILE.svg|png LOG.jsonl [LOG.jsonl ...]   (draw earlier runs)\n"
         "Run it under gyrerun, torchrun, mpirun or srun; dp x sp x tp x pp must be the rank count.\n"
         "Testing aids: GYRE_TRAIN_KILL_AFTER_STEP=N in the environment ends every rank with\n"
         "status 137, as a crash would, right after step N and its checkpoint are done;\n"
         "GYRE_TRAIN_KILL_RANK=R:N kills the process that started as rank R with SIGKILL as\n"
         "step N begins (for --elastic).\n";
}

TrainOptions parseTrainOptions(int argc, const char* const* argv) {
  TrainOptions o;
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  const std::map<std::string, Setter> valued = {
      {"--dp", [&](auto& f, auto& v) { o.dp = integer(f, v, 1, 4096); }},
      {"--sp", [&](auto& f, auto& v) { o.sp = integer(f, v, 1, 4096); }},
      {"--tp", [&](auto& f, auto& v) { o.tp = integer(f, v, 1, 4096); }},
      {"--pp", [&](auto& f, auto& v) { o.pp = integer(f, v, 1, 4096); }},
      {"--zero", [&](auto& f, auto& v) { o.zero = integer(f, v, 0, 3); }},
      {"--codec",
       [&](auto& f, auto& v) {
         o.codec = oneOf(f, v, {"none", "fp16", "bf16", "int8", "onebit"});
       }},
      {"--decentralized",
       [&](auto& f, auto& v) {
         o.decentralized = oneOf(f, v, {"ring", "shift_one", "random"});
       }},
      {"--schedule",
       [&](auto& f, auto& v) {
         o.schedule = oneOf(f, v, {"gpipe", "1f1b"});
       }},
      {"--micro-batches", [&](auto& f, auto& v) { o.microBatches = integer(f, v, 1, 1 << 16); }},
      {"--steps", [&](auto& f, auto& v) { o.steps = integer(f, v, 0, 1LL << 40); }},
      {"--batch", [&](auto& f, auto& v) { o.batch = integer(f, v, 1, 1 << 20); }},
      {"--seq", [&](auto& f, auto& v) { o.seq = integer(f, v, 1, 1 << 16); }},
      {"--layers", [&](auto& f, auto& v) { o.layers = integer(f, v, 1, 1024); }},
      {"--dim", [&](auto& f, auto& v) { o.dim = integer(f, v, 1, 1 << 16); }},
      {"--heads", [&](auto& f, auto& v) { o.heads = integer(f, v, 1, 1024); }},
      {"--experts", [&](auto& f, auto& v) { o.experts = integer(f, v, 0, 1024); }},
      {"--ep", [&](auto& f, auto& v) { o.ep = integer(f, v, 1, 4096); }},
      {"--top-k", [&](auto& f, auto& v) { o.topK = integer(f, v, 1, 1024); }},
      {"--capacity-factor", [&](auto& f, auto& v) { o.capacityFactor = real(f, v, 0, 1e6); }},
      {"--aux-coef", [&](auto& f, auto& v) { o.auxCoef = real(f, v, 0, 1e6); }},
      {"--seed", [&](auto& f, auto& v) { o.seed = integer(f, v, 0, (1LL << 62)); }},
      {"--lr", [&](auto& f, auto& v) { o.lr = real(f, v, 0, 10); }},
      {"--min-lr", [&](auto& f, auto& v) { o.minLr = real(f, v, 0, 10); }},
      {"--warmup", [&](auto& f, auto& v) { o.warmup = integer(f, v, 0, 1 << 30); }},
      {"--clip", [&](auto& f, auto& v) { o.clip = real(f, v, 0, 1e30); }},
      {"--weight-decay", [&](auto& f, auto& v) { o.weightDecay = real(f, v, 0, 10); }},
      {"--data", [&](auto&, auto& v) { o.data = v; }},
      {"--checkpoint-dir", [&](auto&, auto& v) { o.checkpointDir = v; }},
      {"--checkpoint-every",
       [&](auto& f, auto& v) { o.checkpointEvery = integer(f, v, 0, 1LL << 40); }},
      {"--log", [&](auto&, auto& v) { o.log = v; }},
      {"--elastic", [&](auto& f, auto& v) { elasticRange(f, v, o); }},
      {"--plot", [&](auto&, auto& v) { o.plot = v; }},
      {"--flexsp-median", [&](auto& f, auto& v) { o.flexspMedian = real(f, v, 1, 1e9); }},
      {"--flexsp-sigma", [&](auto& f, auto& v) { o.flexspSigma = real(f, v, 0, 100); }},
      {"--flexsp-attention-seconds",
       [&](auto& f, auto& v) { o.flexspAttentionSeconds = real(f, v, 0, 1); }},
      {"--flexsp-linear-seconds",
       [&](auto& f, auto& v) { o.flexspLinearSeconds = real(f, v, 0, 1); }},
      {"--flexsp-min", [&](auto& f, auto& v) { o.flexspMin = integer(f, v, 1, 1 << 16); }},
      {"--flexsp-memory", [&](auto& f, auto& v) { o.flexspMemory = integer(f, v, 1, 1LL << 40); }},
      {"--flexsp-plan-seconds",
       [&](auto& f, auto& v) { o.flexspPlanSeconds = real(f, v, 0, 3600); }},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--resume") {
      o.resume = true;
    } else if (arg == "--flexsp-ulysses") {
      o.flexsp = o.flexspUlysses = true;
    } else if (arg == "--flexsp") {
      o.flexsp = true;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    } else if (auto it = valued.find(arg); it != valued.end()) {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      it->second(arg, argv[++i]);
    } else if (arg.starts_with("--")) {
      throw UsageError("unknown option " + arg + "\n" + trainUsage());
    } else {
      o.plotLogs.push_back(arg);
    }
  }
  if (!o.plotLogs.empty() && o.plot.empty())
    throw UsageError("'" + o.plotLogs[0] + "': logs on the command line are for --plot");
  if (o.plotLogs.empty() && o.data.empty())
    throw UsageError("--data is required (a text file to train on)");
  if (!o.plotLogs.empty() && !o.data.empty())
    throw UsageError("give either --data (train) or logs to --plot (draw), not both");
  if (o.resume && o.checkpointDir.empty()) throw UsageError("--resume needs --checkpoint-dir");
  if (o.elasticMax > 0) checkElastic(o);
  if (o.dim % o.heads != 0)
    throw UsageError("--dim " + std::to_string(o.dim) + " is not a multiple of --heads " +
                     std::to_string(o.heads));
  if (o.heads % o.tp != 0)
    throw UsageError("--tp " + std::to_string(o.tp) + " does not divide --heads " +
                     std::to_string(o.heads));
  if (o.seq % o.sp != 0)
    throw UsageError("--sp " + std::to_string(o.sp) + " does not divide --seq " +
                     std::to_string(o.seq) + " (each rank takes an equal run of every sequence)");
  if (o.sp > 1 && (o.codec != "none" || !o.decentralized.empty()))
    throw UsageError(
        "--sp needs exact data parallelism: its ranks must hold the same parameters, which "
        "--codec and --decentralized do not keep");
  if (o.experts > 0 && o.topK > o.experts)
    throw UsageError("--top-k " + std::to_string(o.topK) + " is more than --experts " +
                     std::to_string(o.experts));
  if (o.experts > 0 && o.tp > 1)
    throw UsageError("--experts with --tp: a mixture of experts is not split by tensor parallelism");
  if (o.ep > 1 && (o.experts == 0 || o.experts % o.ep != 0))
    throw UsageError("--ep " + std::to_string(o.ep) + " spreads a mixture's experts over that "
                     "many ranks: it needs --experts a multiple of it (got " +
                     std::to_string(o.experts) + ")");
  if (o.ep > 1 && o.zero > 0)
    throw UsageError("--ep with --zero " + std::to_string(o.zero) +
                     ": ZeRO's shards cut one flat layout, and expert-parallel ranks hold "
                     "different experts in theirs; use --zero 0");
  if (o.ep > 1 && (o.codec != "none" || !o.decentralized.empty()))
    throw UsageError("--ep needs exact data parallelism (no --codec, no --decentralized)");
  if (o.pp > o.layers)
    throw UsageError("--pp " + std::to_string(o.pp) + " stages need at least as many --layers (" +
                     std::to_string(o.layers) + ")");
  if (o.zero >= 2 && o.pp > 1)
    throw UsageError(
        "--zero " + std::to_string(o.zero) +
        " with --pp: stages 2 and 3 reduce gradients during backward, which a pipeline's "
        "micro-batches accumulate; use --zero 0 or 1 with a pipeline");
  if (o.codec != "none" && o.zero > 0)
    throw UsageError(
        "--codec compresses the data-parallel AllReduce of --zero 0; not with --zero " +
        std::to_string(o.zero));
  if (!o.decentralized.empty() && (o.zero > 0 || o.codec == "onebit"))
    throw UsageError(
        "--decentralized averages whole replicas: it needs --zero 0 (and no onebit codec)");
  if ((o.codec != "none" || !o.decentralized.empty()) && (o.pp > 1 || o.microBatches > 1)) {
    throw UsageError(
        "--codec and --decentralized reduce during one backward: not with --pp or "
        "--micro-batches");
  }
  if (o.flexsp) {
    // FlexSP plans each step's sequence-parallel groups over data
    // parallelism on the whole world: the other axes are not for it.
    auto refuse = [](const std::string& why) { throw UsageError("--flexsp " + why); };
    if (o.sp > 1) refuse("chooses each step's sequence-parallel groups itself: drop --sp");
    if (o.tp > 1) refuse("with --tp: its groups split sequences over whole replicas; use --tp 1");
    if (o.pp > 1) refuse("with --pp: its groups run whole models; use --pp 1");
    if (o.codec != "none" || !o.decentralized.empty())
      refuse("needs exact data parallelism (no --codec, no --decentralized)");
    if (o.zero >= 2) refuse("with --zero " + std::to_string(o.zero) + ": use --zero 0 or 1");
    if (o.experts > 0) refuse("with --experts: not for a mixture of experts");
    if (o.microBatches > 1) refuse("with --micro-batches: each group's sequences are its passes");
  } else if (o.flexspMedian > 0 || o.flexspMin > 0 || o.flexspMemory > 0) {
    throw UsageError("--flexsp-median, --flexsp-min and --flexsp-memory need --flexsp");
  }
  if (o.microBatches == 0) o.microBatches = o.pp > 1 ? 2 * o.pp : 1;
  if (!o.plot.empty() && !o.plot.ends_with(".svg") && !o.plot.ends_with(".png"))
    throw UsageError("--plot writes FILE.svg or FILE.png, not '" + o.plot + "'");
  return o;
}

void resolveMesh(TrainOptions& o, int ranks) {
  const int others = o.sp * o.tp * o.pp;
  const std::string named = (o.sp > 1 ? "--sp " + std::to_string(o.sp) + " x " : std::string()) +
                            "--tp " + std::to_string(o.tp) + " x --pp " + std::to_string(o.pp);
  if (o.dp == 0) {
    if (ranks % others != 0) {
      throw UsageError(named + " does not divide the job's " + std::to_string(ranks) + " ranks");
    }
    o.dp = ranks / others;
  }
  if (o.dp * others != ranks) {
    throw UsageError("--dp " + std::to_string(o.dp) + " x " + named + " is " +
                     std::to_string(o.dp * others) + " ranks; the job has " +
                     std::to_string(ranks));
  }
  if ((o.dp * o.sp) % o.ep != 0) {
    throw UsageError("--ep " + std::to_string(o.ep) + " does not divide the data group (--dp " +
                     std::to_string(o.dp) + " x --sp " + std::to_string(o.sp) +
                     "), whose ranks it spreads the experts over");
  }
  if ((o.dp & (o.dp - 1)) != 0 && o.flexsp)
    throw UsageError(
        "--flexsp on " + std::to_string(ranks) +
        " ranks: its groups are powers of two covering the world, which must be one too");
  if (o.flexsp && o.flexspMin == 0) o.flexspMin = ranks;
  if (!o.flexsp && o.batch % (o.dp * o.microBatches) != 0) {
    throw UsageError("--batch " + std::to_string(o.batch) + " does not split into " +
                     std::to_string(o.dp) + " data-parallel ranks x " +
                     std::to_string(o.microBatches) + " micro-batches");
  }
}

}  // namespace gyre::harness
