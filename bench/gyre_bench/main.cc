// gyre-bench <collective>: bandwidth and latency of one collective over a
// sweep of sizes, in the nccl-tests layout (size, count, type, redop, root,
// then time/algbw/busbw/#wrong out of place and in place). Runs as one rank
// under a launcher (ranks from the environment) or forks --ranks N itself.
// Rank 0 prints the table and writes --json/--csv/--plot; `gyre-bench plot`
// merges result files into one plot. With --codec the calls are the
// compressed ones, whose results are lossy: the check measures their error
// against the exact results instead of counting wrong elements.
//
// Self-test switches (for tests of gyre-bench itself, never for measuring):
//   GYRE_BENCH_CORRUPT=1  after the collective of each check pass, flip one
//                         bit of the first output element on the rank that
//                         checks it (the root of rooted collectives, else
//                         rank 0): the check must report #wrong > 0, exit 1
//                         (not with --codec: one bit is within a codec's error).
//   GYRE_BENCH_STALL=1    (needs -T) the last rank never calls the first
//                         row's collective: -T must end the run with exit 3.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "bench/fork_ranks.h"
#include "bench/gyre_bench/collectives.h"
#include "bench/gyre_bench/device_memory.h"
#include "bench/gyre_bench/options.h"
#include "bench/gyre_bench/plot.h"
#include "bench/gyre_bench/progress.h"
#include "bench/gyre_bench/comm_stats.h"
#include "bench/gyre_bench/rank_cards.h"
#include "bench/gyre_bench/report.h"
#include "bench/gyre_bench/row_timeout.h"
#include "bench/gyre_bench/sequence.h"
#include "bench/gyre_bench/stats.h"
#include "bench/gyre_bench/table.h"
#include "gyre/gyre.h"

namespace gyre::bench {
namespace {

Progress* gProgress = nullptr;  // cleared before any message, so it never garbles one

#define CHECKG(call)                                                                             \
  do {                                                                                           \
    gyreResult_t r_ = (call);                                                                    \
    if (r_ != gyreSuccess) {                                                                     \
      if (gProgress) gProgress->clear();                                                         \
      std::fprintf(stderr, "gyre-bench: %s failed: %s\n", #call, gyreGetLastError(nullptr));     \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool envFlag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string envOr(const char* name, const char* otherwise) {
  const char* v = std::getenv(name);
  return v && *v ? v : otherwise;
}

// One of the two buffers a row runs on: malloc'd, or with -R from
// gyreMemAllocHost and registered for the run, or with --device cuda in
// device memory, with a host mirror that rows are filled and checked in.
class BenchBuffer {
 public:
  BenchBuffer(gyreComm_t comm, size_t bytes, bool registered, DeviceMemory* dev) : comm_(comm), dev_(dev) {
    if (dev) {
      data_ = static_cast<unsigned char*>(dev->allocate(bytes));
      mirror_.resize(bytes);
      bytes_ = bytes;
      return;
    }
    if (!registered) {
      plain_.resize(bytes);
      data_ = plain_.data();
      return;
    }
    void* p = nullptr;
    CHECKG(gyreMemAllocHost(&p, bytes));
    data_ = static_cast<unsigned char*>(p);
    std::memset(data_, 0, bytes);  // fault the pages in before timing, as resize does
    CHECKG(gyreCommRegister(comm, data_, bytes, &handle_));
  }
  ~BenchBuffer() {
    if (dev_) {
      dev_->free(data_);
    } else if (plain_.empty() && data_) {
      gyreCommDeregister(comm_, handle_);
      gyreMemFree(data_);
    }
  }
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  unsigned char* data() { return data_; }
  // Where the host sees p, a pointer into data() (null: not ours).
  unsigned char* hostView(unsigned char* p) {
    if (!dev_) return p;
    return p >= data_ && p < data_ + bytes_ ? mirror_.data() + (p - data_) : nullptr;
  }
  void upload() {
    if (dev_) dev_->upload(data_, mirror_.data(), bytes_);
  }
  void download() {
    if (dev_) dev_->download(mirror_.data(), data_, bytes_);
  }

 private:
  gyreComm_t comm_;
  DeviceMemory* dev_;
  std::vector<unsigned char> plain_, mirror_;
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
  void* handle_ = nullptr;
};

// The row's two buffers, and (--device cuda) the device they live on.
struct RowBuffers {
  BenchBuffer& a;
  BenchBuffer& b;
  DeviceMemory* dev;
  // The call as the host sees it: its pointers in the mirrors.
  Call hostCall(const Call& c) {
    Call h = c;
    if (dev) {
      h.send = c.send ? (a.hostView(c.send) ? a.hostView(c.send) : b.hostView(c.send)) : nullptr;
      h.recv = c.recv ? (a.hostView(c.recv) ? a.hostView(c.recv) : b.hostView(c.recv)) : nullptr;
    }
    return h;
  }
  void fill(void (*fillCall)(Call&), Call& c) {
    if (!dev) return fillCall(c);
    Call h = hostCall(c);
    fillCall(h);
    a.upload();
    b.upload();
  }
  // checkCall (coll.wrong, or a codec's error) on the host's view of c.
  template <class Result>
  Result check(Result (*checkCall)(Call&), Call& c) {
    if (!dev) return checkCall(c);
    a.download();
    b.download();
    Call h = hostCall(c);
    return checkCall(h);
  }
  // Until the calls enqueued so far have run (host calls: at once).
  void settle(gyreComm_t comm) {
    if (dev) dev->synchronize(comm);
  }
};

// ---- measuring ----

// One rank's view of one placement of one row.
struct Local {
  double meanUs = 0, p50 = -1, p99 = -1;
  long long wrong = -1;  // --codec: results that are not finite
  test::ErrorStats error;  // --codec
};

bool lossy(const Options& o) { return o.codec != gyreCodecNone; }

// A codec's calls get inputs with fractions, which its rounding shows on.
using FillFn = void (*)(Call&);
FillFn fillOf(const Collective& coll, const Options& o) { return lossy(o) ? coll.lossy->fill : coll.fill; }

// The check pass: one more call, on fresh inputs, and its result checked.
void checkPass(const Collective& coll, Call& c, RowBuffers& bufs, const Options& o, Local& l) {
  bufs.fill(fillOf(coll, o), c);
  CHECKG(coll.run(c));
  bufs.settle(c.comm);
  const int checker = coll.rooted ? o.root : 0;
  if (envFlag("GYRE_BENCH_CORRUPT") && c.rank == checker && c.recvElems > 0 && c.count > 0) {
    bufs.a.download(), bufs.b.download();
    bufs.hostCall(c).recv[0] ^= 1;
    bufs.a.upload(), bufs.b.upload();
  }
  if (!lossy(o)) {
    l.wrong = static_cast<long long>(bufs.check(coll.wrong, c));
    return;
  }
  l.error = bufs.check(coll.lossy->error, c);
  l.wrong = static_cast<long long>(l.error.nonFinite);
}

Local measure(const Collective& coll, Call& c, RowBuffers& bufs, const Options& o, Progress& progress,
              const char* place) {
  bufs.fill(fillOf(coll, o), c);
  if (envFlag("GYRE_BENCH_STALL") && c.rank == c.nranks - 1)
    for (;;) pause();  // only -T ends this (parseOptions insists on it)
  const std::string warm = std::string(place) + " warmup", timed = std::string(place) + " iter";
  for (int i = 0; i < o.warmup; ++i) {
    progress.iteration(warm.c_str(), i + 1, o.warmup);
    CHECKG(coll.run(c));
  }
  bufs.settle(c.comm);
  CHECKG(gyreBarrier(c.comm, nullptr));  // line the ranks up
  std::vector<double> each;
  if (o.percentiles) each.reserve(static_cast<size_t>(o.iters));
  const double t0 = now();
  for (int i = 0; i < o.iters; ++i) {
    progress.iteration(timed.c_str(), i + 1, o.iters);
    const double ti = o.percentiles ? now() : 0;
    CHECKG(coll.run(c));
    if (o.percentiles) {
      bufs.settle(c.comm);  // a device call's time is its stream's
      each.push_back((now() - ti) * 1e6);
    }
  }
  bufs.settle(c.comm);
  Local l;
  l.meanUs = (now() - t0) / o.iters * 1e6;
  if (o.percentiles) l.p50 = percentile(each, 50), l.p99 = percentile(each, 99);
  if (o.check) checkPass(coll, c, bufs, o, l);
  return l;
}

// Every rank's values, combined as -a says (#wrong: summed; a codec's
// errors: over every rank's output, as test::ErrorStats merges them).
constexpr int kFields = 8;

test::ErrorStats mergedErrors(const std::vector<double> (&field)[kFields]) {
  test::ErrorStats all;
  for (size_t r = 0; r < field[0].size(); ++r) {
    test::ErrorStats one;
    one.maxAbsErr = field[4][r], one.sumSqErr = field[5][r], one.maxAbsExact = field[6][r];
    one.elems = static_cast<size_t>(field[7][r]);
    all.merge(one);
  }
  return all;
}

Cell combine(gyreComm_t comm, int nranks, const Local& l, const Options& o, size_t bytes, double factor) {
  const double mine[kFields] = {l.meanUs, l.p50, l.p99, double(l.wrong), l.error.maxAbsErr, l.error.sumSqErr,
                                l.error.maxAbsExact, double(l.error.elems)};
  std::vector<double> all(kFields * static_cast<size_t>(nranks));
  CHECKG(gyreAllGather(mine, all.data(), kFields, gyreFloat64, comm, nullptr));
  std::vector<double> field[kFields];
  for (int r = 0; r < nranks; ++r)
    for (int k = 0; k < kFields; ++k) field[k].push_back(all[kFields * static_cast<size_t>(r) + k]);
  Cell cell;
  cell.present = true;
  cell.timeUs = aggregate(field[0], o.average);
  cell.algbw = algBandwidth(bytes, cell.timeUs);
  cell.busbw = busBandwidth(cell.algbw, factor);
  if (o.percentiles) cell.p50Us = aggregate(field[1], o.average), cell.p99Us = aggregate(field[2], o.average);
  if (o.check) {
    double w = 0;
    for (double x : field[3]) w += x;
    cell.wrong = static_cast<long long>(w);
  }
  if (o.check && lossy(o)) {
    const test::ErrorStats e = mergedErrors(field);
    cell.maxErr = e.maxRelative(), cell.rmsErr = e.rmsRelative();
  }
  return cell;
}

std::vector<size_t> sweep(const Options& o, bool sizeless) {
  if (sizeless) return {0};
  std::vector<size_t> sizes;
  for (size_t sz = o.minBytes; sz <= o.maxBytes;) {
    sizes.push_back(sz);
    const size_t next = o.factor > 1 ? static_cast<size_t>(double(sz) * o.factor) : sz + o.step;
    if (next <= sz) break;
    sz = next;
  }
  return sizes;
}

RunSettings settingsOf(const Options& o, int nranks, const std::vector<RankCard>& cards) {
  RunSettings s;
  int version = 0;
  gyreGetVersion(&version);
  s.version = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
              std::to_string(version % 100);
  s.collective = o.collective;
  s.label = o.label;
  s.nranks = nranks;
  std::set<uint64_t> hosts;
  for (const RankCard& c : cards) hosts.insert(c.hostKey);
  s.nhosts = static_cast<int>(hosts.size());
  s.transport = envOr("GYRE_TRANSPORT", "auto");
  s.transports = transportsInUse(cards, s.transport);
  s.algorithm = o.algo.empty() ? envOr("GYRE_ALGO", "auto") : o.algo;
  s.minBytes = o.minBytes, s.maxBytes = o.maxBytes;
  const bool byFactor = o.factor > 1;  // as sweep() steps: a factor wins over -i
  s.stepFactor = byFactor ? o.factor : 1, s.stepBytes = byFactor ? 0 : o.step;
  s.iters = o.iters, s.warmup = o.warmup, s.check = o.check;
  s.dtype = o.dtypeArg, s.op = o.opArg, s.root = o.root;
  s.average = static_cast<int>(o.average), s.averageName = aggregateName(o.average);
  s.timeout = o.timeoutSec, s.percentiles = o.percentiles, s.skew = o.skew;
  s.codec = codecName(o.codec);
  if (o.collective == "seqtoheads" || o.collective == "headstoseq") s.seqLayout = describeSeqOptions(o);
  return s;
}

// Rank 0, after the table: the result files. false when one could not be written.
bool writeResults(const Options& o, const Report& report) {
  bool ok = true;
  auto save = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    std::ofstream f(path);
    f << text;
    if (!f.flush()) std::fprintf(stderr, "gyre-bench: cannot write %s\n", path.c_str()), ok = false;
  };
  save(o.jsonPath, toJson(report));
  save(o.csvPath, toCsv(report));
  if (!o.plotPath.empty()) {
    std::string error;
    if (writePlot(o.plotPath, seriesOf({report}), "gyre-bench " + o.collective, error) != 0)
      std::fprintf(stderr, "gyre-bench: %s\n", error.c_str()), ok = false;
  }
  return ok;
}

int runRank(const Options& opt, gyreComm_t comm) {
  const Collective& coll = *findCollective(opt.collective);
  Options o = opt;  // o.dtype and o.op follow the combination being measured
  Call c;
  c.comm = comm;
  c.opt = &o;
  CHECKG(gyreCommUserRank(comm, &c.rank));
  CHECKG(gyreCommCount(comm, &c.nranks));
  if (coll.rooted && o.root >= c.nranks) {
    std::fprintf(stderr, "gyre-bench: root %d is not a rank (there are %d)\n", o.root, c.nranks);
    return 2;
  }
  std::unique_ptr<DeviceMemory> dev;
  if (o.device == "cuda") {
    std::string why;
    dev = openDeviceMemory(c.rank, why);
    if (!dev) {
      std::fprintf(stderr, "gyre-bench: --device cuda: %s\n", why.c_str());
      gyreCommDestroy(comm);
      return 2;
    }
    c.stream = dev->stream();
  }
  std::vector<RankCard> cards;
  CHECKG(exchangeCards(comm, c.nranks, cards));
  Report report;
  report.settings = settingsOf(o, c.nranks, cards);
  Progress progress(c.rank == 0 && isatty(2));
  gProgress = &progress;
  if (c.rank == 0) {
    std::vector<RankInfo> ranks;
    for (int r = 0; r < c.nranks; ++r) ranks.push_back({r, static_cast<long>(cards[r].pid), cards[r].host});
    std::fputs(tableHeader(report.settings, ranks).c_str(), stdout);
  }
  const double factor = coll.busFactor(c.nranks);
  const bool sizeless = coll.name == std::string("barrier");
  const std::vector<size_t> sizes = sweep(o, sizeless);
  const std::vector<gyreDataType_t> types = sizeless ? std::vector<gyreDataType_t>{o.dtypes[0]} : o.dtypes;
  const std::vector<gyreRedOp_t> ops = coll.reduces ? o.ops : std::vector<gyreRedOp_t>{o.ops[0]};
  double busSum = 0;
  int cells = 0;
  long long wrongTotal = 0;
  double maxErr = -1;  // a codec's largest error over the run; -1: none measured
  const size_t rowsTotal = types.size() * ops.size() * sizes.size();
  size_t rowIndex = 0;
  for (gyreDataType_t type : types) {
    o.dtype = type;
    const size_t esz = test::dtypeBytes(type);
    // Buffers for the largest row (AllToAllv may send a little more than a row).
    Call big = c;
    coll.shape(big, o.maxBytes / esz);
    BenchBuffer a(comm, (big.sendElems + 64) * esz, o.registered, dev.get()),
        b(comm, (big.recvElems + 64) * esz, o.registered, dev.get());
    RowBuffers bufs{a, b, dev.get()};
    for (gyreRedOp_t op : ops) {
      o.op = op;
      for (size_t sz : sizes) {
        coll.shape(c, sz / esz);
        Row row;
        row.count = coll.name == std::string("alltoallv") ? c.sendElems
                    : c.sendElems > c.recvElems             ? c.sendElems
                                                            : c.recvElems;
        row.bytes = row.count * esz;
        row.type = typeName(type);
        row.redop = coll.reduces ? test::opLabel(op) : "none";
        row.root = coll.rooted ? o.root : -1;
        if (lossy(o)) {
          row.wireBytes = coll.lossy->wireBytes(c, o.codec);
          row.plainBytes = coll.lossy->wireBytes(c, gyreCodecNone);
        }
        const std::string what = o.collective + " " + row.type + " " + row.redop + " " + std::to_string(row.bytes) + " B";
        progress.setStage(what + " (row " + std::to_string(++rowIndex) + "/" + std::to_string(rowsTotal) + ")");
        armRowTimeout(o.timeoutSec, c.rank, what);
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (inPlace && !coll.hasInPlace) continue;
          c.inPlace = inPlace;
          coll.place(c, a.data(), b.data());
          const Local l = measure(coll, c, bufs, o, progress, inPlace ? "in-place" : "out-of-place");
          Cell& cell = inPlace ? row.inPlace : row.outOfPlace;
          cell = combine(comm, c.nranks, l, o, row.bytes, factor);
          wrongTotal += cell.wrong > 0 ? cell.wrong : 0;
          maxErr = std::max(maxErr, cell.maxErr);
          busSum += cell.busbw, ++cells;  // nccl-tests: the footer averages every cell
        }
        disarmRowTimeout();
        if (c.rank == 0) {
          progress.clear();
          std::fputs(tableRow(row, o.percentiles, lossy(o)).c_str(), stdout);
          std::fflush(stdout);
          report.rows.push_back(row);
        }
      }
    }
  }
  int status = wrongTotal ? 1 : 0;
  if (c.rank == 0) {
    report.outOfBounds = wrongTotal;
    report.avgBusBw = cells ? busSum / cells : 0;
    std::fputs(tableFooter(report.outOfBounds, report.avgBusBw, maxErr).c_str(), stdout);
    std::fflush(stdout);
    if (!writeResults(o, report)) status = 1;
  }
  if (o.commStats) {
    const std::string table = commStatsTable(comm, c.rank, c.nranks);
    std::fputs(table.c_str(), stdout);
    std::fflush(stdout);
  }
  gProgress = nullptr;
  CHECKG(gyreCommDestroy(comm));
  return status;
}

void applySettings(const Options& o) {
  if (!o.transport.empty()) setenv("GYRE_TRANSPORT", o.transport.c_str(), 1);
  if (!o.algo.empty()) setenv("GYRE_ALGO", (o.collective + ":" + o.algo).c_str(), 1);
  // gyre's own wait bound a little past -T, so that inside a row the -T
  // message (exit 3) comes first; outside rows (start-up) it bounds waits.
  if (o.timeoutSec) setenv("GYRE_TIMEOUT_MS", std::to_string(o.timeoutSec * 1000 + 5000).c_str(), 1);
  // Every rank's buffers come from gyreMemAllocHost: the tuner may count on it
  // (unless the caller says otherwise).
  if (o.registered) setenv("GYRE_MAPPED_BUFFERS", "1", 0);
}

int runPlot(int argc, char** argv) {
  const PlotArgs p = parsePlotArgs(argc, argv);
  std::vector<Report> runs;
  std::set<std::string> collectives;
  for (const std::string& in : p.inputs) {
    std::ifstream f(in);
    std::stringstream text;
    text << f.rdbuf();
    Report r;
    std::string error;
    if (!f || !fromJson(text.str(), r, error)) {
      std::fprintf(stderr, "gyre-bench plot: %s: %s\n", in.c_str(), f ? error.c_str() : "cannot read");
      return 1;
    }
    collectives.insert(r.settings.collective);
    runs.push_back(r);
  }
  std::string title = p.title;
  if (title.empty()) title = "gyre-bench" + (collectives.size() == 1 ? " " + *collectives.begin() : std::string());
  std::string error;
  const int rc = writePlot(p.out, seriesOf(runs), title, error);
  if (rc) std::fprintf(stderr, "gyre-bench plot: %s\n", error.c_str());
  return rc;
}

}  // namespace
}  // namespace gyre::bench

int main(int argc, char** argv) {
  using namespace gyre::bench;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 1 && std::string(argv[1]) == "plot") return runPlot(argc, argv);
  const Options o = parseOptions(argc, argv);
  if (envFlag("GYRE_BENCH_STALL") && o.timeoutSec == 0) {
    std::fprintf(stderr, "gyre-bench: GYRE_BENCH_STALL needs -T (it would wait forever)\n");
    return 2;
  }
  applySettings(o);
  if (o.spawn <= 0) {
    gyreComm_t comm;
    CHECKG(gyreCommInitFromEnv(&comm, nullptr));
    return runRank(o, comm);
  }
  // The worst rank's status: 3 (-T) over 2 (usage) over 1.
  return forkRanks(o.spawn, o.bind, [&](int, gyreComm_t comm) { return runRank(o, comm); });
}
