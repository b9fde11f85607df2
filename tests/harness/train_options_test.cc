// gyre-train's command line: every flag parsed, every bad one refused with
// its name in the message, the mesh resolved against the job's size.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "harness/train/options.h"

namespace gyre::harness::test {
namespace {

TrainOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gyre-train");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parseTrainOptions(static_cast<int>(argv.size()), argv.data());
}

// The message of the UsageError args raise, or "" when they parse.
std::string refusal(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(HarnessTrainOptions, EveryFlag) {
  const TrainOptions o = parse({"--dp",
                                "2",
                                "--tp",
                                "2",
                                "--pp",
                                "2",
                                "--zero",
                                "1",
                                "--schedule",
                                "gpipe",
                                "--micro-batches",
                                "4",
                                "--steps",
                                "30",
                                "--batch",
                                "16",
                                "--seq",
                                "32",
                                "--layers",
                                "4",
                                "--dim",
                                "64",
                                "--heads",
                                "8",
                                "--lr",
                                "0.002",
                                "--min-lr",
                                "0.0001",
                                "--warmup",
                                "3",
                                "--clip",
                                "0.5",
                                "--weight-decay",
                                "0.05",
                                "--seed",
                                "9",
                                "--data",
                                "t.txt",
                                "--checkpoint-dir",
                                "ck",
                                "--checkpoint-every",
                                "10",
                                "--resume",
                                "--log",
                                "l.jsonl",
                                "--plot",
                                "p.svg",
                                "--quiet"});
  EXPECT_EQ(o.dp, 2);
  EXPECT_EQ(o.tp, 2);
  EXPECT_EQ(o.pp, 2);
  EXPECT_EQ(o.zero, 1);
  EXPECT_EQ(o.schedule, "gpipe");
  EXPECT_EQ(o.microBatches, 4);
  EXPECT_EQ(o.steps, 30);
  EXPECT_EQ(o.batch, 16);
  EXPECT_EQ(o.seq, 32);
  EXPECT_EQ(o.layers, 4);
  EXPECT_EQ(o.dim, 64);
  EXPECT_EQ(o.heads, 8);
  EXPECT_FLOAT_EQ(o.lr, 0.002f);
  EXPECT_FLOAT_EQ(o.minLr, 0.0001f);
  EXPECT_EQ(o.warmup, 3);
  EXPECT_FLOAT_EQ(o.clip, 0.5f);
  EXPECT_FLOAT_EQ(o.weightDecay, 0.05f);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.data, "t.txt");
  EXPECT_EQ(o.checkpointDir, "ck");
  EXPECT_EQ(o.checkpointEvery, 10);
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.log, "l.jsonl");
  EXPECT_EQ(o.plot, "p.svg");
  EXPECT_TRUE(o.quiet);
  // Defaults: two micro-batches per stage with a pipeline, one without.
  EXPECT_EQ(parse({"--data", "t", "--pp", "2"}).microBatches, 4);
  EXPECT_EQ(parse({"--data", "t"}).microBatches, 1);
  // Drawing earlier runs trains nothing.
  const TrainOptions draw = parse({"--plot", "x.png", "a.jsonl", "b.jsonl"});
  EXPECT_EQ(draw.plotLogs, (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
}

TEST(HarnessTrainOptions, BadFlagsAreNamed) {
  EXPECT_NE(refusal({"--data", "t", "--zero", "4"}).find("--zero"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--tp", "x"}).find("--tp"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--codec", "zip"}).find("--codec"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--schedule", "zb"}).find("--schedule"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--lr"}).find("--lr needs a value"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--bogus"}).find("unknown option --bogus"), std::string::npos);
  EXPECT_NE(refusal({}).find("--data is required"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--resume"}).find("--checkpoint-dir"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--dim", "30", "--heads", "4"}).find("--heads"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--tp", "3"}).find("--tp 3"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--pp", "8", "--layers", "4"}).find("--pp 8"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--pp", "2", "--zero", "2"}).find("--zero 2"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--codec", "int8", "--zero", "1"}).find("--codec"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--codec", "int8", "--pp", "2"}).find("--codec"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--ep", "2"}).find("--ep 2"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--experts", "6", "--ep", "4"}).find("--experts"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--experts", "4", "--ep", "2", "--zero", "1"}).find("--zero 1"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--experts", "4", "--ep", "2", "--codec", "int8"})
                .find("--ep needs exact"),
            std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "--plot", "x.jpg"}).find("x.jpg"), std::string::npos);
  EXPECT_NE(refusal({"--data", "t", "x.jsonl"}).find("--plot"), std::string::npos);
}

TEST(HarnessTrainOptions, MeshAgainstTheJob) {
  TrainOptions o = parse({"--data", "t", "--tp", "2", "--batch", "8"});
  resolveMesh(o, 8);
  EXPECT_EQ(o.dp, 4);
  TrainOptions bad = parse({"--data", "t", "--dp", "2", "--tp", "2"});
  try {
    resolveMesh(bad, 8);
    FAIL() << "2 x 2 x 1 on 8 ranks";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the job has 8"), std::string::npos) << e.what();
  }
  TrainOptions odd = parse({"--data", "t", "--tp", "3", "--heads", "6", "--dim", "48"});
  EXPECT_THROW(resolveMesh(odd, 4), UsageError);
  TrainOptions split = parse({"--data", "t", "--batch", "6"});
  EXPECT_THROW(resolveMesh(split, 4), UsageError);  // 6 sequences over 4 ranks
  // Experts spread over 4 ranks of a data group of 2 (the other 2 ranks are tp).
  TrainOptions wide = parse({"--data", "t", "--experts", "4", "--ep", "4", "--pp", "2"});
  try {
    resolveMesh(wide, 4);
    FAIL() << "ep 4 over dp 2";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--ep 4 does not divide the data group"),
              std::string::npos)
        << e.what();
  }
}

TEST(HarnessTrainOptions, FlexspFlagsAndWhatItRefuses) {
  TrainOptions o = parse({"--data", "t", "--flexsp", "--flexsp-median", "50", "--flexsp-sigma",
                          "1.5", "--flexsp-memory", "300", "--flexsp-plan-seconds", "0.5",
                          "--batch", "6"});
  EXPECT_TRUE(o.flexsp);
  EXPECT_FALSE(o.flexspUlysses);
  EXPECT_EQ(o.flexspMedian, 50);
  EXPECT_EQ(o.flexspSigma, 1.5);
  EXPECT_EQ(o.flexspMemory, 300);
  EXPECT_EQ(o.flexspPlanSeconds, 0.5);
  resolveMesh(o, 4);  // a token budget: 6 does not need to split over 4 ranks
  EXPECT_EQ(o.flexspMin, 4);  // the world, by default
  EXPECT_TRUE(parse({"--data", "t", "--flexsp-ulysses"}).flexspUlysses);
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--sp", "2"},
                                                        {"--tp", "2"},
                                                        {"--pp", "2"},
                                                        {"--codec", "int8"},
                                                        {"--decentralized", "ring"},
                                                        {"--zero", "2"},
                                                        {"--experts", "4"},
                                                        {"--micro-batches", "2"}}) {
    const std::string why = refusal({"--data", "t", "--flexsp", flag, value});
    EXPECT_EQ(why.rfind("--flexsp ", 0), 0u) << flag << ": " << why;
    EXPECT_NE(why.find(flag), std::string::npos) << flag << ": " << why;
  }
  EXPECT_NE(refusal({"--data", "t", "--flexsp-median", "9"}).find("need --flexsp"),
            std::string::npos);
  TrainOptions three = parse({"--data", "t", "--flexsp"});
  try {
    resolveMesh(three, 3);
    FAIL() << "FlexSP on 3 ranks";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("on 3 ranks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gyre::harness::test
