// gyre-algo-sweep <op>: the tuner's choice against every fixed algorithm of
// one operation, measured in one run with the variants interleaved.
//
// Why not one gyre-bench launch per algorithm: this host's speed drifts 2-3x
// between launches (its two vCPUs move between fast and slow phases), more
// than the 10% the comparison must resolve. Here every variant is a
// communicator of its own (a split of one world, with its algorithm forced
// through gyreConfig_t.algo, or none for "auto" and for "online", which
// also sets gyreConfig_t.tunerOnline), and for every size the
// variants take turns, several rounds, in a rotating order: a slow phase
// hits them all alike. Each variant's time is the median over rounds of its
// per-call time (the slowest rank's).
//
//   gyre-algo-sweep allreduce --ranks 4 --bind -b 8 -e 256M -f 4 --rounds 5
//
// Sizes follow gyre-bench (nccl-tests' count column: the larger buffer, so
// for AllGather and AllToAll the whole result). -R 1 allocates with
// gyreMemAllocHost (set GYRE_MAPPED_BUFFERS=1 to let the tuner count on it).
// Prints a markdown table (bytes, each variant's time in us, the best fixed
// one, auto / best, online / best) and, with --json, writes the numbers.
//
//   gyre-algo-sweep --replay [--cores C] [--model TUNER_FILE] FILE.json...
//
// scores the tuner as built now against recorded sweeps, without running
// anything: for each row, the algorithm the cost model picks for that call
// (one host, every rank able to read the others, C cores: 2 by default, the
// host the recordings come from) and its recorded time against the best
// fixed one. A model change can so be checked against runs made in the
// host's different modes at once (docs/PERFORMANCE-collectives.md).
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/fork_ranks.h"
#include "collectives/planner.h"
#include "collectives/tuner.h"
#include "gyre/gyre.h"

namespace {

#define CHECKG(call)                                                                        \
  do {                                                                                      \
    gyreResult_t r_ = (call);                                                               \
    if (r_ != gyreSuccess) {                                                                \
      std::fprintf(stderr, "gyre-algo-sweep: %s failed: %s\n", #call, gyreGetLastError(nullptr)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

struct Options {
  std::string op;
  int ranks = 2;
  bool bind = false;
  size_t minBytes = 8, maxBytes = 64u << 20;
  double factor = 4;
  int rounds = 5;
  double targetMs = 20;  // time per variant per round at each size
  bool memAlloc = false;
  std::string json;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gyre-algo-sweep: %s\n"
               "usage: gyre-algo-sweep <allreduce|broadcast|reduce|allgather|reducescatter|alltoall>\n"
               "         [--ranks N] [--bind] [-b MIN] [-e MAX] [-f FACTOR] [--rounds R]\n"
               "         [--target-ms T] [-R 0|1] [--json FILE]\n"
               "       gyre-algo-sweep --replay [--cores C] [--model TUNER_FILE] FILE.json...\n",
               why);
  std::exit(2);
}

size_t parseSize(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) usage(("bad size " + s).c_str());
  const std::string unit(end);
  double mult = 1;
  if (unit == "K" || unit == "k") mult = 1024;
  else if (unit == "M" || unit == "m") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) usage(("bad size " + s).c_str());
  return static_cast<size_t>(v * mult);
}

Options parse(int argc, char** argv) {
  Options o;
  if (argc < 2) usage("which operation?");
  o.op = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--ranks") o.ranks = std::atoi(next().c_str());
    else if (a == "--bind") o.bind = true;
    else if (a == "-b") o.minBytes = parseSize(next());
    else if (a == "-e") o.maxBytes = parseSize(next());
    else if (a == "-f") o.factor = std::atof(next().c_str());
    else if (a == "--rounds") o.rounds = std::atoi(next().c_str());
    else if (a == "--target-ms") o.targetMs = std::atof(next().c_str());
    else if (a == "-R") o.memAlloc = next() != "0";
    else if (a == "--json") o.json = next();
    else usage(("unknown argument " + a).c_str());
  }
  if (o.ranks < 2 || o.factor <= 1 || o.rounds < 1 || o.targetMs <= 0 || o.minBytes == 0 || o.minBytes > o.maxBytes)
    usage("bad --ranks, -f, --rounds, --target-ms, -b or -e");
  return o;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The variants that let the library choose: the cost model alone (auto),
// and the model's candidates timed by the calls (GYRE_TUNER_ONLINE=1). The
// other variants are fixed algorithms.
const std::array<std::string, 2> kTuned = {"auto", "online"};
bool isTuned(const std::string& v) { return std::find(kTuned.begin(), kTuned.end(), v) != kTuned.end(); }

// The algorithms of the operation named as GYRE_ALGO names it.
std::vector<std::string> algorithmsOf(const std::string& op) {
  std::vector<std::string> names;
  for (const gyre::collectives::Algorithm& a : gyre::collectives::algorithms())
    if (op == gyre::collectives::opKindName(a.op)) names.push_back(a.name);
  return names;
}

// One call of `bytes` (gyre-bench's row size) in float32 elements.
struct Shape {
  size_t count, sendBytes, recvBytes;
};
Shape shapeOf(const std::string& op, size_t bytes, int n) {
  const size_t elems = std::max<size_t>(1, bytes / 4);
  if (op == "allgather" || op == "alltoall" || op == "reducescatter") {
    const size_t block = std::max<size_t>(1, elems / size_t(n));
    if (op == "allgather") return {block, block * 4, block * 4 * n};
    if (op == "reducescatter") return {block, block * 4 * n, block * 4};
    return {block, block * 4 * n, block * 4 * n};
  }
  return {elems, elems * 4, elems * 4};
}

gyreResult_t call(const std::string& op, const Shape& s, void* send, void* recv, gyreComm_t comm) {
  if (op == "allreduce") return gyreAllReduce(send, recv, s.count, gyreFloat32, gyreSum, comm, nullptr);
  if (op == "broadcast") return gyreBroadcast(send, recv, s.count, gyreFloat32, 0, comm, nullptr);
  if (op == "reduce") return gyreReduce(send, recv, s.count, gyreFloat32, gyreSum, 0, comm, nullptr);
  if (op == "allgather") return gyreAllGather(send, recv, s.count, gyreFloat32, comm, nullptr);
  if (op == "reducescatter") return gyreReduceScatter(send, recv, s.count, gyreFloat32, gyreSum, comm, nullptr);
  return gyreAllToAll(send, recv, s.count, gyreFloat32, comm, nullptr);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string fmtBytes(size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

int runRank(const Options& o, int rank, gyreComm_t world) {
  const std::vector<std::string> algos = algorithmsOf(o.op);
  std::vector<std::string> variants(kTuned.begin(), kTuned.end());
  variants.insert(variants.end(), algos.begin(), algos.end());
  std::vector<gyreComm_t> comms;
  for (const std::string& v : variants) {
    gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
    const std::string spec = o.op + ":" + v;
    config.algo = isTuned(v) ? "" : spec.c_str();
    config.tunerOnline = v == "online" ? 1 : 0;
    gyreComm_t c = nullptr;
    CHECKG(gyreCommSplit(world, 0, rank, &c, &config));
    comms.push_back(c);
  }
  const int n = o.ranks;
  std::vector<size_t> sizes;
  for (double b = double(o.minBytes); b <= double(o.maxBytes) * 1.0001; b *= o.factor) sizes.push_back(size_t(b));
  const Shape biggest = shapeOf(o.op, sizes.back(), n);
  void *send = nullptr, *recv = nullptr;
  if (o.memAlloc) {
    CHECKG(gyreMemAllocHost(&send, biggest.sendBytes));
    CHECKG(gyreMemAllocHost(&recv, biggest.recvBytes));
  } else {
    send = std::malloc(biggest.sendBytes);
    recv = std::malloc(biggest.recvBytes);
  }
  std::memset(send, 0, biggest.sendBytes);  // zeros: any op, no overflow
  std::memset(recv, 0, biggest.recvBytes);

  // times[size][variant]: medians over rounds, us per call.
  std::vector<std::vector<double>> times(sizes.size(), std::vector<double>(variants.size()));
  for (size_t si = 0; si < sizes.size(); ++si) {
    const Shape s = shapeOf(o.op, sizes[si], n);
    // Warm up every variant (its first calls connect and map), then size
    // its batches: about --target-ms per round each, the same count on
    // every rank.
    std::vector<int> iters(variants.size());
    for (size_t v = 0; v < variants.size(); ++v) {
      auto timeCalls = [&](int count) {  // seconds per call, the slowest rank's
        CHECKG(gyreBarrier(world, nullptr));
        const double t0 = now();
        for (int i = 0; i < count; ++i) CHECKG(call(o.op, s, send, recv, comms[v]));
        double each = (now() - t0) / count;
        CHECKG(gyreAllReduce(&each, &each, 1, gyreFloat64, gyreMax, world, nullptr));
        return each;
      };
      for (int i = 0; i < 3; ++i) CHECKG(call(o.op, s, send, recv, comms[v]));
      double each = timeCalls(3);
      if (variants[v] == "online") {
        // Its trials first (online_tuner.h: up to 4 candidates x 5 trials
        // of about 500 us or one call each): 300 ms of calls, 20 at least.
        // Its steady state is what is compared, as a training loop's
        // thousands of calls see it.
        for (int i = 0, warm = std::clamp(static_cast<int>(0.3 / std::max(each, 1e-7)), 20, 10000000); i < warm; ++i)
          CHECKG(call(o.op, s, send, recv, comms[v]));
        each = timeCalls(3);
      }
      iters[v] = std::clamp(static_cast<int>(o.targetMs / 1e3 / std::max(each, 1e-7)), 1, 20000);
    }
    std::vector<std::vector<double>> perRound(variants.size());
    for (int round = 0; round < o.rounds; ++round)
      for (size_t k = 0; k < variants.size(); ++k) {
        const size_t v = (k + size_t(round)) % variants.size();  // rotate who goes first
        CHECKG(gyreBarrier(world, nullptr));
        const double t0 = now();
        for (int i = 0; i < iters[v]; ++i) CHECKG(call(o.op, s, send, recv, comms[v]));
        double us = (now() - t0) / iters[v] * 1e6;
        CHECKG(gyreAllReduce(&us, &us, 1, gyreFloat64, gyreMax, world, nullptr));
        perRound[v].push_back(us);
      }
    for (size_t v = 0; v < variants.size(); ++v) times[si][v] = median(perRound[v]);
  }

  if (rank == 0) {
    std::printf("#### %s, %d ranks (us per call, median of %d interleaved rounds)\n\n| bytes |", o.op.c_str(), n,
                o.rounds);
    for (const std::string& v : variants) std::printf(" %s |", v.c_str());
    std::printf(" best fixed | auto / best | online / best |\n|---|");
    for (size_t v = 0; v < variants.size() + 3; ++v) std::printf("---|");
    std::printf("\n");
    int within = 0, onlineWithin = 0;
    std::string json = "{\"op\": \"" + o.op + "\", \"ranks\": " + std::to_string(n) + ", \"variants\": [";
    for (size_t v = 0; v < variants.size(); ++v) json += (v ? ", \"" : "\"") + variants[v] + "\"";
    json += "], \"rows\": [";
    for (size_t si = 0; si < sizes.size(); ++si) {
      std::printf("| %s |", fmtBytes(sizes[si]).c_str());
      size_t best = kTuned.size();
      for (size_t v = kTuned.size(); v < variants.size(); ++v)
        if (times[si][v] < times[si][best]) best = v;
      for (size_t v = 0; v < variants.size(); ++v) std::printf(v == best ? " **%.1f** |" : " %.1f |", times[si][v]);
      const double ratio = times[si][0] / times[si][best], onlineRatio = times[si][1] / times[si][best];
      within += ratio <= 1.10;
      onlineWithin += onlineRatio <= 1.10;
      std::printf(" %s | %.2f | %.2f |\n", variants[best].c_str(), ratio, onlineRatio);
      json += std::string(si ? ", " : "") + "{\"bytes\": " + std::to_string(sizes[si]) + ", \"us\": [";
      for (size_t v = 0; v < variants.size(); ++v) json += (v ? ", " : "") + std::to_string(times[si][v]);
      json += "]}";
    }
    json += "]}\n";
    std::printf("\nWithin 10%% of the best fixed algorithm: auto at %d of %zu sizes, online at %d.\n\n", within,
                sizes.size(), onlineWithin);
    if (!o.json.empty()) std::ofstream(o.json) << json;
  }
  for (gyreComm_t c : comms) CHECKG(gyreCommDestroy(c));
  if (o.memAlloc) {
    CHECKG(gyreMemFree(send));
    CHECKG(gyreMemFree(recv));
  } else {
    std::free(send);
    std::free(recv);
  }
  CHECKG(gyreCommDestroy(world));
  return 0;
}

// A communicator as the tuner sees it, for replays: one host, n ranks.
class ReplayEnv final : public gyre::collectives::PlanEnv {
 public:
  ReplayEnv(int n, int cores, const gyre::collectives::CostModel& model) : n_(n) {
    world_ = gyre::collectives::Group::all(0, n);
    tuning_.perHost = n;
    tuning_.cores = cores;
    tuning_.model = model;
  }
  const gyre::collectives::TuningParams& tuning() const override { return tuning_; }
  int rank() const override { return 0; }
  int nranks() const override { return n_; }
  const gyre::collectives::Group& world() const override { return world_; }
  bool sameHost(int) const override { return true; }
  int hostIndex(int) const override { return 0; }
  size_t chunkBytes(std::span<const int>) override { return tuning_.localChunk; }
  bool canReadPeerMemory() const override { return true; }

 private:
  int n_;
  gyre::collectives::Group world_;
  gyre::collectives::TuningParams tuning_;
};

int replay(int argc, char** argv) {
  int cores = 2, within = 0, rows = 0;
  std::vector<std::string> files;
  gyre::collectives::CostModel model;  // built in, unless --model names a tuner file
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cores" && i + 1 < argc) {
      cores = std::atoi(argv[++i]);
    } else if (a == "--model" && i + 1 < argc) {
      try {
        model = gyre::collectives::CostModel::load(argv[++i]);
      } catch (const std::exception& e) {
        usage(e.what());
      }
    } else {
      files.push_back(a);
    }
  }
  if (files.empty() || cores < 1) usage("--replay needs recorded JSON files");
  for (const std::string& f : files) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(std::ifstream(f));
    } catch (const std::exception& e) {
      usage((f + ": " + e.what()).c_str());
    }
    const std::string op = j.at("op");
    const int n = j.at("ranks");
    const std::vector<std::string> variants = j.at("variants");
    ReplayEnv env(n, cores, model);
    gyre::collectives::OpKind kind{};
    bool known = false;
    for (const auto& a : gyre::collectives::algorithms())
      if (op == gyre::collectives::opKindName(a.op)) kind = a.op, known = true;
    if (!known) usage((f + ": unknown operation " + op).c_str());
    int in = 0, count = 0;
    std::string misses;
    for (const auto& row : j.at("rows")) {
      const size_t bytes = row.at("bytes");
      const std::vector<double> us = row.at("us");
      gyre::collectives::CallRequest req;
      req.desc.kind = kind;
      req.elemSize = 4;
      req.desc.count = shapeOf(op, bytes, n).count;
      const std::string pick = gyre::collectives::chooseAlgorithm(req, env)->name;
      size_t best = SIZE_MAX, picked = SIZE_MAX;
      for (size_t v = 0; v < variants.size() && v < us.size(); ++v) {
        if (isTuned(variants[v])) continue;
        if (best == SIZE_MAX || us[v] < us[best]) best = v;
        if (variants[v] == pick) picked = v;
      }
      if (picked == SIZE_MAX) usage((f + ": the model picks " + pick + ", which the recording lacks").c_str());
      const double ratio = us[picked] / us[best];
      ++count;
      if (ratio <= 1.10) {
        ++in;
      } else {
        char m[128];
        std::snprintf(m, sizeof m, " %s:%s(%.2f; %s)", fmtBytes(bytes).c_str(), pick.c_str(), ratio,
                      variants[best].c_str());
        misses += m;
      }
    }
    std::printf("%s: %s, %d ranks: the model's pick within 10%% of the best at %d of %d sizes%s\n", f.c_str(),
                op.c_str(), n, in, count, misses.c_str());
    within += in;
    rows += count;
  }
  std::printf("total: %d of %d\n", within, rows);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 1 && std::string(argv[1]) == "--replay") return replay(argc, argv);
  const Options o = parse(argc, argv);
  const std::vector<std::string> ops = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"};
  if (std::find(ops.begin(), ops.end(), o.op) == ops.end() || algorithmsOf(o.op).empty())
    usage(("no algorithms to compare for operation " + o.op).c_str());
  return gyre::bench::forkRanks(o.ranks, o.bind, [&](int rank, gyreComm_t world) { return runRank(o, rank, world); });
}
