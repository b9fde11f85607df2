// gyre-sim <collective> [options]: what gyre would do on a simulated
// cluster, per size, in the nccl-tests layout (docs/simulator.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/parse.h"
#include "busbw_plot.h"
#include "sim/cluster_file.h"
#include "sim/simulate.h"

namespace {

using gyre::collectives::OpKind;

struct Op {
  const char* name;
  OpKind kind;
  bool blocks;    // size is n blocks: the API's count is a block's
  bool reduces;
  bool rooted;
  double (*busFactor)(int n);
};

const Op kOps[] = {
    {"allreduce", OpKind::AllReduce, false, true, false, [](int n) { return 2.0 * (n - 1) / n; }},
    {"allgather", OpKind::AllGather, true, false, false, [](int n) { return double(n - 1) / n; }},
    {"reducescatter", OpKind::ReduceScatter, true, true, false, [](int n) { return double(n - 1) / n; }},
    {"alltoall", OpKind::AllToAll, true, false, false, [](int n) { return double(n - 1) / n; }},
    {"broadcast", OpKind::Broadcast, false, false, true, [](int) { return 1.0; }},
    {"reduce", OpKind::Reduce, false, true, true, [](int) { return 1.0; }},
};

int usage(FILE* to) {
  std::fprintf(to,
               "usage: gyre-sim <allreduce|allgather|reducescatter|alltoall|broadcast|reduce> [options]\n"
               "  --cluster FILE         a cluster description (JSON or XML, docs/simulator.md; examples in\n"
               "                         examples/clusters/); the cluster flags below override its values\n"
               "  --hosts N              hosts (1)\n"
               "  --ranks-per-host N     GPUs or processes per host (8)\n"
               "  --nics-per-host N      NICs per host, dividing the ranks (8: one per rank)\n"
               "  --nic-gbit X           each NIC's rate, Gbit/s (400)\n"
               "  --intra-gbytes X       each rank's port into its host's switch, GB/s each way (450)\n"
               "  --host-memory-gbytes X what all of a host's transfers share, GB/s (0: no limit; CPU\n"
               "                         ranks: the memory's copy rate, ranks sharing a GPU: its HBM)\n"
               "  --cache-mbytes X --cache-speedup K\n"
               "                         a host's cache, MiB, and how much faster a call whose buffers fit\n"
               "                         in it runs within the host (0 and 1: no cache modelled)\n"
               "  --shared-core-cache-speedup K\n"
               "                         the cache's speed-up where a core runs more than one rank (0:\n"
               "                         --cache-speedup)\n"
               "  --cache-rank-kbytes X  what each rank keeps in the cache beside a call's buffers, KiB\n"
               "  --fifo-slot-kbytes X --fifo-slots N\n"
               "                         a host's ranks talk through FIFOs of N slots (8) of X KiB, as\n"
               "                         gyre's shared memory does (0: none; GPUs' stores land in place)\n"
               "  --cores-per-host N --core-gbytes X --core-read-gbytes Y --core-switch-us S\n"
               "                         ranks as processes on N cores a host (rank r on core r %% N), each\n"
               "                         core one resource for all its ranks' copies and reductions: X GB/s\n"
               "                         into a FIFO, Y out of one, S us to run a rank that slept again\n"
               "                         where ranks share a core (N 0: not modelled; X 0: the copy rate,\n"
               "                         Y 0: X)\n"
               "  --peer-read-gbytes X   where cores are modelled, a core's rate reading a peer's memory\n"
               "                         through the kernel (the single-copy algorithms; 0: the core's)\n"
               "  --second-write-cost X  where cores are modelled, what a copy that also writes its output\n"
               "                         as it fills a FIFO slot pays for that, per byte, as a fraction of\n"
               "                         a FIFO copy's (0)\n"
               "  --hosts-per-leaf N     hosts under one leaf switch (32)\n"
               "  --oversubscription X   leaf uplinks' oversubscription (1)\n"
               "  --nic-us X --intra-us X --switch-us X\n"
               "                         latencies, microseconds: each NIC end (2), a host's switch (1), a\n"
               "                         network switch (0.5)\n"
               "  --copy-gbytes X --reduce-gbytes X --step-us X\n"
               "                         each rank's copy and reduction rates, GB/s (1500), and software\n"
               "                         cost per step, microseconds (2)\n"
               "  -b SIZE -e SIZE -f N   sizes from -b to -e, times -f each (8, 64M, 4)\n"
               "  --algo SPEC            force algorithms, as GYRE_ALGO does\n"
               "  --trace FILE           a Chrome trace of the last size's simulated steps\n"
               "  --plot FILE            an SVG chart of busbw against size for the rows printed (with\n"
               "                         --compare: a line per algorithm and the tuner's choice)\n"
               "  --compare              every algorithm of the collective at each size: the tuner's\n"
               "                         choice against the fastest simulated\n"
               "  --model FILE           the links and rates of a cost model file (GYRE_TUNER_DUMP_FILE's;\n"
               "                         'builtin' for gyre's built-in one): ranks as processes on hosts like\n"
               "                         the one it was measured on, each rank its own network stream; the\n"
               "                         flags above override it (not with --cluster: both describe the hosts)\n");
  return to == stderr ? 2 : 0;
}

double number(const char* v, const char* name) {
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0') gyre::throwError(gyreInvalidArgument, std::string(name) + " wants a number, not " + v);
  return x;
}

// Every algorithm of the operation on the same call: which the simulation
// finds fastest, against the tuner's choice (chosen). Returns each
// algorithm's simulated seconds (NaN where it cannot run), for --plot.
std::vector<std::pair<std::string, double>> compareAlgorithms(const gyre::sim::ClusterSpec& spec, const gyre::collectives::CallRequest& req,
                       const gyre::sim::CallResult& chosen, OpKind kind, const gyre::collectives::CostModel* model) {
  std::string best = chosen.algorithm;
  double bestSeconds = chosen.run.seconds;
  std::string line;
  std::vector<std::pair<std::string, double>> seconds;
  for (const gyre::collectives::Algorithm& a : gyre::collectives::algorithms()) {
    if (a.op != kind) continue;
    char cell[96];
    if (chosen.algorithm == a.name) {  // simulated already: the row itself
      std::snprintf(cell, sizeof cell, " %s %.2f", a.name, chosen.run.seconds * 1e6);
      line += cell;
      seconds.emplace_back(a.name, chosen.run.seconds);
      continue;
    }
    seconds.emplace_back(a.name, std::nan(""));
    try {
      const auto r = gyre::sim::simulateCall(spec, req, std::string(a.name), model);
      seconds.back().second = r.run.seconds;
      std::snprintf(cell, sizeof cell, " %s %.2f", a.name, r.run.seconds * 1e6);
      if (r.run.seconds < bestSeconds) {
        bestSeconds = r.run.seconds;
        best = a.name;
      }
    } catch (const gyre::Error&) {
      std::snprintf(cell, sizeof cell, " %s n/a", a.name);  // cannot run on this cluster
    }
    line += cell;
  }
  std::printf("#   every algorithm (us):%s\n", line.c_str());
  if (best != chosen.algorithm)
    std::printf("#   fastest simulated: %s, %.2fx the tuner's %s\n", best.c_str(), chosen.run.seconds / bestSeconds,
                chosen.algorithm.c_str());
  return seconds;
}

// The value of option `name` (the last given), read before the other flags
// so that they override what it describes (--cluster, --model).
std::string valueOf(int argc, char** argv, const char* name) {
  std::string value;
  for (int i = 2; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--compare")) continue;
    if (!std::strcmp(argv[i], name)) value = argv[i + 1];
    ++i;  // every other option takes a value
  }
  return value;
}

// The plot's series: the tuner's choice, and with --compare every algorithm
// that ran at one size at least.
struct PlotRows {
  std::vector<gyre::sim::PlotSeries> algorithms;
  gyre::sim::PlotSeries chosen;
  void add(double size, double busbw, const std::string& algorithm) {
    chosen.bytes.push_back(size);
    chosen.busbw.push_back(busbw);
    chosen.notes.push_back(algorithm);
  }
  void addCompared(double size, const std::vector<std::pair<std::string, double>>& seconds, double busFactor) {
    for (const auto& [name, s] : seconds) {
      if (!std::isfinite(s)) continue;
      gyre::sim::PlotSeries* series = nullptr;
      for (auto& a : algorithms)
        if (a.name == name) series = &a;
      if (!series) series = &algorithms.emplace_back(gyre::sim::PlotSeries{name, {}, {}, {}, false});
      series->bytes.push_back(size);
      series->busbw.push_back(size / s / 1e9 * busFactor);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) return usage(stdout);
  const Op* op = nullptr;
  for (const Op& o : kOps)
    if (!std::strcmp(argv[1], o.name)) op = &o;
  try {
    if (!op) gyre::throwError(gyreInvalidArgument, std::string("no collective named ") + argv[1]);
    gyre::sim::ClusterSpec spec;
    std::string clusterName;
    const std::string clusterPath = valueOf(argc, argv, "--cluster");
    if (!clusterPath.empty()) {
      gyre::sim::ClusterFile file = gyre::sim::loadClusterFile(clusterPath);
      spec = file.spec;
      clusterName = file.name.empty() ? clusterPath : file.name;
    }
    size_t minBytes = 8, maxBytes = size_t{64} << 20, factor = 4;
    std::string algo, model, tracePath, plotPath;
    bool compare = false;
    // A cost model (--model) is the baseline; the cluster's flags override
    // it wherever they are given.
    gyre::collectives::CostModel costModel;
    model = valueOf(argc, argv, "--model");
    if (!clusterPath.empty() && !model.empty())
      gyre::throwError(gyreInvalidArgument, "--cluster and --model both describe the hosts: give one");
    if (!model.empty()) {
      if (model != "builtin") costModel = gyre::collectives::CostModel::load(model);
      gyre::sim::useCostModel(costModel, spec);
    }
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--compare") {
        compare = true;
        continue;
      }
      if (i + 1 >= argc) gyre::throwError(gyreInvalidArgument, a + " wants a value");
      const char* v = argv[++i];
      if (a == "--hosts") spec.hosts = int(gyre::parseInt(v, "--hosts", 1, 1 << 20));
      else if (a == "--ranks-per-host") spec.ranksPerHost = int(gyre::parseInt(v, "--ranks-per-host", 1, 1 << 12));
      else if (a == "--nics-per-host") spec.nicsPerHost = int(gyre::parseInt(v, "--nics-per-host", 1, 1 << 12));
      else if (a == "--nic-gbit") spec.nicBytesPerSecond = number(v, "--nic-gbit") * 1e9 / 8;
      else if (a == "--nic-us") spec.nicLatency = number(v, "--nic-us") * 1e-6;
      else if (a == "--intra-gbytes") spec.intraBytesPerSecond = number(v, "--intra-gbytes") * 1e9;
      else if (a == "--intra-us") spec.intraLatency = number(v, "--intra-us") * 1e-6;
      else if (a == "--cache-mbytes") spec.cacheBytes = number(v, "--cache-mbytes") * 1024 * 1024;
      else if (a == "--cache-speedup") spec.cacheSpeedup = number(v, "--cache-speedup");
      else if (a == "--shared-core-cache-speedup") spec.sharedCoreCacheSpeedup = number(v, "--shared-core-cache-speedup");
      else if (a == "--cache-rank-kbytes") spec.cacheBytesPerRank = number(v, "--cache-rank-kbytes") * 1024;
      else if (a == "--fifo-slot-kbytes") spec.fifoSlotBytes = number(v, "--fifo-slot-kbytes") * 1024;
      else if (a == "--fifo-slots") spec.fifoSlots = int(gyre::parseInt(v, "--fifo-slots", 2, 64));
      else if (a == "--cores-per-host") spec.coresPerHost = int(gyre::parseInt(v, "--cores-per-host", 0, 1 << 12));
      else if (a == "--core-gbytes") spec.coreBytesPerSecond = number(v, "--core-gbytes") * 1e9;
      else if (a == "--core-read-gbytes") spec.coreReadBytesPerSecond = number(v, "--core-read-gbytes") * 1e9;
      else if (a == "--core-switch-us") spec.coreSwitchSeconds = number(v, "--core-switch-us") * 1e-6;
      else if (a == "--peer-read-gbytes") spec.peerReadBytesPerSecond = number(v, "--peer-read-gbytes") * 1e9;
      else if (a == "--second-write-cost") spec.secondWriteCost = number(v, "--second-write-cost");
      else if (a == "--host-memory-gbytes") spec.hostMemoryBytesPerSecond = number(v, "--host-memory-gbytes") * 1e9;
      else if (a == "--switch-us") spec.switchLatency = number(v, "--switch-us") * 1e-6;
      else if (a == "--copy-gbytes") spec.copyBytesPerSecond = number(v, "--copy-gbytes") * 1e9;
      else if (a == "--reduce-gbytes") spec.reduceBytesPerSecond = number(v, "--reduce-gbytes") * 1e9;
      else if (a == "--step-us") spec.stepOverhead = number(v, "--step-us") * 1e-6;
      else if (a == "--hosts-per-leaf") spec.hostsPerLeaf = int(gyre::parseInt(v, "--hosts-per-leaf", 1, 1 << 20));
      else if (a == "--oversubscription") spec.oversubscription = number(v, "--oversubscription");
      else if (a == "-b") minBytes = gyre::parseSize(v, "-b");
      else if (a == "-e") maxBytes = gyre::parseSize(v, "-e");
      else if (a == "-f") factor = gyre::parseInt(v, "-f", 2, 1024);
      else if (a == "--algo") algo = v;
      else if (a == "--model") continue;  // (read above)
      else if (a == "--trace") tracePath = v;
      else if (a == "--plot") plotPath = v;
      else if (a == "--cluster") continue;  // read first
      else gyre::throwError(gyreInvalidArgument, "unknown option " + a);
    }
    std::ofstream plotFile;
    if (!plotPath.empty()) {  // before simulating: a bad path fails at once
      plotFile.open(plotPath);
      if (!plotFile) gyre::throwError(gyreInvalidArgument, "cannot write the plot to " + plotPath);
    }
    if (spec.nicsPerHost > spec.ranksPerHost) spec.nicsPerHost = spec.ranksPerHost;
    spec.validate();
    const int n = spec.nranks();
    if (!clusterName.empty()) std::printf("# cluster: %s (%s)\n", clusterName.c_str(), clusterPath.c_str());
    std::printf("# gyre-sim %s: %d hosts x %d ranks (%d ranks), %d NICs per host of %.0f Gbit/s, intra-host %.0f GB/s, "
                "%d hosts per leaf, oversubscription %.2g\n",
                op->name, spec.hosts, spec.ranksPerHost, n, spec.nicsPerHost, spec.nicBytesPerSecond * 8 / 1e9,
                spec.intraBytesPerSecond / 1e9, spec.hostsPerLeaf, spec.oversubscription);
    std::printf("#%11s %12s %6s %6s %5s %11s %7s %7s  %-20s %s\n", "size(B)", "count", "type", "redop", "root",
                "time(us)", "algbw", "busbw", "algorithm", "simulated in");
    PlotRows plot;
    plot.chosen.name = algo.empty() ? "tuner's choice" : "gyre with --algo " + algo;
    plot.chosen.chosen = true;
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
      const size_t unit = op->blocks ? size_t(4) * size_t(n) : 4;
      const size_t count = std::max<size_t>(1, bytes / unit) * (op->blocks ? size_t(n) : 1);
      gyre::collectives::CallRequest req;
      req.desc.kind = op->kind;
      req.desc.count = op->blocks ? count / size_t(n) : count;
      req.desc.root = op->rooted ? 0 : -1;
      req.elemSize = 4;
      const auto t0 = std::chrono::steady_clock::now();
      const gyre::sim::CallResult r = gyre::sim::simulateCall(spec, req, algo, model.empty() ? nullptr : &costModel,
                                                              !tracePath.empty());
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double size = double(count) * 4;
      const double algbw = size / r.run.seconds / 1e9;
      std::printf(" %11.0f %12zu %6s %6s %5d %11.2f %7.2f %7.2f  %-20s %.3f s\n", size, count, "float",
                  op->reduces ? "sum" : "none", op->rooted ? 0 : -1, r.run.seconds * 1e6, algbw,
                  algbw * op->busFactor(n), r.algorithm.c_str(), wall);
      if (!r.run.aggregation.empty()) std::printf("#   simulated as %s\n", r.run.aggregation.c_str());
      if (!tracePath.empty()) {
        FILE* f = std::fopen(tracePath.c_str(), "w");
        if (!f) gyre::throwError(gyreInvalidArgument, "cannot write the trace to " + tracePath);
        const std::string json = gyre::sim::chromeTrace(
            r.run, std::string(op->name) + " " + std::to_string(size_t(size)) + " B, " + r.algorithm + ", simulated");
        std::fwrite(json.data(), 1, json.size(), f);
        std::fclose(f);
      }
      plot.add(size, algbw * op->busFactor(n), r.algorithm);
      if (compare)
        plot.addCompared(size, compareAlgorithms(spec, req, r, op->kind, model.empty() ? nullptr : &costModel),
                         op->busFactor(n));
      std::fflush(stdout);
      if (bytes > maxBytes / factor) break;
    }
    if (!plotPath.empty()) {
      std::vector<gyre::sim::PlotSeries> series = plot.algorithms;
      series.push_back(plot.chosen);
      char shape[96];
      std::snprintf(shape, sizeof shape, "%d hosts x %d ranks", spec.hosts, spec.ranksPerHost);
      const std::string title = std::string(op->name) + " busbw, simulated: " +
                                (clusterName.empty() ? std::string(shape) : clusterName + ", " + shape);
      plotFile << gyre::sim::busbwSvg(series, title);
      if (!plotFile.flush()) gyre::throwError(gyreInvalidArgument, "cannot write the plot to " + plotPath);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre-sim: %s\n", e.what());
    return 2;
  }
}
