// The variable-length loader (harness/varlen_data.h): reproducible from
// (seed, step), lengths within their bounds and the budget, targets the
// inputs shifted by one token of the corpus.
#include "harness/varlen_data.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>

namespace gyre::harness::test {
namespace {

namespace fs = std::filesystem;

class HarnessVarlen : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gyre-varlen-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // Every byte value, not periodic at any length the tests draw.
    text_.resize(5000);
    uint64_t x = 7;
    for (char& c : text_) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      c = static_cast<char>(x >> 56);
    }
    std::ofstream(dir_ / "corpus.txt", std::ios::binary) << text_;
  }
  void TearDown() override { fs::remove_all(dir_); }

  VarlenLoader loader(const VarlenConfig& c) {
    return VarlenLoader(openText(dir_ / "corpus.txt", dir_ / "corpus.tokens"), c);
  }

  fs::path dir_;
  std::string text_;
};

const VarlenConfig kConfig{
    .lengths = {.mu = 3.0, .sigma = 1.0, .minLen = 4, .maxLen = 64}, .tokens = 256, .seed = 5};

TEST_F(HarnessVarlen, SameSeedAndStepSameBatchAnotherStepAnother) {
  const VarlenLoader a = loader(kConfig), b = loader(kConfig);
  for (int step = 0; step < 5; ++step) {
    const VarlenBatch x = a.batch(step), y = b.batch(step);
    EXPECT_EQ(x.lengths, y.lengths);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.targets, y.targets);
    EXPECT_EQ(x.lengths, a.lengths(step));
  }
  EXPECT_NE(a.batch(0).inputs, a.batch(1).inputs);
  VarlenConfig other = kConfig;
  other.seed = 6;
  EXPECT_NE(loader(other).batch(0).inputs, a.batch(0).inputs);
}

TEST_F(HarnessVarlen, LengthsWithinBoundsAndBudgetAndLongTailed) {
  const VarlenLoader l = loader(kConfig);
  std::set<int64_t> seen;
  int64_t clampedHigh = 0, count = 0;
  for (int step = 0; step < 200; ++step) {
    const VarlenBatch b = l.batch(step);
    ASSERT_FALSE(b.lengths.empty());
    const int64_t total = std::accumulate(b.lengths.begin(), b.lengths.end(), int64_t{0});
    EXPECT_LE(total, kConfig.tokens);
    EXPECT_EQ(total, b.totalTokens());
    for (int64_t L : b.lengths) {
      EXPECT_GE(L, 4);
      EXPECT_LE(L, 64);
      seen.insert(L);
      clampedHigh += L == 64;
      ++count;
    }
  }
  // Many lengths, and the tail reaching the bound (median e^3 ~ 20).
  EXPECT_GT(seen.size(), 30u);
  EXPECT_GT(clampedHigh, 0);
  EXPECT_LT(clampedHigh * 5, count);
}

TEST_F(HarnessVarlen, EachSequenceIsAWindowWithItsNextTokens) {
  const VarlenLoader l = loader(kConfig);
  for (int step = 0; step < 20; ++step) {
    const VarlenBatch b = l.batch(step);
    for (size_t i = 0; i < b.lengths.size(); ++i) {
      const auto in = b.inputsOf(i), target = b.targetsOf(i);
      for (size_t k = 0; k + 1 < in.size(); ++k) ASSERT_EQ(target[k], in[k + 1]);
      // The whole window, target's last included, is a run of the corpus.
      std::string window;
      for (int t : in) window.push_back(static_cast<char>(t));
      window.push_back(static_cast<char>(target.back()));
      EXPECT_NE(text_.find(window), std::string::npos);
    }
  }
}

TEST_F(HarnessVarlen, BadSettingsAreRefusedByName) {
  VarlenConfig c = kConfig;
  c.lengths.minLen = 0;
  EXPECT_THROW(loader(c), std::invalid_argument);
  c = kConfig;
  c.tokens = 32;  // below the longest length, 64
  try {
    loader(c);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("longest length"), std::string::npos) << e.what();
  }
  c = kConfig;
  c.lengths.sigma = -1;
  EXPECT_THROW(loader(c), std::invalid_argument);
}

}  // namespace
}  // namespace gyre::harness::test
