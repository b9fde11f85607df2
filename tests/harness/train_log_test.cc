// The training log (harness/train_log.h): what TrainLog writes reads back bit
// for bit, the lines are the documented JSON, and a malformed line is
// refused with the file and its line number.
#include "harness/train_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace gyre::harness::test {
namespace {

namespace fs = std::filesystem;

class HarnessTrainLog : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gyre-log-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::string writeText(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }
  static std::string readText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path dir_;
};

// Runs f and expects a std::runtime_error whose message holds every one of `parts`.
template <typename F>
void expectError(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
  }
}

void expectSameBits(double a, double b) {
  EXPECT_EQ(std::bit_cast<uint64_t>(a), std::bit_cast<uint64_t>(b)) << a << " vs " << b;
}

TEST_F(HarnessTrainLog, RoundTripIsBitExact) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::vector<double> awkward = {0.1,
                                       1.0 / 3,
                                       -0.0,
                                       5e-324,
                                       std::numeric_limits<double>::max(),
                                       std::numeric_limits<double>::min(),
                                       6.02214076e23,
                                       -2.5e-7,
                                       std::nextafter(1.0, 2.0),
                                       kInf,
                                       -kInf};
  std::vector<StepRecord> written;
  for (size_t i = 0; i < awkward.size(); ++i) {
    const double a = awkward[i], b = awkward[(i + 3) % awkward.size()];
    written.push_back({static_cast<int64_t>(i) * 1000003 - 7, a, b, a * 7, b / 3, a, b, -a});
  }
  written.push_back({std::numeric_limits<int64_t>::max(), 5.54, 3e-4, 51234.5, 0.08, 0.01, 0,
                     std::numeric_limits<double>::quiet_NaN()});
  const std::string path = file("run.jsonl");
  {
    TrainLog log(path, "dp2 \"quoted\"\n", {{"dp", "2"}, {"lr", "3e-4"}});
    for (const StepRecord& r : written) log.write(r);
  }
  std::string name;
  std::map<std::string, std::string> config;
  const std::vector<StepRecord> read = readTrainLog(path, &name, &config);
  EXPECT_EQ(name, "dp2 \"quoted\"\n");
  EXPECT_EQ(config, (std::map<std::string, std::string>{{"dp", "2"}, {"lr", "3e-4"}}));
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    EXPECT_EQ(read[i].step, written[i].step);
    expectSameBits(read[i].loss, written[i].loss);
    expectSameBits(read[i].lr, written[i].lr);
    expectSameBits(read[i].tokensPerSecond, written[i].tokensPerSecond);
    expectSameBits(read[i].stepSeconds, written[i].stepSeconds);
    expectSameBits(read[i].commSeconds, written[i].commSeconds);
    expectSameBits(read[i].bubbleSeconds, written[i].bubbleSeconds);
    if (std::isnan(written[i].gradNorm))
      EXPECT_TRUE(std::isnan(read[i].gradNorm));
    else
      expectSameBits(read[i].gradNorm, written[i].gradNorm);
  }
}

TEST_F(HarnessTrainLog, WritesTheDocumentedLines) {
  const std::string path = file("run.jsonl");
  {
    TrainLog log(path, "tp2", {{"tp", "2"}});
    log.write({0, 5.54, 0.0003, 51234.5, 0.08, 0.01, 0, 1.25});
    // Each line is flushed as it is written: readable while the log is open.
    EXPECT_EQ(readTrainLog(path).size(), 1u);
    log.write({1, std::numeric_limits<double>::quiet_NaN(), 1e-20, 0, 0, 0, 0, 0});
  }
  EXPECT_EQ(readText(path),
            "{\"run\":\"tp2\",\"config\":{\"tp\":\"2\"}}\n"
            "{\"step\":0,\"loss\":5.54,\"lr\":3e-04,\"tokens_per_s\":51234.5,\"step_s\":0.08,"
            "\"comm_s\":0.01,\"bubble_s\":0,\"grad_norm\":1.25}\n"
            "{\"step\":1,\"loss\":NaN,\"lr\":1e-20,\"tokens_per_s\":0,\"step_s\":0,"
            "\"comm_s\":0,\"bubble_s\":0,\"grad_norm\":0}\n");
}

TEST_F(HarnessTrainLog, ReadsAnySpacingAndKeyOrderWithoutARunLine) {
  const std::string path = writeText(
      "hand.jsonl",
      " { \"grad_norm\" : 2 , \"bubble_s\":0.5,\"comm_s\":1E-3,\"step_s\":-0,\"tokens_per_s\":12,"
      "\"lr\":1.5e+2,\"loss\":-Infinity,\"step\":-3 }\r\n"
      "{\"step\":4,\"loss\":1,\"lr\":2,\"tokens_per_s\":3,\"step_s\":4,\"comm_s\":5,\"bubble_s\":6,"
      "\"grad_norm\":7}");  // the last line without its newline
  std::string name = "stale";
  std::map<std::string, std::string> config = {{"stale", "1"}};
  const std::vector<StepRecord> steps = readTrainLog(path, &name, &config);
  EXPECT_EQ(name, "");
  EXPECT_TRUE(config.empty());
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, -3);
  EXPECT_EQ(steps[0].loss, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(steps[0].lr, 150);
  EXPECT_EQ(steps[0].commSeconds, 1e-3);
  EXPECT_EQ(steps[0].gradNorm, 2);
  EXPECT_EQ(steps[1].gradNorm, 7);
  // A number in the configuration is kept as its text; escapes are decoded.
  const std::string withRun =
      writeText("run.jsonl",
                "{\"config\":{\"dp\":2,\"note\":\"a\\u00e9\\ud83d\\ude00\\t\"},\"run\":\"x\"}\n");
  EXPECT_TRUE(readTrainLog(withRun, &name, &config).empty());
  EXPECT_EQ(name, "x");
  EXPECT_EQ(config, (std::map<std::string, std::string>{{"dp", "2"},
                                                        {"note", "a\xc3\xa9\xf0\x9f\x98\x80\t"}}));
  EXPECT_TRUE(readTrainLog(writeText("empty.jsonl", "")).empty());
}

TEST_F(HarnessTrainLog, MalformedLinesNameTheFileAndLine) {
  const std::string good =
      "{\"step\":1,\"loss\":1,\"lr\":1,\"tokens_per_s\":1,\"step_s\":1,\"comm_s\":1,"
      "\"bubble_s\":1,\"grad_norm\":1}\n";
  const std::string fields =
      "\"lr\":1,\"tokens_per_s\":1,\"step_s\":1,\"comm_s\":1,\"bubble_s\":1,\"grad_norm\":1";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"step\":2,\"loss\":1," + fields, "unexpected end"},
      {"{\"step\":2,\"loss\":1," + fields + "} x", "text after the end"},
      {"{\"step\":2,\"loss\":1,\"loss\":1," + fields + "}", "duplicate member \"loss\""},
      {"{\"step\":2," + fields + "}", "needs the 8 fields"},
      {"{\"step\":2,\"loss\":1,\"mem\":1," + fields + "}", "field 'mem'"},
      {"{\"step\":2.5,\"loss\":1," + fields + "}", "field 'step' is not a 64-bit integer"},
      {"{\"step\":99999999999999999999,\"loss\":1," + fields + "}", "64-bit integer"},
      {"{\"step\":2,\"loss\":\"1\"," + fields + "}", "field 'loss' is not a number"},
      {"{\"step\":2,\"loss\":01," + fields + "}", "leading zero"},
      {"{\"step\":2,\"loss\":.5," + fields + "}", "expected a value"},
      {"{\"step\":2,\"loss\":1.," + fields + "}", "expected digits after '.'"},
      {"{\"step\":2,\"loss\":1e," + fields + "}", "exponent"},
      {"{\"step\":2,\"loss\":nan," + fields + "}", "expected a value"},
      {"{\"step\":2,\"loss\":1e999," + fields + "}", "out of range"},
      {"{step:2}", "expected a member name"},
      {"[1]", "expected an object"},
      {"", "empty line"},
      {"{\"run\":\"late\"}", "a run line after the first line"},
      {"{\"run\":\"x\",\"config\":{\"a\":\"\\q\"}}", "unknown escape"},
      {"{\"run\":\"x\",\"config\":{\"a\":\"\\ud800\"}}", "surrogate"},
      {"{\"run\":\"x\",\"config\":{\"a\":\"b", "unterminated string"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(bad[i].first);
    const std::string path =
        writeText("bad" + std::to_string(i) + ".jsonl", good + bad[i].first + "\n" + good);
    expectError([&] { readTrainLog(path); }, {path, "line 2", bad[i].second});
  }
  expectError([&] { readTrainLog(writeText("norun.jsonl", "{\"config\":{}}\n")); },
              {"line 1", "without its 'run' name"});
  expectError(
      [&] { readTrainLog(writeText("nested.jsonl", "{\"run\":\"x\",\"config\":{\"a\":{}}}\n")); },
      {"line 1", "not a string (nested"});
  expectError([&] { readTrainLog(writeText("runtype.jsonl", "{\"run\":1}\n")); },
              {"line 1", "field 'run'"});
}

TEST_F(HarnessTrainLog, AResumedRunContinuesItsLog) {
  const std::string path = file("run.jsonl");
  {
    TrainLog log(path, "dp2", {{"dp", "2"}});
    for (int64_t s = 0; s < 12; ++s) log.write({s, 5.0 - 0.1 * s, 1e-3, 100, 1, 0, 0, 1});
  }
  // The checkpoint was taken after step 9: steps 10 and 11 are trained
  // again, so their old lines go; the run line is the first run's.
  {
    TrainLog log = TrainLog::continued(path, 10, "dp4", {{"dp", "4"}});
    log.write({10, 4.25, 1e-3, 100, 1, 0, 0, 1});
  }
  std::string name;
  std::map<std::string, std::string> config;
  const std::vector<StepRecord> steps = readTrainLog(path, &name, &config);
  EXPECT_EQ(name, "dp2");
  EXPECT_EQ(config, (std::map<std::string, std::string>{{"dp", "2"}}));
  ASSERT_EQ(steps.size(), 11u);
  for (int64_t s = 0; s < 10; ++s) EXPECT_EQ(steps[s].step, s);
  EXPECT_EQ(steps[10].loss, 4.25);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // No log yet: a new one, with this run's line.
  const std::string fresh = file("fresh.jsonl");
  { TrainLog::continued(fresh, 10, "tp2", {{"tp", "2"}}).write({10, 3, 1e-3, 1, 1, 0, 0, 1}); }
  EXPECT_EQ(readTrainLog(fresh, &name).size(), 1u);
  EXPECT_EQ(name, "tp2");

  // Something that is not a train log is named and left as it was.
  const std::string notes = writeText("notes.txt", "my notes\n");
  expectError([&] { TrainLog::continued(notes, 10, "x"); }, {notes, "line 1"});
  EXPECT_EQ(readText(notes), "my notes\n");
}

TEST_F(HarnessTrainLog, FilesThatCannotBeOpenedAreNamed) {
  const std::string missing = file("missing/run.jsonl");
  expectError([&] { TrainLog log(missing); }, {missing, "cannot open for writing"});
  expectError([&] { readTrainLog(missing); }, {missing, "cannot open"});
}

}  // namespace
}  // namespace gyre::harness::test
