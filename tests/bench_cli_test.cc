// gyre-bench, tested from the outside and in pieces: flag parsing (usage and
// exit 2), the table's layout against a golden copy (numbers that vary are
// masked), bus-bandwidth arithmetic, JSON/CSV round trips, plots and their
// merging, the progress line, -T, the check catching a corrupted result,
// and --codec (the compressed calls' error and bytes sent).
//
// Every run of gyre-bench is a real process group under a hard deadline (on
// expiry it is killed and the test fails); nothing here asserts a timing or
// sleeps: the tests wait only for the process to end.
//
// Golden files: tests/bench_cli_test.*.golden. After an intended layout
// change, run with GYRE_BENCH_UPDATE_GOLDEN=1 to rewrite them, then review
// the diff.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/exact_values.h"
#include "bench/gyre_bench/collectives.h"
#include "bench/gyre_bench/plot.h"
#include "bench/gyre_bench/report.h"
#include "bench/gyre_bench/stats.h"
#include "bench/gyre_bench/table.h"
#include "tests/support/subprocess.h"


namespace {

using namespace gyre::bench;

// ---- running gyre-bench ----

using gyre::test::Outcome;

struct Run {
  Run(std::vector<std::string> a, std::map<std::string, std::string> e = {}, bool terminal = false)
      : args(std::move(a)), env(std::move(e)), stderrIsTerminal(terminal) {}
  std::vector<std::string> args;           // after the program
  std::map<std::string, std::string> env;  // added to (or replacing) the cleaned environment
  bool stderrIsTerminal = false;           // give it a pseudo-terminal as standard error
  int timeoutSec = 90;
};

Outcome bench(const Run& r) {
  gyre::test::Proc p;
  p.argv = {GYRE_BENCH_PATH};
  p.argv.insert(p.argv.end(), r.args.begin(), r.args.end());
  p.env = r.env;
  p.stderrIsTerminal = r.stderrIsTerminal;
  return gyre::test::run(p, r.timeoutSec);
}

// A fresh directory for a test's files.
std::string tempDir() {
  std::string t = (std::filesystem::temp_directory_path() / "gyre-bench-test-XXXXXX").string();
  if (!mkdtemp(t.data())) std::abort();
  return t;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> linesOf(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> t;
  for (std::string w; in >> w;) t.push_back(w);
  return t;
}

// The table's rows (lines not starting with '#'), split into fields.
std::vector<std::vector<std::string>> tableRows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& l : linesOf(out))
    if (!l.empty() && l[0] != '#') rows.push_back(tokens(l));
  return rows;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

int count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// ---- masking what varies, for the golden layout ----

// Replaces line[begin, end) with spaces and a '#' at its last position: the
// value goes, its right edge (the column's alignment) stays.
void maskRightAligned(std::string& line, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) line[i] = ' ';
  line[end - 1] = '#';
}

// Version, host name, pids, and every time, bandwidth and percentile value
// (found by the column whose heading ends where the value ends).
std::string maskVarying(const std::string& text) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string hostName = std::string(host).substr(0, 47);  // gyre-bench keeps 47 characters
  std::map<size_t, std::string> columnAtEnd;
  std::string masked;
  for (std::string l : linesOf(text)) {
    for (size_t at; !hostName.empty() && (at = l.find(" on " + hostName)) != std::string::npos;)
      l.replace(at + 4, hostName.size(), "HOST");
    l = std::regex_replace(l, std::regex("gyre [0-9]+\\.[0-9]+\\.[0-9]+,"), "gyre V,");
    std::smatch m;
    if (std::regex_search(l, m, std::regex("Pid +([0-9]+)")))
      maskRightAligned(l, static_cast<size_t>(m.position(1)), static_cast<size_t>(m.position(1) + m.length(1)));
    if (std::regex_search(l, m, std::regex("Avg bus bandwidth +: (\\S+)")))  // %g: its width varies too
      l.replace(static_cast<size_t>(m.position(1)), static_cast<size_t>(m.length(1)), "#");
    const bool heading = l.rfind("#", 0) == 0 && contains(l, " redop ") && contains(l, "#wrong");
    for (size_t i = 0; i < l.size();) {  // each field: [i, j)
      if (l[i] == ' ') { ++i; continue; }
      size_t j = l.find(' ', i);
      if (j == std::string::npos) j = l.size();
      const std::string field = l.substr(i, j - i);
      if (heading) {
        columnAtEnd[j] = field;
      } else if (l[0] != '#') {
        const std::string col = columnAtEnd.count(j) ? columnAtEnd[j] : "";
        const bool varies = col == "time" || col == "algbw" || col == "busbw" || contains(col, "-p5") ||
                            contains(col, "-p9");
        if (varies && field != "N/A") maskRightAligned(l, i, j);
      }
      i = j;
    }
    masked += l + "\n";
  }
  return masked;
}

void expectGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(BENCH_GOLDEN_DIR) + "/bench_cli_test." + name + ".golden";
  const std::string masked = maskVarying(actual);
  if (const char* u = std::getenv("GYRE_BENCH_UPDATE_GOLDEN"); u && *u == '1') std::ofstream(path) << masked;
  EXPECT_EQ(readFile(path), masked) << "layout differs from " << path << "; the unmasked output:\n" << actual;
}

// ---- flags ----

TEST(Flags, BadFlagsGiveUsageAndExit2) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"nosuchcollective"},
      {"allreduce", "--nosuchflag"},
      {"allreduce", "-b"},
      {"allreduce", "-b", "12X"},
      {"allreduce", "-e", "-3"},
      {"allreduce", "-f", "1"},
      {"allreduce", "-n", "0"},
      {"allreduce", "-c", "2"},
      {"allreduce", "-o", "xor"},
      {"allreduce", "-d", "float7"},
      {"allreduce", "-a", "4"},
      {"allreduce", "-T", "soon"},
      {"peeraverage", "--peers", "everyone"},
      {"allreduce", "-R", "2"},
      {"allreduce", "--transport", "carrier-pigeon"},
      {"allreduce", "--bind", "socket"},
      {"allreduce", "--plot", "out.pdf"},
      {"allreduce", "--json", ""},
      {"allreduce", "--percentiles=1"},
      {"allreduce", "-b", "1K", "-e", "8"},
      {"allreduce", "--codec", "zip"},
      {"allreduce", "--codec", "int8", "-d", "int32"},
      {"allreduce", "--codec", "fp16", "-d", "all"},
      {"allreduce", "--codec", "int8", "-o", "max"},
      {"broadcast", "--codec", "int8"},
      {"plot", "a.json"},
      {"plot", "-o", "out.svg"},
  };
  for (const auto& args : bad) {
    Outcome o = bench({args});
    std::string cmd;
    for (const std::string& a : args) cmd += " '" + a + "'";
    EXPECT_EQ(o.exitCode, 2) << cmd << ": " << o.describe();
    EXPECT_TRUE(contains(o.err, "usage: gyre-bench")) << cmd << ": " << o.describe();
    EXPECT_TRUE(o.out.empty()) << cmd;
  }
}

TEST(Flags, HelpGoesToStandardOutputAndExits0) {
  Outcome o = bench({{"--help"}});
  EXPECT_EQ(o.exitCode, 0) << o.describe();
  for (const char* flag : {"-a, --average", "-T, --timeout", "--percentiles", "--json", "--csv", "--plot", "--label",
                           "--codec", "maxerr", "rmserr", "largest |exact|"})
    EXPECT_TRUE(contains(o.out, flag)) << flag;
}

// Compressed calls exist for three collectives, on float types, sum and
// avg: anything else is refused before measuring, saying what it takes.
TEST(Flags, CodecOutsideWhatTheCompressedCallsTakeIsAUsageError) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"broadcast", "--ranks", "2", "--codec", "int8"}, "--codec is for allreduce, allgather and reducescatter"},
      {{"allreduce", "--ranks", "2", "--codec", "gzip"}, "--codec takes none, fp16, bf16, int8 or onebit, not 'gzip'"},
      {{"allreduce", "--ranks", "2", "--codec", "int8", "-d", "double"}, "--codec takes -d float, half or bfloat16"},
      {{"reducescatter", "--ranks", "2", "--codec", "fp16", "-o", "prod"}, "--codec takes -o sum or avg, not prod"},
  };
  for (const auto& [args, message] : cases) {
    Outcome o = bench({args});
    EXPECT_EQ(o.exitCode, 2) << args[0] << ": " << o.describe();
    EXPECT_TRUE(contains(o.err, message)) << o.err;
    EXPECT_TRUE(o.out.empty()) << o.out;
  }
  // allgather takes no op: -o is not its business.
  Outcome g = bench({{"allgather", "--ranks", "2", "-b", "4K", "-e", "4K", "-n", "1", "-w", "0", "--codec", "bf16",
                      "-o", "max"}});
  EXPECT_EQ(g.exitCode, 0) << g.describe();
}

TEST(Flags, PngPlotWithoutRsvgConvertIsRefusedBeforeMeasuring) {
  // No rsvg-convert on this PATH, whatever is installed here.
  Outcome o = bench({{"allreduce", "--ranks", "2", "--plot", "x.png"}, {{"PATH", "/nonexistent"}}});
  EXPECT_EQ(o.exitCode, 2) << o.describe();
  EXPECT_TRUE(contains(o.err, "rsvg-convert")) << o.describe();
  EXPECT_TRUE(o.out.empty()) << o.describe();
}

TEST(Flags, LongFormsAreNcclTestsNames) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "--minbytes", "64", "--maxbytes=128", "--stepfactor", "2",
                      "--iters", "1", "--warmup_iters", "0", "--check", "1", "--op", "max", "--datatype", "int32",
                      "--average", "3", "--timeout", "60"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_TRUE(contains(o.out, "agg: max")) << o.out;
  EXPECT_TRUE(contains(o.out, "timeout: 60")) << o.out;
  const auto rows = tableRows(o.out);
  ASSERT_EQ(rows.size(), 2u) << o.out;
  EXPECT_EQ(rows[0][0], "64");
  EXPECT_EQ(rows[0][2], "int32");
  EXPECT_EQ(rows[0][3], "max");
}

// ---- arithmetic ----

TEST(Arithmetic, BusBandwidthFactorsAreNcclTests) {
  const int n = 4;
  EXPECT_DOUBLE_EQ(findCollective("allreduce")->busFactor(n), 2.0 * (n - 1) / n);
  for (const char* c : {"allgather", "reducescatter", "alltoall", "alltoallv"})
    EXPECT_DOUBLE_EQ(findCollective(c)->busFactor(n), double(n - 1) / n) << c;
  for (const char* c : {"broadcast", "reduce", "sendrecv"}) EXPECT_DOUBLE_EQ(findCollective(c)->busFactor(n), 1.0) << c;
  // 1 GB in 1 s is 1 GB/s of algorithm bandwidth; AllReduce on 4 ranks moves 1.5 times that on the bus.
  EXPECT_DOUBLE_EQ(algBandwidth(1000000000, 1e6), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidth(algBandwidth(1000000000, 1e6), findCollective("allreduce")->busFactor(4)), 1.5);
  EXPECT_DOUBLE_EQ(algBandwidth(4096, 0), 0.0);
}

TEST(Arithmetic, AverageFlagMeaningsAreNcclTests) {
  const std::vector<double> perRank = {4, 1, 7, 4};
  EXPECT_DOUBLE_EQ(aggregate(perRank, Aggregate::Rank0), 4);
  EXPECT_DOUBLE_EQ(aggregate(perRank, Aggregate::Avg), 4);
  EXPECT_DOUBLE_EQ(aggregate(perRank, Aggregate::Min), 1);
  EXPECT_DOUBLE_EQ(aggregate(perRank, Aggregate::Max), 7);
  EXPECT_DOUBLE_EQ(aggregate({2, 9}, Aggregate::Rank0), 2);
  EXPECT_STREQ(aggregateName(Aggregate::Rank0), "rank0");
  EXPECT_EQ(static_cast<int>(Aggregate::Avg), 1);  // nccl-tests' -a numbering and default
}

TEST(Arithmetic, PercentilesAreNearestRank) {
  std::vector<double> s;
  for (int i = 100; i >= 1; --i) s.push_back(i);  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(s, 50), 50);
  EXPECT_DOUBLE_EQ(percentile(s, 99), 99);
  EXPECT_DOUBLE_EQ(percentile({3, 1}, 50), 1);
  EXPECT_DOUBLE_EQ(percentile({3, 1}, 99), 3);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(percentile({}, 50), -1);
}

TEST(Arithmetic, RunReportsAlgbwAndBusbwFromItsOwnTimes) {
  const std::string dir = tempDir();
  Outcome o = bench({{"allreduce", "--ranks", "3", "-b", "96", "-e", "3K", "-n", "2", "-w", "1", "--json",
                      dir + "/r.json"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  Report r;
  std::string error;
  ASSERT_TRUE(fromJson(readFile(dir + "/r.json"), r, error)) << error;
  ASSERT_FALSE(r.rows.empty());
  double sum = 0;
  int cells = 0;
  for (const Row& w : r.rows)
    for (const Cell* c : {&w.outOfPlace, &w.inPlace}) {
      ASSERT_TRUE(c->present);
      EXPECT_NEAR(c->algbw, double(w.bytes) / c->timeUs / 1e3, 1e-6 * c->algbw + 1e-12);
      EXPECT_NEAR(c->busbw, c->algbw * 4.0 / 3.0, 1e-6 * c->busbw + 1e-12);  // 2(n-1)/n, n = 3
      sum += c->busbw, ++cells;
    }
  EXPECT_NEAR(r.avgBusBw, sum / cells, 1e-6 * r.avgBusBw + 1e-9);  // nccl-tests: every cell
  std::filesystem::remove_all(dir);
}

// ---- layout ----

TEST(Layout, RowIsFixedWidthInNcclTestsOrder) {
  Row w;
  w.bytes = 4096, w.count = 1024, w.type = "float", w.redop = "sum", w.root = -1;
  w.outOfPlace = {true, 12.345, 0.33, 0.5, 0, -1, -1};
  w.inPlace = {true, 1234.5, 0.0033, 0.005, 2, -1, -1};
  EXPECT_EQ(tableRow(w, false),
            "        4096          1024     float     sum      -1    12.35    0.33    0.50       0   1234.5    0.00"
            "    0.01       2\n");
  w.inPlace = Cell();  // no in-place form; no percentiles measured
  w.outOfPlace.wrong = -1;  // not checked
  EXPECT_EQ(tableRow(w, true),
            "        4096          1024     float     sum      -1    12.35    0.33    0.50     N/A              N/A"
            "     N/A     N/A       N/A       N/A       N/A       N/A\n");
}

TEST(Layout, AllReduceTableMatchesGolden) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "8", "-e", "4K", "-f", "8", "-n", "2", "-w", "1"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  expectGolden("allreduce", o.out);
}

TEST(Layout, PercentileColumnsAndMissingInPlaceMatchGolden) {
  Outcome o = bench({{"alltoallv", "--ranks", "3", "-b", "96", "-e", "1536", "-f", "4", "-n", "3", "-w", "0",
                      "--percentiles", "-a", "2", "-d", "int32", "--label", "golden run"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  expectGolden("alltoallv_percentiles", o.out);
}

TEST(Layout, EveryCollectiveRunsAndChecksClean) {
  for (const char* c : {"allreduce", "allgather", "reducescatter", "alltoall", "alltoallv", "broadcast", "reduce",
                        "gather", "scatter", "sendrecv", "barrier", "peeraverage"}) {
    Outcome o = bench({{c, "--ranks", "3", "-b", "8", "-e", "1K", "-f", "16", "-n", "1", "-w", "0", "-r", "2"}});
    EXPECT_EQ(o.exitCode, 0) << c << ": " << o.describe();
    EXPECT_TRUE(contains(o.out, "# Out of bounds values : 0 OK")) << c << ": " << o.out;
    EXPECT_TRUE(contains(o.out, "nranks 3, nhosts 1")) << c << ": " << o.out;
    EXPECT_TRUE(contains(o.out, "# transports: shm   algorithm: auto")) << c << ": " << o.out;
  }
}

// The sequence exchanges: a layout whose heads do not divide among the ranks,
// with grouped-query key/value heads that several ranks hold (summed on the
// way back), every type, over shared memory and TCP; the layout in the
// header; and what --parts and --kv-heads refuse.
TEST(Layout, SequenceExchangesRunAndCheckClean) {
  for (const char* c : {"seqtoheads", "headstoseq"})
    for (const char* t : {"shm", "tcp"}) {
      Outcome o = bench({{c, "--ranks", "3", "-b", "1K", "-e", "64K", "-f", "8", "-n", "1", "-w", "0", "-d", "all",
                          "--heads", "8", "--kv-heads", "2", "--head-dim", "4", "--parts", "qkv", "--transport", t}});
      EXPECT_EQ(o.exitCode, 0) << c << ": " << o.describe();
      EXPECT_TRUE(contains(o.out, "# Out of bounds values : 0 OK")) << c << ": " << o.out;
      EXPECT_TRUE(contains(o.out, "layout: heads 8, kv heads 2, head dim 4, parts qkv")) << c << ": " << o.out;
    }
  Outcome parts = bench({{"seqtoheads", "--parts", "vq"}});
  EXPECT_EQ(parts.exitCode, 2);
  EXPECT_TRUE(contains(parts.err, "--parts takes q, k, v, kv, qk, qv or qkv, not 'vq'")) << parts.err;
  Outcome kv = bench({{"headstoseq", "--heads", "8", "--kv-heads", "3"}});
  EXPECT_EQ(kv.exitCode, 2);
  EXPECT_TRUE(contains(kv.err, "--kv-heads must divide --heads")) << kv.err;
}

// -R 1: buffers from gyreMemAllocHost, which the direct algorithms (the tuner's
// choice once GYRE_MAPPED_BUFFERS=1 is implied) map and copy from; up to
// 256 KiB so that the larger rows take the direct path.
TEST(Layout, RegisteredBuffersRunAndCheckClean) {
  for (const char* c : {"allreduce", "allgather", "reducescatter", "alltoall", "alltoallv", "broadcast"}) {
    Outcome o = bench({{c, "--ranks", "3", "-b", "8", "-e", "256K", "-f", "32", "-n", "2", "-w", "1", "-R", "1"}});
    EXPECT_EQ(o.exitCode, 0) << c << ": " << o.describe();
    EXPECT_TRUE(contains(o.out, "# Out of bounds values : 0 OK")) << c << ": " << o.out;
  }
}

// --device cuda on gyre's host-emulated GPU: every collective's buffers in
// device memory, its calls on a stream, filled and checked through host
// mirrors; a corrupted device result is still caught.
TEST(Device, EveryCollectiveRunsAndChecksCleanOnDeviceBuffers) {
  const std::map<std::string, std::string> emulated{{"GYRE_DEVICE_BACKEND", "emulated"}};
  for (const char* c : {"allreduce", "allgather", "reducescatter", "alltoall", "alltoallv", "broadcast", "reduce",
                        "gather", "scatter", "sendrecv"}) {
    Outcome o = bench({{c, "--ranks", "3", "-b", "8", "-e", "64K", "-f", "64", "-n", "2", "-w", "1", "--device",
                        "cuda", "--percentiles"},
                       emulated});
    EXPECT_EQ(o.exitCode, 0) << c << ": " << o.describe();
    EXPECT_TRUE(contains(o.out, "# Out of bounds values : 0 OK")) << c << ": " << o.out;
  }
  Outcome bad = bench({{"allreduce", "--ranks", "2", "-b", "96", "-e", "96", "-n", "1", "-w", "0", "--device", "cuda"},
                       {{"GYRE_DEVICE_BACKEND", "emulated"}, {"GYRE_BENCH_CORRUPT", "1"}}});
  EXPECT_EQ(bad.exitCode, 1) << bad.describe();
  EXPECT_TRUE(contains(bad.out, "FAILED")) << bad.out;
}

// Without a GPU (and not emulated) --device cuda says why and exits 2.
TEST(Device, WithoutAGpuTheDeviceRunSaysWhy) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "8", "-e", "8", "--device", "cuda"}});
  if (o.exitCode == 0) GTEST_SKIP() << "this host has a GPU: the device run ran";
  EXPECT_EQ(o.exitCode, 2) << o.describe();
  EXPECT_TRUE(contains(o.err, "--device cuda: ")) << o.err;
  Outcome bad = bench({{"allreduce", "--device", "gpu"}});
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_TRUE(contains(bad.err, "--device takes host or cuda")) << bad.err;
}

// -d all and -o all: every type, and for each every op, each over the whole sweep.
TEST(Layout, AllTypesAndAllOpsAreEachSwept) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "64", "-e", "128", "-n", "1", "-w", "0", "-d", "all", "-o",
                      "all"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  const auto rows = tableRows(o.out);
  ASSERT_EQ(rows.size(), 10u * 5u * 2u) << o.out;
  std::set<std::string> types, ops;
  for (const auto& r : rows) types.insert(r[2]), ops.insert(r[3]);
  EXPECT_EQ(types.size(), 10u);
  EXPECT_EQ(ops, (std::set<std::string>{"sum", "prod", "max", "min", "avg"}));
  EXPECT_EQ(rows[0][3], "sum");
  EXPECT_EQ(rows[2][3], "prod");  // ops inside types, sizes innermost (nccl-tests' order)
  // A collective without an op runs once per type, shown as "none".
  Outcome g = bench({{"allgather", "--ranks", "2", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-o", "all"}});
  ASSERT_EQ(g.exitCode, 0) << g.describe();
  ASSERT_EQ(tableRows(g.out).size(), 1u) << g.out;
  EXPECT_EQ(tableRows(g.out)[0][3], "none");
}

// ---- checking ----

TEST(Check, CorruptedResultIsCountedAndFailsTheRun) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"allreduce", "--ranks", "2"}, {"gather", "--ranks", "3", "-r", "1"}, {"alltoall", "--ranks", "3"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"-b", "96", "-e", "384", "-n", "1", "-w", "0"});
    Outcome o = bench({a, {{"GYRE_BENCH_CORRUPT", "1"}}});
    EXPECT_EQ(o.exitCode, 1) << args[0] << ": " << o.describe();
    EXPECT_TRUE(contains(o.out, "FAILED")) << o.out;
    const auto rows = tableRows(o.out);
    ASSERT_FALSE(rows.empty()) << o.out;
    for (const auto& r : rows) {
      EXPECT_GT(std::stoll(r[8]), 0) << args[0] << ": out-of-place #wrong in " << o.out;
      EXPECT_GT(std::stoll(r[12]), 0) << args[0] << ": in-place #wrong in " << o.out;
    }
  }
}

TEST(Check, UncheckedRunShowsNoWrongCounts) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-c", "0"},
                     {{"GYRE_BENCH_CORRUPT", "1"}}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  const auto rows = tableRows(o.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][8], "N/A");
  EXPECT_EQ(rows[0][12], "N/A");
}

// ---- -T ----

TEST(Timeout, StalledRowEndsTheRunWithExit3AndAMessage) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-T", "1"},
                     {{"GYRE_BENCH_STALL", "1"}}});
  EXPECT_FALSE(o.timedOut) << o.describe();
  EXPECT_EQ(o.exitCode, 3) << o.describe();
  EXPECT_TRUE(contains(o.err, "timed out: allreduce float sum 64 B took longer than -T 1 s")) << o.describe();
}

// ---- result files ----

std::vector<std::string> csvFields(const std::string& line) {
  std::vector<std::string> f(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') f.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) f.emplace_back();
    else f.back() += c;
  }
  return f;
}

std::string csvCell(double v) { return v < 0 ? "" : formatNumber(v); }

TEST(Results, JsonAndCsvHoldEveryRowAsPrinted) {
  const std::string dir = tempDir();
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-w", "1", "-o", "all",
                      "--percentiles", "--label", "a, \"quoted\" label", "--json", dir + "/r.json", "--csv",
                      dir + "/r.csv"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  Report r;
  std::string error;
  ASSERT_TRUE(fromJson(readFile(dir + "/r.json"), r, error)) << error;
  EXPECT_EQ(r.settings.collective, "allreduce");
  EXPECT_EQ(r.settings.label, "a, \"quoted\" label");
  EXPECT_EQ(r.settings.nranks, 2);
  EXPECT_EQ(r.settings.nhosts, 1);
  EXPECT_EQ(r.settings.transports, "shm");
  EXPECT_EQ(r.settings.op, "all");
  EXPECT_EQ(r.settings.iters, 2);
  EXPECT_TRUE(r.settings.percentiles);
  EXPECT_EQ(r.outOfBounds, 0);

  // JSON against the table: same rows, values equal at the table's precision.
  const auto rows = tableRows(o.out);
  ASSERT_EQ(rows.size(), r.rows.size());
  ASSERT_EQ(rows.size(), 5u * 4u);  // 5 ops x sizes 8, 32, 128, 512
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& w = r.rows[i];
    const auto& t = rows[i];
    ASSERT_EQ(t.size(), 17u);
    EXPECT_EQ(t[0], std::to_string(w.bytes));
    EXPECT_EQ(t[1], std::to_string(w.count));
    EXPECT_EQ(t[2], w.type);
    EXPECT_EQ(t[3], w.redop);
    EXPECT_EQ(t[4], std::to_string(w.root));
    const Cell* cells[2] = {&w.outOfPlace, &w.inPlace};
    for (int k = 0; k < 2; ++k) {
      const Cell& c = *cells[k];
      const double printed = c.timeUs >= 10000 ? 1 : c.timeUs >= 100 ? 0.1 : 0.01;  // the table's last digit
      EXPECT_NEAR(std::stod(t[5 + 4 * k]), c.timeUs, 0.51 * printed);
      EXPECT_NEAR(std::stod(t[6 + 4 * k]), c.algbw, 0.0051);
      EXPECT_NEAR(std::stod(t[7 + 4 * k]), c.busbw, 0.0051);
      EXPECT_EQ(t[8 + 4 * k], std::to_string(c.wrong));
      EXPECT_LE(c.p50Us, c.p99Us);
      EXPECT_GE(c.p50Us, 0);
    }
  }

  // CSV against JSON: the same numbers, digit for digit.
  const auto lines = linesOf(readFile(dir + "/r.csv"));
  ASSERT_EQ(lines.size(), r.rows.size() + 1);
  EXPECT_EQ(lines[0], kCsvColumns);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& w = r.rows[i];
    const auto f = csvFields(lines[i + 1]);
    ASSERT_EQ(f.size(), 27u) << lines[i + 1];
    EXPECT_EQ(f[0], "allreduce");
    EXPECT_EQ(f[1], r.settings.label);
    EXPECT_EQ(f[5], "shm");
    EXPECT_EQ(f[10], std::to_string(w.bytes));
    EXPECT_EQ(f[12], w.type);
    EXPECT_EQ(f[13], w.redop);
    const Cell* cells[2] = {&w.outOfPlace, &w.inPlace};
    for (int k = 0; k < 2; ++k) {
      const Cell& c = *cells[k];
      const size_t at = 15 + 6 * static_cast<size_t>(k);
      EXPECT_EQ(f[at], formatNumber(c.timeUs));
      EXPECT_EQ(f[at + 1], formatNumber(c.algbw));
      EXPECT_EQ(f[at + 2], formatNumber(c.busbw));
      EXPECT_EQ(f[at + 3], std::to_string(c.wrong));
      EXPECT_EQ(f[at + 4], csvCell(c.p50Us));
      EXPECT_EQ(f[at + 5], csvCell(c.p99Us));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Results, ReportSurvivesJsonRoundTrip) {
  Report r;
  r.settings.collective = "reduce";
  r.settings.label = "tab\there \"and\" back\\slash";
  r.settings.nranks = 4, r.settings.nhosts = 2, r.settings.transports = "shm+tcp", r.settings.algorithm = "tree";
  r.settings.minBytes = 8, r.settings.maxBytes = 1 << 20, r.settings.stepFactor = 2, r.settings.iters = 7;
  r.settings.check = false, r.settings.dtype = "all", r.settings.op = "max", r.settings.average = 0;
  r.settings.averageName = "rank0", r.settings.timeout = 30, r.settings.percentiles = true;
  Row w;
  w.bytes = 1024, w.count = 256, w.type = "int32", w.redop = "max", w.root = 3;
  w.outOfPlace = {true, 1.25, 0.8192, 0.8192, -1, 1.125, 3.5};
  r.rows = {w, w};
  r.rows[1].inPlace = {true, 2.5, 0.4096, 0.4096, 0, 2, 9.75};
  r.outOfBounds = 0, r.avgBusBw = 0.6144;
  Report back;
  std::string error;
  ASSERT_TRUE(fromJson(toJson(r), back, error)) << error;
  EXPECT_EQ(toJson(back), toJson(r));
  EXPECT_EQ(toCsv(back), toCsv(r));
  EXPECT_EQ(back.settings.label, r.settings.label);
  EXPECT_FALSE(back.rows[0].inPlace.present);
  EXPECT_EQ(back.rows[0].outOfPlace.wrong, -1);
  EXPECT_DOUBLE_EQ(back.rows[1].inPlace.p99Us, 9.75);
  EXPECT_FALSE(fromJson("{\"rows\": 3}", back, error));
  EXPECT_FALSE(fromJson("{\"rows\": [", back, error));
}

// ---- compressed calls (--codec) ----

TEST(Codec, MessageBytesAreTheCodecsLayouts) {
  EXPECT_EQ(messageBytes(gyreCodecNone, 1000, 4), 4000u);
  EXPECT_EQ(messageBytes(gyreCodecFp16, 1000, 4), 2000u);
  EXPECT_EQ(messageBytes(gyreCodecBf16, 1000, 2), 2000u);
  EXPECT_EQ(messageBytes(gyreCodecInt8, 4096, 4), 8u + 4096);       // {lo, hi} per chunk, a byte per value
  EXPECT_EQ(messageBytes(gyreCodecInt8, 4097, 4), 16u + 4097);
  EXPECT_EQ(messageBytes(gyreCodecOneBit, 4096, 4), 4u + 512);      // a scale per chunk, a bit per value
  EXPECT_EQ(messageBytes(gyreCodecOneBit, 4097, 4), 8u + 129 * 4);  // in whole 32-bit words
  EXPECT_EQ(messageBytes(gyreCodecInt8, 0, 4), 0u);
}

TEST(Codec, ErrorsAreRelativeToTheLargestExactValue) {
  gyre::test::ErrorStats a, b;
  a.add(9, 10), a.add(-2, -2);
  b.add(4.5, 5), b.add(NAN, 3);  // not finite: counted apart, left out of the error
  a.merge(b);
  EXPECT_EQ(a.elems, 3u);
  EXPECT_EQ(a.nonFinite, 1u);
  EXPECT_DOUBLE_EQ(a.maxRelative(), 1.0 / 10);
  EXPECT_DOUBLE_EQ(a.rmsRelative(), std::sqrt((1 + 0 + 0.25) / 3) / 10);
  gyre::test::ErrorStats zeros;  // every exact value 0: absolute
  zeros.add(0.5, 0);
  EXPECT_DOUBLE_EQ(zeros.maxRelative(), 0.5);
  EXPECT_DOUBLE_EQ(gyre::test::ErrorStats().rmsRelative(), 0);
}

// The inputs a codec is measured on have fractions (small integers would go
// through float16 and bfloat16 exactly), and their exact sums are the sums
// of the inputs as stored.
TEST(Codec, FractionalInputsAreNotIntegersAndTheirSumsAreExact) {
  const size_t n = 1000;
  std::vector<float> in0(n), in1(n), pattern(n);
  gyre::test::fillFractionalInput(in0.data(), n, gyreFloat32, gyreSum, 0);
  gyre::test::fillFractionalInput(in1.data(), n, gyreFloat32, gyreSum, 1);
  gyre::test::fillFractionalPattern(pattern.data(), n, gyreFloat32, 5);
  size_t whole = 0;
  for (size_t i = 0; i < n; ++i) {
    whole += in0[i] == std::floor(in0[i]);
    EXPECT_NE(in0[i], in1[i]) << i;
    EXPECT_EQ(gyre::test::fractionalExpected(i, gyreFloat32, gyreSum, 2), double(in0[i]) + double(in1[i])) << i;
    EXPECT_EQ(gyre::test::fractionalExpected(i, gyreFloat32, gyreAvg, 2), (double(in0[i]) + in1[i]) / 2) << i;
    EXPECT_EQ(gyre::test::fractionalPatternValue(i, gyreFloat32, 5), double(pattern[i])) << i;
  }
  EXPECT_LT(whole, 5u);
  const gyre::test::ErrorStats e = gyre::test::measurePatternError(pattern.data(), n, gyreFloat32, 5);
  EXPECT_EQ(e.maxAbsErr, 0);
  EXPECT_EQ(e.elems, n);
}

// maxerr stands where #wrong stood, so every field before it keeps its
// number; the rms errors and the bytes sent follow the in-place columns.
TEST(Codec, RowKeepsTheFieldPositionsAndAddsItsColumnsLast) {
  Row w;
  w.bytes = 4096, w.count = 1024, w.type = "float", w.redop = "sum", w.root = -1;
  w.outOfPlace = {true, 12.345, 0.33, 0.5, 0, -1, -1, 0.0123, 0.00456};
  w.inPlace = {true, 1234.5, 0.0033, 0.005, 0, -1, -1, 0.0125, 0.0047};
  w.wireBytes = 1032, w.plainBytes = 4096;
  EXPECT_EQ(tableRow(w, false, true),
            "        4096          1024     float     sum      -1    12.35    0.33    0.50  1.23e-02   1234.5    0.00"
            "    0.01  1.25e-02  4.56e-03  4.70e-03        1032        4096\n");
  for (Cell* c : {&w.outOfPlace, &w.inPlace}) c->maxErr = c->rmsErr = -1;  // not checked
  auto t = tokens(tableRow(w, true, true));
  ASSERT_EQ(t.size(), 21u);
  EXPECT_EQ(t[8], "N/A");
  EXPECT_EQ(t[12], "N/A");
  EXPECT_EQ(t[17], "N/A");  // after the four percentile columns
  EXPECT_EQ(t[18], "N/A");
  EXPECT_EQ(t[19], "1032");
  w.inPlace = Cell();  // no such form: blank time, as without a codec
  t = tokens(tableRow(w, false, true));
  ASSERT_EQ(t.size(), 16u);
  EXPECT_EQ(t[9], "N/A");
  EXPECT_EQ(t[11], "N/A");
  EXPECT_EQ(t[13], "N/A");
  EXPECT_EQ(t[15], "4096");
}

// A codec table row: the plain table's fields with maxerr in #wrong's
// place, then oop-rms, ip-rms, wire, plain.
struct CodecRow {
  size_t bytes = 0, count = 0;
  double maxErr[2] = {}, rmsErr[2] = {};  // out of place, in place
  double wire = 0, plain = 0;
};

std::vector<CodecRow> codecRows(const std::string& out) {
  std::vector<CodecRow> rows;
  for (const auto& t : tableRows(out)) {
    EXPECT_EQ(t.size(), 17u) << out;
    if (t.size() != 17u) continue;
    CodecRow r;
    r.bytes = std::stoul(t[0]), r.count = std::stoul(t[1]);
    r.maxErr[0] = std::stod(t[8]), r.maxErr[1] = std::stod(t[12]);
    r.rmsErr[0] = std::stod(t[13]), r.rmsErr[1] = std::stod(t[14]);
    r.wire = std::stod(t[15]), r.plain = std::stod(t[16]);
    rows.push_back(r);
  }
  return rows;
}

TEST(Codec, Int8AllReducePrintsASmallErrorAndTheBytesSent) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "4000", "-e", "64000", "-f", "4", "-n", "1", "-w", "0",
                      "--codec", "int8"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_TRUE(contains(o.out, "# transports: shm   algorithm: auto   codec: int8\n")) << o.out;
  EXPECT_TRUE(contains(o.out, "  maxerr  ")) << o.out;
  EXPECT_FALSE(contains(o.out, "#wrong")) << o.out;
  EXPECT_TRUE(contains(o.out, "oop-rms    ip-rms        wire       plain\n")) << o.out;
  EXPECT_TRUE(contains(o.out, "# Out of bounds values : 0 OK")) << o.out;
  EXPECT_TRUE(contains(o.out, "# Max relative error   : ")) << o.out;
  const auto rows = codecRows(o.out);
  ASSERT_EQ(rows.size(), 3u) << o.out;
  // 2 ranks send 2(n-1)/n = 1 message of the row on average: 1000, 4000,
  // 16000 values as int8, a {lo, hi} pair per started chunk of 4096.
  const double wire[3] = {8 + 1000, 8 + 4000, 4 * 8 + 16000};
  for (size_t i = 0; i < rows.size(); ++i) {
    const CodecRow& r = rows[i];
    EXPECT_EQ(r.wire, wire[i]) << r.bytes;
    EXPECT_EQ(r.plain, double(r.bytes)) << r.bytes;
    for (int k = 0; k < 2; ++k) {
      EXPECT_GT(r.maxErr[k], 0) << r.bytes << ": 8 bits cannot carry the inputs' fractions";
      EXPECT_LT(r.maxErr[k], 0.05) << r.bytes;
      EXPECT_GT(r.rmsErr[k], 0) << r.bytes;
      EXPECT_LE(r.rmsErr[k], r.maxErr[k] * 1.01) << r.bytes;  // both printed to 3 digits
    }
  }
}

TEST(Codec, Fp16ErrorIsTiny) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "64K", "-e", "64K", "-n", "1", "-w", "0", "--codec", "fp16",
                      "-o", "avg"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  const auto rows = codecRows(o.out);
  ASSERT_EQ(rows.size(), 1u) << o.out;
  EXPECT_EQ(rows[0].wire, 2 * 16384);
  EXPECT_EQ(rows[0].plain, 4 * 16384);
  for (int k = 0; k < 2; ++k) {
    EXPECT_GT(rows[0].maxErr[k], 0) << "float16 cannot carry 20-bit fractions: " << o.out;
    EXPECT_LT(rows[0].maxErr[k], 1e-3) << o.out;
  }
}

// Every codec on every compressed collective, 3 ranks: the table, the JSON
// and the CSV agree on the errors and the bytes sent.
TEST(Codec, EveryCodecAndCollectiveWritesItsErrorsAndBytesToJsonAndCsv) {
  const std::string dir = tempDir();
  const std::map<std::string, double> bound = {{"fp16", 2e-3}, {"bf16", 1.5e-2}, {"int8", 0.05}, {"onebit", 2}};
  for (const char* coll : {"allreduce", "reducescatter", "allgather"}) {
    for (const auto& [codec, most] : bound) {
      const std::string what = std::string(coll) + " " + codec;
      Outcome o = bench({{coll, "--ranks", "3", "-b", "12K", "-e", "96K", "-f", "8", "-n", "1", "-w", "0", "--codec",
                          codec, "--json", dir + "/r.json", "--csv", dir + "/r.csv"}});
      ASSERT_EQ(o.exitCode, 0) << what << ": " << o.describe();
      Report r;
      std::string error;
      ASSERT_TRUE(fromJson(readFile(dir + "/r.json"), r, error)) << error;
      EXPECT_EQ(r.settings.codec, codec);
      const auto rows = codecRows(o.out);
      const auto lines = linesOf(readFile(dir + "/r.csv"));
      ASSERT_EQ(rows.size(), 2u) << what << ": " << o.out;
      ASSERT_EQ(r.rows.size(), rows.size());
      ASSERT_EQ(lines.size(), rows.size() + 1);
      EXPECT_EQ(lines[0], std::string(kCsvColumns) + kCsvCodecColumns);
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& w = r.rows[i];
        EXPECT_NEAR(rows[i].wire, w.wireBytes, 0.5) << what;
        EXPECT_NEAR(rows[i].plain, w.plainBytes, 0.5) << what;
        EXPECT_LT(w.wireBytes, w.plainBytes) << what;
        const auto f = csvFields(lines[i + 1]);
        ASSERT_EQ(f.size(), 34u) << lines[i + 1];
        EXPECT_EQ(f[27], codec);
        EXPECT_EQ(f[28], formatNumber(w.wireBytes));
        EXPECT_EQ(f[29], formatNumber(w.plainBytes));
        const Cell* cells[2] = {&w.outOfPlace, &w.inPlace};
        for (int k = 0; k < 2; ++k) {
          const Cell& c = *cells[k];
          EXPECT_EQ(c.wrong, 0) << what;
          EXPECT_GE(c.maxErr, c.rmsErr) << what;
          EXPECT_GE(c.rmsErr, 0) << what;
          EXPECT_LT(c.maxErr, most) << what;
          EXPECT_NEAR(rows[i].maxErr[k], c.maxErr, 0.006 * c.maxErr) << what;  // %.2e
          EXPECT_NEAR(rows[i].rmsErr[k], c.rmsErr, 0.006 * c.rmsErr) << what;
          EXPECT_EQ(f[30 + 2 * k], formatNumber(c.maxErr));
          EXPECT_EQ(f[31 + 2 * k], formatNumber(c.rmsErr));
        }
      }
    }
  }
  // ReduceScatter and AllGather: each rank sends every peer one block.
  // reducescatter int8 at 96K over 3 ranks: blocks of 8192 values, each
  // two {lo, hi} pairs and 8192 codes, to 2 peers.
  Outcome o = bench({{"reducescatter", "--ranks", "3", "-b", "96K", "-e", "96K", "-n", "1", "-w", "0", "--codec",
                      "int8", "-c", "0"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  const auto rows = tableRows(o.out);
  ASSERT_EQ(rows.size(), 1u) << o.out;
  ASSERT_EQ(rows[0].size(), 17u) << o.out;
  EXPECT_EQ(rows[0][15], std::to_string(2 * (16 + 8192)));
  EXPECT_EQ(rows[0][16], std::to_string(2 * 8192 * 4));
  for (size_t k : {8, 12, 13, 14}) EXPECT_EQ(rows[0][k], "N/A") << "-c 0 measures no error: " << o.out;
  EXPECT_FALSE(contains(o.out, "# Max relative error")) << o.out;
  std::filesystem::remove_all(dir);
}

// --device cuda (emulated): inputs filled and results measured through the
// host copies, as for the exact check.
TEST(Codec, DeviceBuffersAreMeasuredThroughTheirHostCopies) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "64K", "-e", "64K", "-n", "1", "-w", "0", "--device", "cuda",
                      "--codec", "int8"},
                     {{"GYRE_DEVICE_BACKEND", "emulated"}}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  const auto rows = codecRows(o.out);
  ASSERT_EQ(rows.size(), 1u) << o.out;
  for (int k = 0; k < 2; ++k) {
    EXPECT_GT(rows[0].maxErr[k], 0) << o.out;
    EXPECT_LT(rows[0].maxErr[k], 0.05) << o.out;
  }
}

TEST(Codec, FieldsSurviveJsonRoundTripAndStayOutOfPlainFiles) {
  Report r;
  r.settings.collective = "allreduce", r.settings.codec = "onebit", r.settings.transports = "shm";
  Row w;
  w.bytes = 4096, w.count = 1024, w.type = "float", w.redop = "sum";
  w.outOfPlace = {true, 1.25, 0.8192, 0.8192, 0, -1, -1, 0.5, 0.25};
  w.inPlace = {true, 1.5, 0.5, 0.5, -1, -1, -1, -1, -1};
  w.wireBytes = 170.666666, w.plainBytes = 5461.33333;
  r.rows = {w};
  Report back;
  std::string error;
  ASSERT_TRUE(fromJson(toJson(r), back, error)) << error;
  EXPECT_EQ(toJson(back), toJson(r));
  EXPECT_EQ(toCsv(back), toCsv(r));
  EXPECT_EQ(back.settings.codec, "onebit");
  EXPECT_DOUBLE_EQ(back.rows[0].outOfPlace.maxErr, 0.5);
  EXPECT_DOUBLE_EQ(back.rows[0].outOfPlace.rmsErr, 0.25);
  EXPECT_EQ(back.rows[0].inPlace.maxErr, -1);
  EXPECT_NEAR(back.rows[0].wireBytes, w.wireBytes, 1e-3);
  EXPECT_TRUE(contains(toJson(r), "\"maxerr\": 0.5, \"rmserr\": 0.25")) << toJson(r);
  EXPECT_TRUE(contains(toJson(r), "\"maxerr\": null")) << toJson(r);
  EXPECT_TRUE(contains(toJson(r), "\"codec\": \"onebit\"\n")) << toJson(r);
  // Without a codec the files are as they always were.
  r.settings.codec = "none";
  for (const char* field : {"codec", "maxerr", "rmserr", "wireBytes", "plainBytes"})
    EXPECT_FALSE(contains(toJson(r), field)) << field;
  EXPECT_EQ(linesOf(toCsv(r))[0], kCsvColumns);
  // A codec's run is told apart from the same run uncompressed in plots.
  r.settings.algorithm = "auto";
  Report lossy = r;
  lossy.settings.codec = "int8";
  const auto series = seriesOf({r, lossy});
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].name, "allreduce shm auto");
  EXPECT_EQ(series[1].name, "allreduce shm auto int8");
}

// ---- plots ----

TEST(Plot, RunDrawsBothPanelsAndMergesWithOtherRuns) {
  const std::string dir = tempDir();
  for (const char* t : {"shm", "tcp"}) {
    Outcome o = bench({{"allgather", "--ranks", "2", "-b", "64", "-e", "4K", "-f", "4", "-n", "1", "-w", "0",
                        "--transport", t, "--json", dir + "/" + t + ".json", "--plot", dir + "/" + t + ".svg"}});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    const std::string svg = readFile(dir + "/" + t + ".svg");
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
    EXPECT_EQ(count(svg, "<polyline"), 2) << svg;  // one series, two panels
    EXPECT_TRUE(contains(svg, std::string("allgather ") + t + " auto")) << svg;
    EXPECT_TRUE(contains(svg, ">4K<")) << svg;  // K/M labels on the size axis
  }
  // A peer's result in the same schema, with only the fields a plot needs.
  std::ofstream(dir + "/peer.json")
      << "{\"settings\": {\"library\": \"openmpi\", \"collective\": \"allgather\", \"transports\": \"vader\"},\n"
         " \"rows\": [{\"size\": 64, \"outOfPlace\": {\"time_us\": 3, \"busbw\": 0.01}},\n"
         "          {\"size\": 4096, \"outOfPlace\": {\"time_us\": 9, \"busbw\": 0.2}}]}\n";
  Outcome m = bench({{"plot", "-o", dir + "/merged.svg", dir + "/shm.json", dir + "/tcp.json", dir + "/peer.json"}});
  ASSERT_EQ(m.exitCode, 0) << m.describe();
  const std::string svg = readFile(dir + "/merged.svg");
  EXPECT_EQ(count(svg, "<polyline"), 6) << svg;
  for (const char* name : {"allgather shm auto", "allgather tcp auto", "openmpi allgather vader auto"})
    EXPECT_TRUE(contains(svg, name)) << name;
  Outcome bad = bench({{"plot", "-o", dir + "/x.svg", dir + "/nonexistent.json"}});
  EXPECT_EQ(bad.exitCode, 1) << bad.describe();
  std::filesystem::remove_all(dir);
}

TEST(Plot, SeriesAreNamedByLabelAndSplitByTypeAndOp) {
  Report a;
  a.settings.collective = "allreduce", a.settings.transports = "shm", a.settings.algorithm = "ring";
  for (const char* op : {"sum", "max"}) {
    Row w;
    w.bytes = 1024, w.type = "float", w.redop = op, w.outOfPlace = {true, 2, 0.5, 0.5, 0, -1, -1};
    a.rows.push_back(w);
  }
  Report b = a;
  b.settings.label = "mine";
  const auto s = seriesOf({a, b, a});
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].name, "allreduce shm ring float/sum");
  EXPECT_EQ(s[2].name, "mine float/sum");
  EXPECT_EQ(s[4].name, "allreduce shm ring float/sum (2)");
}

// ---- progress line ----

TEST(Progress, ShownOnATerminalAndClearedBeforeRows) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "64", "-e", "256", "-n", "2", "-w", "1"}, {}, true});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_TRUE(contains(o.err, "\r\033[K[gyre-bench] allreduce float sum 64 B (row 1/3)")) << o.err;
  EXPECT_TRUE(contains(o.err, "elapsed")) << o.err;
  // Each drawing is followed by an erase before the next row is printed.
  const size_t last = o.err.rfind("[gyre-bench]");
  ASSERT_NE(last, std::string::npos);
  EXPECT_NE(o.err.find("\r\033[K", last), std::string::npos) << o.err;
  EXPECT_FALSE(contains(o.out, "[gyre-bench]"));
}

TEST(Progress, AbsentWhenStandardErrorIsNotATerminal) {
  Outcome o = bench({{"allreduce", "--ranks", "2", "-b", "64", "-e", "256", "-n", "2", "-w", "1"}});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_TRUE(o.err.empty()) << o.err;
}

}  // namespace
