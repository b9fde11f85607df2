// gyre-algo-sweep from the outside: every operation it compares runs with
// auto, online and each registered algorithm interleaved, prints one row per size
// with every variant's time, names the best fixed one, and writes the same
// numbers as JSON; bad arguments get the usage and exit 2. Real process
// groups under a hard deadline; no timing is asserted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "collectives/planner.h"
#include "tests/support/subprocess.h"

namespace {

gyre::test::Outcome sweep(std::vector<std::string> args) {
  gyre::test::Proc p;
  p.argv = {GYRE_ALGO_SWEEP_PATH};
  p.argv.insert(p.argv.end(), args.begin(), args.end());
  return gyre::test::run(p, 120);
}

size_t countOf(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(AlgoSweep, EveryOperationComparesAutoWithEachAlgorithm) {
  const std::string json = testing::TempDir() + "/gyre-algo-sweep.json";
  for (const char* op : {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"}) {
    std::remove(json.c_str());
    const gyre::test::Outcome o = sweep({op, "--ranks", "3", "-b", "64", "-e", "64K", "-f", "32", "--rounds", "2",
                                         "--target-ms", "0.2", "--json", json});
    ASSERT_EQ(o.exitCode, 0) << op << ": " << o.describe();
    std::vector<std::string> algos;
    for (const auto& a : gyre::collectives::algorithms())
      if (std::string(gyre::collectives::opKindName(a.op)) == op) algos.push_back(a.name);
    ASSERT_FALSE(algos.empty()) << op;
    const std::string header = o.out.substr(0, o.out.find('\n', o.out.find("| bytes |")));
    EXPECT_NE(header.find("| bytes | auto | online |"), std::string::npos) << o.out;
    EXPECT_NE(header.find("| auto / best | online / best |"), std::string::npos) << o.out;
    for (const std::string& a : algos) EXPECT_NE(header.find(" " + a + " |"), std::string::npos) << a << ": " << o.out;
    // 64 B, 2 KiB and 64 KiB: one row each, every one naming its best fixed algorithm.
    for (const char* row : {"\n| 64 |", "\n| 2K |", "\n| 64K |"}) EXPECT_EQ(countOf(o.out, row), 1u) << row << o.out;
    EXPECT_EQ(countOf(o.out, "**"), 2u * 3) << o.out;  // the best fixed time, bold, once per row
    EXPECT_NE(o.out.find("Within 10% of the best fixed algorithm: auto at "), std::string::npos) << o.out;
    EXPECT_NE(o.out.find(" sizes, online at "), std::string::npos) << o.out;
    std::ifstream in(json);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"op\": \"" + std::string(op) + "\""), std::string::npos) << text;
    EXPECT_EQ(countOf(text, "\"bytes\":"), 3u) << text;
  }
  std::remove(json.c_str());
}

TEST(AlgoSweep, BadArgumentsGiveTheUsageAndExit2) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{},
                                             {"gather"},
                                             {"allreduce", "--ranks", "1"},
                                             {"allreduce", "-b", "1M", "-e", "1K"},
                                             {"allreduce", "-f", "1"},
                                             {"allreduce", "--bogus"},
                                             {"allreduce", "-e", "12Q"}}) {
    const gyre::test::Outcome o = sweep(args);
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    EXPECT_NE(o.err.find("usage: gyre-algo-sweep"), std::string::npos) << o.describe();
  }
}

// --replay: the tuner as built against a recording, run by nothing. The
// model picks recursive doubling for an 8-byte AllReduce at 2 ranks and the
// ring at 64 MiB; the recording makes the first the best and the second the
// worst, so exactly one row is within 10%.
TEST(AlgoSweep, ReplayScoresTheModelsPicksAgainstARecording) {
  const std::string path = testing::TempDir() + "/gyre-sweep-replay.json";
  // "online" is a tuned variant too: never the best fixed one, however fast.
  std::ofstream(path) << R"({"op": "allreduce", "ranks": 2, "variants": ["auto", "online", "ring", "recursive_doubling"],
    "rows": [{"bytes": 8, "us": [1, 0.1, 5, 1]}, {"bytes": 67108864, "us": [1, 0.1, 900, 100]}]})";
  const gyre::test::Outcome o = sweep({"--replay", path});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_NE(o.out.find("allreduce, 2 ranks: the model's pick within 10% of the best at 1 of 2 sizes 64M:ring(9.00; "
                       "recursive_doubling)"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("total: 1 of 2"), std::string::npos) << o.out;
  // --model: the same recording against a tuner file in which reducing is
  // very slow, so the ring, which reduces half the vector where recursive
  // doubling reduces all of it, takes 8 B too, the recording's worst there.
  const std::string model = testing::TempDir() + "/gyre-sweep-replay.model";
  std::ofstream(model) << "reduce.bandwidth_gbps = 0.000001\n";
  const gyre::test::Outcome tuned = sweep({"--replay", "--model", model, path});
  ASSERT_EQ(tuned.exitCode, 0) << tuned.describe();
  EXPECT_NE(tuned.out.find("at 0 of 2 sizes 8:ring(5.00; recursive_doubling)"), std::string::npos) << tuned.out;
  std::ofstream(model) << "local.bandwidth_gbps = fast\n";
  const gyre::test::Outcome badModel = sweep({"--replay", "--model", model, path});
  EXPECT_EQ(badModel.exitCode, 2) << badModel.describe();
  EXPECT_NE(badModel.err.find("local.bandwidth_gbps"), std::string::npos) << badModel.describe();
  std::remove(model.c_str());
  std::ofstream(path) << "{not json";
  const gyre::test::Outcome bad = sweep({"--replay", path});
  EXPECT_EQ(bad.exitCode, 2) << bad.describe();
  std::remove(path.c_str());
  // The recordings docs/PERFORMANCE-collectives.md quotes still replay.
  std::vector<std::string> args = {"--replay"};
  for (const auto& e : std::filesystem::recursive_directory_iterator(GYRE_TUNER_SWEEPS))
    if (e.path().extension() == ".json") args.push_back(e.path().string());
  ASSERT_GT(args.size(), 12u);
  const gyre::test::Outcome recorded = sweep(args);
  EXPECT_EQ(recorded.exitCode, 0) << recorded.describe();
  EXPECT_NE(recorded.out.find("total: "), std::string::npos) << recorded.out;
}

}  // namespace
