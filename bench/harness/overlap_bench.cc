// gyre-harness-overlap: how much of data parallelism's gradient AllReduce
// hides behind backward (docs/PERFORMANCE-harness.md, "Data-parallel
// overlap"). Under gyrerun, 2 ranks or more:
//
//   GYRE_TRANSPORT=shm gyrerun -n 2 --bind core gyre-harness-overlap
//       [--layers L] [--dim C] [--heads H] [--batch B] [--seq T]
//       [--buckets ELEMS,ELEMS,...] [--steps N] [--reps R] [--json FILE]
//
// Every rank holds the same model and a batch of B random sequences of T
// tokens of its own. For each bucket size, R repetitions of N steps; in each
// step, after a forward pass (not timed) and a barrier before each timed
// part, in an order that turns every step (BRW, RWB, WBR):
//
//   B  the model's backward alone, no communication;
//   R  the same buckets' AllReduces alone: gyreIallReduce (average) of every
//      bucket of the gradient array, in ready order, then gyreWait on each;
//   W  DataParallel::backward: backward with each bucket's AllReduce launched
//      as soon as its gradients are final (harness/data_parallel.h).
//
//   S  the same schedule with backward's computation replaced by sleeping
//      until each part is as far as it was in the last B (its hook times),
//      launching the buckets that part completes, as DataParallel does, then
//      waiting: a stand-in for compute that leaves the CPU free (a GPU's),
//      so that the reductions have a core to run on.
//
// The hidden share of a step is (B + R - W) / R clipped to [0, 1]: 1 when
// the reductions cost the step nothing, 0 when W is B and R one after the
// other; "free" is the same for S, (B + R - S) / R. Each rank's times are
// averaged over the ranks per step; the table has the medians over all
// steps of all repetitions (the first step of each repetition dropped), the
// median of the per-step shares with their quartiles, and the hidden share
// of the medians. "exposed" is DataParallel's own wait after backward
// (lastWaitSeconds); "R cpu" the process's CPU time during R (gyreWait
// sleeps, so it is the progress thread's work and spinning) over R's wall
// time: near 1 means the reduction needs a core all the time it runs.
// Rank 0 prints the table and writes the JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data_parallel.h"
#include "harness/model.h"
#include "harness/random.h"

using namespace gyre::harness;

namespace {

struct Options {
  int layers = 4, dim = 256, heads = 8, batch = 2, seq = 32;
  std::vector<size_t> buckets = {kDefaultBucketElems};
  int steps = 8, reps = 3;
  std::string json;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gyre-harness-overlap: %s\n"
               "usage: gyrerun -n 2 [--bind core] gyre-harness-overlap [--layers L] [--dim C] "
               "[--heads H]\n"
               "         [--batch B] [--seq T] [--buckets ELEMS,...] [--steps N] [--reps R] "
               "[--json FILE]\n",
               why.c_str());
  std::exit(2);
}

long number(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    usage(flag + " takes a number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("unknown or incomplete option " + a);
    const std::string v = argv[++i];
    if (a == "--layers") {
      o.layers = number(a, v, 1, 256);
    } else if (a == "--dim") {
      o.dim = number(a, v, 1, 8192);
    } else if (a == "--heads") {
      o.heads = number(a, v, 1, 256);
    } else if (a == "--batch") {
      o.batch = number(a, v, 1, 4096);
    } else if (a == "--seq") {
      o.seq = number(a, v, 1, 4096);
    } else if (a == "--steps") {
      o.steps = number(a, v, 2, 10000);
    } else if (a == "--reps") {
      o.reps = number(a, v, 1, 1000);
    } else if (a == "--json") {
      o.json = v;
    } else if (a == "--buckets") {
      o.buckets.clear();
      std::stringstream in(v);
      for (std::string item; std::getline(in, item, ',');)
        o.buckets.push_back(static_cast<size_t>(number(a, item, 1, 1L << 34)));
    } else {
      usage("unknown option " + a);
    }
  }
  if (o.dim % o.heads != 0) usage("--dim must be a multiple of --heads");
  return o;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double cpuNow() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void sleepUntil(double when) {
  const auto deadline = std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(when)));
  while (std::chrono::steady_clock::now() < deadline) {
    timespec ts{};
    const double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    ts.tv_sec = static_cast<time_t>(left);
    ts.tv_nsec = static_cast<long>((left - static_cast<double>(ts.tv_sec)) * 1e9);
    nanosleep(&ts, nullptr);
  }
}

double hidden(double b, double r, double w) {
  if (r <= 0) return 1;
  return std::clamp((b + r - w) / r, 0.0, 1.0);
}

struct Row {
  size_t bucketElems = 0;
  size_t bucketCount = 0;
  double b = 0, r = 0, w = 0, s = 0, exposed = 0, rCpu = 0;
  double hiddenOfMedians = 0, hiddenMedian = 0, freeMedian = 0;
  double hiddenLo = 0, hiddenHi = 0;  // the per-step shares' quartiles
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  gyreComm_t comm = nullptr;
  checkGyre(gyreCommInitFromEnv(&comm, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(comm, &rank), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &ranks), "gyreCommCount", comm);
  auto barrier = [&] { checkGyre(gyreBarrier(comm, nullptr), "gyreBarrier", comm); };

  const GptConfig config{
      .vocab = 256, .maxSeq = o.seq, .layers = o.layers, .heads = o.heads, .dim = o.dim};
  Gpt model(config);
  model.initialize(1);
  // Random tokens, each rank its own: the cost of a step does not depend on
  // what the bytes are.
  std::vector<int> inputs(static_cast<size_t>(o.batch) * o.seq), targets(inputs.size());
  Random rng(1000 + static_cast<uint64_t>(rank));
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = static_cast<int>(rng.next() % 256);
    targets[i] = static_cast<int>(rng.next() % 256);
  }
  const double mib = static_cast<double>(model.size()) * 4 / (1 << 20);
  if (rank == 0) {
    std::printf(
        "gyre-harness-overlap: %d ranks, %d layers, dim %d, %d heads, %d x %d tokens per rank, "
        "%zu parameters (%.2f MiB of gradients); %d reps x %d steps per bucket size\n",
        ranks, o.layers, o.dim, o.heads, o.batch, o.seq, model.size(), mib, o.reps, o.steps);
    std::printf("%12s %7s %8s %8s %8s %8s %8s %8s %6s %17s %12s %6s\n", "bucket_elems", "buckets",
                "B_ms", "B/layer", "R_ms", "W_ms", "exposed", "S_ms", "R_cpu", "hidden[q1-q3]",
                "hidden(meds)", "free");
    std::fflush(stdout);
  }

  std::vector<Row> rows;
  for (size_t elems : o.buckets) {
    DataParallel dp(comm, model, elems);
    std::vector<double> bs, rs, ws, ss, exp, cpu, shares, frees;
    // When each part's gradients were final in the last B, from its start.
    std::vector<std::pair<int, double>> partTimes;
    for (int rep = 0; rep < o.reps; ++rep) {
      for (int step = 0; step < o.steps; ++step) {
        double t[6] = {0, 0, 0, 0, 0, 0};  // B, R, W, exposed, S, R's CPU time
        // B first in a repetition's first step: S needs its part times.
        for (int k = 0; k < 4; ++k) {
          const int what = step == 0 ? k : (k + step + rep) % 4;
          if (what == 3) {
            // S: the schedule with the computation slept through.
            float* g = model.grads().data();
            std::vector<gyreRequest_t> requests;
            size_t next = 0;
            barrier();
            const double start = now();
            for (const auto& [part, at] : partTimes) {
              sleepUntil(start + at);
              for (; next < dp.buckets().size() && dp.buckets()[next].part == part; ++next) {
                const GradBucket& bucket = dp.buckets()[next];
                gyreRequest_t request = nullptr;
                checkGyre(gyreIallReduce(g + bucket.offset, g + bucket.offset, bucket.size,
                                         gyreFloat32, gyreAvg, comm, &request),
                          "gyreIallReduce", comm);
                requests.push_back(request);
              }
            }
            for (gyreRequest_t request : requests) checkGyre(gyreWait(request), "gyreWait", comm);
            t[4] = now() - start;
            continue;
          }
          if (what == 1) {
            // R: the buckets' reductions by themselves, on the gradients
            // the last backward left.
            float* g = model.grads().data();
            std::vector<gyreRequest_t> requests;
            barrier();
            const double start = now(), cpuStart = cpuNow();
            for (const GradBucket& bucket : dp.buckets()) {
              gyreRequest_t request = nullptr;
              checkGyre(gyreIallReduce(g + bucket.offset, g + bucket.offset, bucket.size,
                                       gyreFloat32, gyreAvg, comm, &request),
                        "gyreIallReduce", comm);
              requests.push_back(request);
            }
            for (gyreRequest_t request : requests) checkGyre(gyreWait(request), "gyreWait", comm);
            t[1] = now() - start;
            t[5] = cpuNow() - cpuStart;
            continue;
          }
          model.zeroGrad();
          model.forward(inputs.data(), targets.data(), o.batch, o.seq);
          barrier();
          const double start = now();
          if (what == 0) {
            partTimes.clear();
            model.setBackwardHook([&](int part) { partTimes.push_back({part, now() - start}); });
            model.backward();
            t[0] = now() - start;
            model.setBackwardHook({});
          } else {
            dp.backward();
            t[2] = now() - start;
            t[3] = dp.lastWaitSeconds();
          }
        }
        checkGyre(gyreAllReduce(t, t, 6, gyreFloat64, gyreAvg, comm, nullptr), "gyreAllReduce",
                  comm);
        if (step == 0) continue;  // each repetition's first step warms up
        bs.push_back(t[0]);
        rs.push_back(t[1]);
        ws.push_back(t[2]);
        exp.push_back(t[3]);
        ss.push_back(t[4]);
        cpu.push_back(t[5] / t[1]);
        shares.push_back(hidden(t[0], t[1], t[2]));
        frees.push_back(hidden(t[0], t[1], t[4]));
      }
    }
    Row row;
    row.bucketElems = elems;
    row.bucketCount = dp.buckets().size();
    row.b = median(bs);
    row.r = median(rs);
    row.w = median(ws);
    row.exposed = median(exp);
    row.s = median(ss);
    row.rCpu = median(cpu);
    row.freeMedian = median(frees);
    row.hiddenOfMedians = hidden(row.b, row.r, row.w);
    row.hiddenMedian = median(shares);
    row.hiddenLo = quantile(shares, 0.25);
    row.hiddenHi = quantile(shares, 0.75);
    rows.push_back(row);
    if (rank == 0) {
      std::printf(
          "%12zu %7zu %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %6.2f %5.0f%% [%3.0f-%3.0f] %11.0f%% "
          "%5.0f%%\n",
          elems, row.bucketCount, 1e3 * row.b, 1e3 * row.b / o.layers, 1e3 * row.r, 1e3 * row.w,
          1e3 * row.exposed, 1e3 * row.s, row.rCpu, 100 * row.hiddenMedian, 100 * row.hiddenLo,
          100 * row.hiddenHi, 100 * row.hiddenOfMedians, 100 * row.freeMedian);
      std::fflush(stdout);
    }
  }

  if (rank == 0 && !o.json.empty()) {
    std::ofstream out(o.json);
    const char* transport = std::getenv("GYRE_TRANSPORT");
    out << "{\"ranks\":" << ranks << ",\"transport\":\"" << (transport ? transport : "auto")
        << "\",\"layers\":" << o.layers << ",\"dim\":" << o.dim << ",\"heads\":" << o.heads
        << ",\"batch\":" << o.batch << ",\"seq\":" << o.seq << ",\"params\":" << model.size()
        << ",\"steps\":" << o.steps << ",\"reps\":" << o.reps << ",\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? "," : "") << "{\"bucket_elems\":" << r.bucketElems
          << ",\"buckets\":" << r.bucketCount << ",\"B_s\":" << r.b << ",\"R_s\":" << r.r
          << ",\"W_s\":" << r.w << ",\"S_s\":" << r.s << ",\"exposed_s\":" << r.exposed
          << ",\"R_cpu_share\":" << r.rCpu << ",\"free_hidden_median\":" << r.freeMedian
          << ",\"hidden_median\":" << r.hiddenMedian << ",\"hidden_q1\":" << r.hiddenLo
          << ",\"hidden_q3\":" << r.hiddenHi << ",\"hidden_of_medians\":" << r.hiddenOfMedians
          << "}";
    }
    out << "]}\n";
  }
  checkGyre(gyreCommFinalize(comm), "gyreCommFinalize", comm);
  gyreCommDestroy(comm);
  return 0;
}
