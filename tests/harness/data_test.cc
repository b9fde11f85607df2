// The data loader on a generated corpus in a temporary folder: the token
// file's round trip and its checks, and the sampling order's promises that
// the parallel runs build on (the ranks' parts make up the single-rank
// batch, the same (seed, step) gives the same batch, resuming at a step
// reads what an uninterrupted run reads there).
#include "harness/data.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace gyre::harness::test {
namespace {

namespace fs = std::filesystem;

// Every byte value, in an order that is not periodic at the window size.
std::string corpus(size_t n) {
  std::string text(n, '\0');
  uint64_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text[i] = static_cast<char>(x >> 56);
  }
  return text;
}

void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs f and expects a DataError whose message holds every one of `parts`.
void expectDataError(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
  }
}

class HarnessData : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gyre-data-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    source_ = dir_ / "corpus.txt";
    tokens_ = dir_ / "corpus.tokens";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A loader over `text`, with the global batch B = 8 and T = 16.
  DataLoader loader(const std::string& text, uint64_t seed, int rank, int ranks) {
    writeFile(source_, text);
    return DataLoader(openText(source_, tokens_),
                      {.batch = 8, .seq = 16, .seed = seed, .rank = rank, .ranks = ranks});
  }

  fs::path dir_, source_, tokens_;
};

TEST_F(HarnessData, TokensAreTheSourceBytesAndNoTemporaryIsLeft) {
  const std::string text = corpus(5000);
  writeFile(source_, text);
  EXPECT_TRUE(prepareTokens(source_, tokens_));
  const TokenFile f = TokenFile::open(tokens_, source_);
  ASSERT_EQ(f.size(), text.size());
  EXPECT_TRUE(std::equal(f.tokens().begin(), f.tokens().end(), text.begin(),
                         [](uint8_t t, char c) { return t == static_cast<uint8_t>(c); }));
  EXPECT_EQ(fs::file_size(tokens_), kTokenHeaderBytes + text.size());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2)
      << "source and tokens only";
}

TEST_F(HarnessData, SecondPrepareOfTheSameTextWritesNothing) {
  writeFile(source_, corpus(3000));
  ASSERT_TRUE(prepareTokens(source_, tokens_));
  const std::string before = readFile(tokens_);
  struct stat st {};
  ASSERT_EQ(::stat(tokens_.c_str(), &st), 0);
  const ino_t inode = st.st_ino;  // a rewrite would rename a new file over it
  const auto stamp = fs::last_write_time(tokens_);
  EXPECT_FALSE(prepareTokens(source_, tokens_));
  EXPECT_EQ(readFile(tokens_), before);
  EXPECT_EQ(fs::last_write_time(tokens_), stamp);
  ASSERT_EQ(::stat(tokens_.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, inode);
}

TEST_F(HarnessData, ChangedSourceIsRefusedByOpenAndTokenizedAgainByPrepare) {
  std::string text = corpus(3000);
  writeFile(source_, text);
  ASSERT_TRUE(prepareTokens(source_, tokens_));
  text[1234] = static_cast<char>(text[1234] ^ 1);  // same size, one bit changed
  writeFile(source_, text);
  expectDataError([&] { TokenFile::open(tokens_, source_); },
                  {tokens_.string(), source_.string(), "another text"});
  EXPECT_TRUE(prepareTokens(source_, tokens_));
  EXPECT_EQ(TokenFile::open(tokens_, source_).tokens()[1234], static_cast<uint8_t>(text[1234]));
}

TEST_F(HarnessData, RanksPartsMakeUpTheSingleRankBatch) {
  // 161 tokens are 10 windows of 16: with B = 8, steps cross epochs often.
  const std::string text = corpus(161);
  DataLoader single = loader(text, 3, 0, 1);
  const int T = 16;
  std::vector<int> in1(8 * T), tg1(8 * T);
  for (int ranks : {1, 2, 4}) {
    std::vector<DataLoader> parts;
    for (int r = 0; r < ranks; ++r) parts.push_back(loader(text, 3, r, ranks));
    for (int64_t step = 0; step < 12; ++step) {
      single.batch(step, in1, tg1);
      std::vector<int> in, tg;
      for (DataLoader& part : parts) {
        std::vector<int> pin(static_cast<size_t>(part.localBatch() * T)), ptg(pin.size());
        part.batch(step, pin, ptg);
        in.insert(in.end(), pin.begin(), pin.end());
        tg.insert(tg.end(), ptg.begin(), ptg.end());
      }
      EXPECT_EQ(in, in1) << "ranks " << ranks << " step " << step;
      EXPECT_EQ(tg, tg1) << "ranks " << ranks << " step " << step;
    }
  }
}

TEST_F(HarnessData, TargetsAreTheNextTokens) {
  const std::string text = corpus(1000);
  DataLoader l = loader(text, 5, 0, 1);
  std::vector<int> in(8 * 16), tg(8 * 16);
  l.batch(7, in, tg);
  for (int b = 0; b < 8; ++b) {
    const uint64_t start = l.sequenceStart(7, b);
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(in[b * 16 + t], static_cast<uint8_t>(text[start + t]));
      EXPECT_EQ(tg[b * 16 + t], static_cast<uint8_t>(text[start + t + 1]));
    }
  }
}

TEST_F(HarnessData, EachEpochVisitsEveryWindowOnceInASeededOrder) {
  const std::string text = corpus(16 * 40 + 1);  // 40 windows, 5 steps of 8 per epoch
  DataLoader l = loader(text, 9, 0, 1);
  ASSERT_EQ(l.sequencesPerEpoch(), 40u);
  std::vector<uint64_t> epoch0, epoch1;
  for (int step = 0; step < 5; ++step)
    for (int i = 0; i < 8; ++i) epoch0.push_back(l.sequenceStart(step, i));
  for (int step = 5; step < 10; ++step)
    for (int i = 0; i < 8; ++i) epoch1.push_back(l.sequenceStart(step, i));
  EXPECT_NE(epoch0, epoch1) << "each epoch has its own order";
  for (std::vector<uint64_t>* e : {&epoch0, &epoch1}) {
    std::sort(e->begin(), e->end());
    for (uint64_t w = 0; w < 40; ++w) EXPECT_EQ((*e)[w], w * 16);
  }
}

TEST_F(HarnessData, SameSeedSameBatchesAnotherSeedOthers) {
  const std::string text = corpus(4000);
  DataLoader a = loader(text, 11, 1, 2), b = loader(text, 11, 1, 2), c = loader(text, 12, 1, 2);
  std::vector<int> ia(4 * 16), ta(ia.size()), ib(ia.size()), tb(ia.size()), ic(ia.size()),
      tc(ia.size());
  for (int64_t step = 0; step < 5; ++step) {
    a.batch(step, ia, ta);
    b.batch(step, ib, tb);
    c.batch(step, ic, tc);
    EXPECT_EQ(ia, ib);
    EXPECT_EQ(ta, tb);
    EXPECT_NE(ia, ic) << "another seed must give other batches";
  }
}

TEST_F(HarnessData, ResumingAtAStepReadsWhatAnUninterruptedRunReads) {
  const std::string text = corpus(16 * 25 + 1);  // epochs end mid-batch
  DataLoader whole = loader(text, 4, 0, 2);
  std::vector<std::vector<int>> seen;
  std::vector<int> in(4 * 16), tg(in.size());
  for (int64_t step = 0; step < 20; ++step) {
    whole.batch(step, in, tg);
    seen.push_back(in);
  }
  DataLoader resumed = loader(text, 4, 0, 2);
  for (int64_t step : {13, 14, 19, 2, 0, 13}) {  // fresh, then out of order
    resumed.batch(step, in, tg);
    EXPECT_EQ(in, seen[static_cast<size_t>(step)]) << "step " << step;
  }
}

TEST_F(HarnessData, MissingOrEmptySourceIsAnErrorNamingIt) {
  expectDataError([&] { prepareTokens(source_, tokens_); }, {source_.string(), "No such file"});
  expectDataError([&] { openText(source_, tokens_); }, {source_.string()});
  writeFile(source_, "");
  expectDataError([&] { prepareTokens(source_, tokens_); }, {source_.string(), "empty"});
  EXPECT_FALSE(fs::exists(tokens_));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1)
      << "no temporary left";
}

TEST_F(HarnessData, TextShorterThanOneSequenceIsAnErrorNamingIt) {
  writeFile(source_, corpus(16));  // T + 1 = 17 needed
  expectDataError([&] { DataLoader(openText(source_, tokens_), {.batch = 8, .seq = 16}); },
                  {source_.string(), "16 tokens", "at least 17"});
  writeFile(source_, corpus(17));  // exactly one window
  EXPECT_EQ(DataLoader(openText(source_, tokens_), {.batch = 8, .seq = 16}).sequencesPerEpoch(),
            1u);
}

TEST_F(HarnessData, DamagedTokenFilesAreErrorsNamingThem) {
  writeFile(source_, corpus(2000));
  ASSERT_TRUE(prepareTokens(source_, tokens_));
  const std::string good = readFile(tokens_);

  writeFile(tokens_, good.substr(0, good.size() - 100));
  expectDataError([&] { TokenFile::open(tokens_); },
                  {tokens_.string(), "truncated", "2000 tokens"});
  writeFile(tokens_, good.substr(0, 30));
  expectDataError([&] { TokenFile::open(tokens_); }, {tokens_.string(), "truncated"});

  std::string bad = good;
  bad[kTokenHeaderBytes + 500] = static_cast<char>(bad[kTokenHeaderBytes + 500] ^ 0x40);
  writeFile(tokens_, bad);
  expectDataError([&] { TokenFile::open(tokens_); },
                  {tokens_.string(), "corrupt", "tokens' checksum"});

  bad = good;
  bad[17] = static_cast<char>(bad[17] ^ 1);  // the token count
  writeFile(tokens_, bad);
  expectDataError([&] { TokenFile::open(tokens_); }, {tokens_.string(), "corrupt", "header"});

  // prepareTokens replaces a damaged token file from its source.
  EXPECT_TRUE(prepareTokens(source_, tokens_));
  EXPECT_EQ(readFile(tokens_), good);
}

TEST_F(HarnessData, TokenFileOfAnotherTextIsRefused) {
  const fs::path other = dir_ / "other.txt";
  writeFile(other, corpus(3001));
  writeFile(source_, corpus(3000));
  ASSERT_TRUE(prepareTokens(other, tokens_));
  expectDataError([&] { TokenFile::open(tokens_, source_); },
                  {tokens_.string(), source_.string(), "another text"});
}

TEST_F(HarnessData, AFileThatIsNotATokenFileIsNeverOverwritten) {
  writeFile(source_, corpus(100));
  const std::string notes(100, 'n');  // longer than a header, so that the magic decides
  writeFile(tokens_, notes);
  expectDataError([&] { prepareTokens(source_, tokens_); },
                  {tokens_.string(), "not a gyre token file"});
  expectDataError([&] { TokenFile::open(tokens_); }, {tokens_.string(), "not a gyre token file"});
  EXPECT_EQ(readFile(tokens_), notes);
}

TEST_F(HarnessData, BatchThatDoesNotSplitOverTheRanksIsRefused) {
  writeFile(source_, corpus(1000));
  EXPECT_THROW(DataLoader(openText(source_, tokens_), {.batch = 6, .seq = 16, .ranks = 4}),
               std::invalid_argument);
  EXPECT_THROW(
      DataLoader(openText(source_, tokens_), {.batch = 8, .seq = 16, .rank = 2, .ranks = 2}),
      std::invalid_argument);
}

TEST(HarnessUnigramEntropy, IsTheEntropyOfTheByteHistogramInNats) {
  const auto bytes = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(unigramEntropy({}), 0.0);
  EXPECT_EQ(unigramEntropy(bytes("aaaaaaa")), 0.0);
  EXPECT_NEAR(unigramEntropy(bytes("abababab")), std::log(2.0), 1e-12);
  EXPECT_NEAR(unigramEntropy(bytes("abcd")), std::log(4.0), 1e-12);
  // p = (1/2, 1/4, 1/4): 1/2 ln 2 + 2 (1/4) ln 4 = 1.5 ln 2.
  EXPECT_NEAR(unigramEntropy(bytes("aabc")), 1.5 * std::log(2.0), 1e-12);
  // Every byte value equally often: ln 256, the most a byte can carry.
  std::string all;
  for (int r = 0; r < 3; ++r)
    for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_NEAR(unigramEntropy(bytes(all)), std::log(256.0), 1e-12);
}

}  // namespace
}  // namespace gyre::harness::test
