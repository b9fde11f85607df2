// The checkpoint format (harness/checkpoint.h) in a temporary folder: pieces
// of a few global tensors split as tensor, data and ZeRO parallelism split
// them, written by simulated ranks and read back whole, bit for bit; the
// same tensors saved by two meshes reading the same; the step directory's
// completeness; and every error, each naming its file.
#include "harness/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace gyre::harness::test {
namespace {

namespace fs = std::filesystem;

struct Global {
  std::string tensor, kind;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Distinct, non-round values per tensor, so a misplaced element shows.
Global global(const std::string& tensor, const std::string& kind, std::vector<int64_t> shape) {
  Global g{tensor, kind, shape, {}};
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  uint64_t x = std::hash<std::string>{}(tensor + "/" + kind);
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    g.values.push_back(static_cast<float>(static_cast<int32_t>(x >> 40)) / 1024.0f);
  }
  return g;
}

// One rank's entries; owns the data the entries' spans point into.
struct Rank {
  Rank() = default;
  Rank(Rank&&) = default;
  Rank(const Rank&) = delete;  // the entries point into storage

  std::vector<Entry> entries;
  std::deque<std::vector<float>> storage;

  void add(const Global& g, std::vector<Run> runs) {
    std::vector<float>& data = storage.emplace_back();
    for (const Run& r : runs)
      data.insert(data.end(), g.values.begin() + static_cast<ptrdiff_t>(r.offset),
                  g.values.begin() + static_cast<ptrdiff_t>(r.offset + r.count));
    entries.push_back({g.tensor, g.kind, g.shape, std::move(runs), data});
  }
};

// Rows [rank * rows / ranks, (rank + 1) * rows / ranks) of a matrix: one run.
std::vector<Run> rowSplit(const Global& g, int rank, int ranks) {
  const auto rows = static_cast<uint64_t>(g.shape[0]), cols = static_cast<uint64_t>(g.shape[1]);
  const uint64_t r0 = rows * static_cast<uint64_t>(rank) / static_cast<uint64_t>(ranks);
  const uint64_t r1 = rows * static_cast<uint64_t>(rank + 1) / static_cast<uint64_t>(ranks);
  return {{r0 * cols, (r1 - r0) * cols}};
}

// The same for columns: one run per row.
std::vector<Run> columnSplit(const Global& g, int rank, int ranks) {
  const auto rows = static_cast<uint64_t>(g.shape[0]), cols = static_cast<uint64_t>(g.shape[1]);
  const uint64_t c0 = cols * static_cast<uint64_t>(rank) / static_cast<uint64_t>(ranks);
  const uint64_t c1 = cols * static_cast<uint64_t>(rank + 1) / static_cast<uint64_t>(ranks);
  std::vector<Run> runs;
  for (uint64_t r = 0; r < rows; ++r) runs.push_back({r * cols + c0, c1 - c0});
  return runs;
}

// ZeRO: the tensors laid end to end and cut in `ranks` equal slices; a slice
// holds a run of every tensor it touches.
void flatSplit(const std::vector<Global>& tensors, int ranks, std::vector<Rank>& out) {
  uint64_t total = 0;
  for (const Global& g : tensors) total += g.values.size();
  for (int rank = 0; rank < ranks; ++rank) {
    const uint64_t lo = total * static_cast<uint64_t>(rank) / static_cast<uint64_t>(ranks);
    const uint64_t hi = total * static_cast<uint64_t>(rank + 1) / static_cast<uint64_t>(ranks);
    uint64_t base = 0;
    for (const Global& g : tensors) {
      const uint64_t a = std::max(lo, base), b = std::min(hi, base + g.values.size());
      if (a < b) out[static_cast<size_t>(rank)].add(g, {{a - base, b - a}});
      base += g.values.size();
    }
  }
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// `text` with its first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs f and expects a CheckpointError whose message holds every one of `parts`.
void expectError(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
  }
}

class HarnessCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gyre-checkpoint-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every rank's shard, then the index from the files: what the glue does.
  fs::path save(const fs::path& dir, int64_t step, const std::vector<Rank>& ranks,
                const std::map<std::string, std::string>& meta = {}) {
    const int n = static_cast<int>(ranks.size());
    std::vector<ShardInfo> written;
    for (int r = 0; r < n; ++r)
      written.push_back(
          writeShard(prepareStepDir(dir, step), r, n, ranks[static_cast<size_t>(r)].entries));
    const fs::path stepDir = stepDirectory(dir, step);
    const std::vector<ShardInfo> infos = readShardInfos(stepDir, n);
    EXPECT_EQ(infos, written) << "the headers say what writeShard returned";
    writeIndex(stepDir, step, meta, infos);
    return stepDir;
  }

  // Tensor parallel over 2 ranks: a row split, a column split (Adam state
  // split the same way), and a replicated bias that both ranks save.
  std::vector<Rank> tensorParallel() {
    std::vector<Rank> ranks(2);
    for (int r = 0; r < 2; ++r) {
      ranks[r].add(rows_, rowSplit(rows_, r, 2));
      ranks[r].add(cols_, columnSplit(cols_, r, 2));
      ranks[r].add(colsM_, columnSplit(colsM_, r, 2));
      ranks[r].add(bias_, {{0, 6}});
    }
    return ranks;
  }

  void expectWhole(CheckpointReader& reader, const std::vector<Global>& tensors) {
    for (const Global& g : tensors) {
      EXPECT_EQ(reader.globalShape(g.tensor, g.kind), g.shape) << g.tensor;
      EXPECT_TRUE(sameBits(reader.readGlobal(g.tensor, g.kind), g.values)) << g.tensor;
    }
  }

  fs::path dir_;
  const Global rows_ = global("h0.mlp.fc.w", "param", {4, 6});
  const Global cols_ = global("h0.attn.proj.w", "param", {5, 6});
  const Global colsM_ = global("h0.attn.proj.w", "adam.m", {5, 6});
  const Global bias_ = global("h0.attn.proj.b", "param", {6});
};

TEST_F(HarnessCheckpoint, TensorParallelPiecesReassembleExactly) {
  const fs::path stepDir = save(dir_, 7, tensorParallel(), {{"layers", "2"}, {"tp", "2"}});
  CheckpointReader reader(stepDir);
  EXPECT_EQ(reader.step(), 7);
  EXPECT_EQ(reader.meta(), (std::map<std::string, std::string>{{"layers", "2"}, {"tp", "2"}}));
  EXPECT_EQ(reader.tensors(),
            (std::vector<std::pair<std::string, std::string>>{{"h0.attn.proj.b", "param"},
                                                              {"h0.attn.proj.w", "adam.m"},
                                                              {"h0.attn.proj.w", "param"},
                                                              {"h0.mlp.fc.w", "param"}}));
  expectWhole(reader, {rows_, cols_, colsM_, bias_});
  EXPECT_EQ(std::distance(fs::directory_iterator(stepDir), fs::directory_iterator()), 3)
      << "two shards and the index, no temporary";
}

TEST_F(HarnessCheckpoint, ZeroSlicesCrossingTensorsReassembleExactly) {
  const std::vector<Global> tensors = {global("wte", "adam.v", {5, 3}),
                                       global("wpe", "adam.v", {7}),
                                       global("lnf.b", "adam.v", {2})};
  for (int ranks : {3, 4, 30}) {  // 30 ranks: some slices are empty
    std::vector<Rank> mesh(static_cast<size_t>(ranks));
    flatSplit(tensors, ranks, mesh);
    CheckpointReader reader(save(dir_, ranks, mesh));
    expectWhole(reader, tensors);
  }
}

// Resharding: the glue reads whole tensors and cuts its own pieces, so what
// a mesh saved must read the same from any other mesh's save.
TEST_F(HarnessCheckpoint, TwoMeshesSaveTheSameGlobalTensors) {
  std::vector<Rank> flat(4);
  flatSplit({rows_, cols_, colsM_, bias_}, 4, flat);
  CheckpointReader tp(save(dir_ / "tp", 1, tensorParallel()));
  CheckpointReader zero(save(dir_ / "zero", 1, flat));
  EXPECT_EQ(tp.tensors(), zero.tensors());
  for (const auto& [tensor, kind] : tp.tensors())
    EXPECT_TRUE(sameBits(tp.readGlobal(tensor, kind), zero.readGlobal(tensor, kind))) << tensor;
  // A 3-rank column split of a 2-rank row split's save: each rank's piece.
  const std::vector<float> whole = tp.readGlobal(rows_.tensor, rows_.kind);
  for (int r = 0; r < 3; ++r)
    for (const harness::Run& run : columnSplit(rows_, r, 3))  // not testing::Test::Run
      for (uint64_t k = run.offset; k < run.offset + run.count; ++k)
        EXPECT_EQ(whole[k], rows_.values[k]);
}

TEST_F(HarnessCheckpoint, TheIndexIsReadableJson) {
  const fs::path stepDir = save(dir_, 12, tensorParallel(), {{"model", "gpt \"tiny\"\n"}});
  const std::string index = readFile(stepDir / "index.json");
  for (const std::string part :
       {"\"format\": \"gyre-checkpoint\"", "\"step\": 12", "\"model\": \"gpt \\\"tiny\\\"\\n\"",
        "\"file\": \"shard-1-of-2.bin\"", "\"checksum\": \"",
        "{\"tensor\": \"h0.mlp.fc.w\", \"kind\": \"param\", \"dtype\": \"f32\", \"shape\": [4, 6], "
        "\"offset\": "})
    EXPECT_NE(index.find(part), std::string::npos) << part << " not in:\n" << index;
  EXPECT_EQ(CheckpointReader(stepDir).meta().at("model"), "gpt \"tiny\"\n");
}

TEST_F(HarnessCheckpoint, OnlyStepsWithAnIndexAreComplete) {
  EXPECT_EQ(latestCompleteStep(dir_ / "none"), std::nullopt);
  EXPECT_EQ(latestCompleteStep(dir_), std::nullopt);
  save(dir_, 3, tensorParallel());
  EXPECT_EQ(latestCompleteStep(dir_), 3);
  // Step 5's shards are written but its index is not (a crash between).
  const std::vector<Rank> mesh = tensorParallel();
  for (int r = 0; r < 2; ++r) writeShard(prepareStepDir(dir_, 5), r, 2, mesh[r].entries);
  EXPECT_EQ(latestCompleteStep(dir_), 3);
  expectError([&] { CheckpointReader{dir_ / "step-5"}; },
              {(dir_ / "step-5" / "index.json").string(), "missing index"});
  fs::create_directories(dir_ / "step-09");  // not a name this writer makes
  writeFile(dir_ / "step-09" / "index.json", "{}");
  fs::create_directories(dir_ / "step-x");
  EXPECT_EQ(latestCompleteStep(dir_), 3);
  writeIndex(dir_ / "step-5", 5, {}, readShardInfos(dir_ / "step-5", 2));
  EXPECT_EQ(latestCompleteStep(dir_), 5);
}

// A crashed save of the same step left an index (an earlier complete save),
// a shard of another mesh and a temporary; saving the step again works,
// the step is incomplete while it does, and the leftovers go.
TEST_F(HarnessCheckpoint, AStaleAttemptDoesNotBreakANewSave) {
  save(dir_, 4, tensorParallel());
  const fs::path stepDir = dir_ / "step-4";
  writeFile(stepDir / "shard-3-of-4.bin", "stale");
  writeFile(stepDir / "shard-0-of-2.bin.tmp.999", "half");
  writeFile(stepDir / "notes.txt", "the user's");
  prepareStepDir(dir_, 4);
  EXPECT_EQ(latestCompleteStep(dir_), std::nullopt);
  std::vector<Rank> flat(2);
  flatSplit({rows_, cols_, bias_}, 2, flat);
  save(dir_, 4, flat);
  EXPECT_EQ(latestCompleteStep(dir_), 4);
  CheckpointReader reader(stepDir);
  expectWhole(reader, {rows_, cols_, bias_});
  EXPECT_FALSE(fs::exists(stepDir / "shard-3-of-4.bin"));
  EXPECT_FALSE(fs::exists(stepDir / "shard-0-of-2.bin.tmp.999"));
  EXPECT_TRUE(fs::exists(stepDir / "notes.txt"));
}

TEST_F(HarnessCheckpoint, AMissingIndexOrShardIsNamed) {
  const fs::path stepDir = save(dir_, 1, tensorParallel());
  const fs::path shard = stepDir / "shard-1-of-2.bin";
  fs::remove(shard);
  CheckpointReader reader(stepDir);
  expectError([&] { reader.readGlobal(bias_.tensor, bias_.kind); },
              {shard.string(), "missing shard", "rank 1 of 2"});
  expectError([&] { readShardInfos(stepDir, 2); }, {shard.string(), "missing shard"});
  fs::remove(stepDir / "index.json");
  expectError([&] { CheckpointReader{stepDir}; },
              {(stepDir / "index.json").string(), "missing index"});
}

TEST_F(HarnessCheckpoint, ATruncatedOrCorruptShardIsNamed) {
  const fs::path stepDir = save(dir_, 1, tensorParallel());
  const fs::path shard = stepDir / "shard-0-of-2.bin";
  const std::string bytes = readFile(shard);
  fs::resize_file(shard, bytes.size() - 4);
  expectError(
      [&] { CheckpointReader(stepDir).readGlobal(rows_.tensor, rows_.kind); },
      {shard.string(), "truncated shard", "the index says " + std::to_string(bytes.size())});
  expectError([&] { readShardInfo(shard); }, {shard.string(), "truncated shard"});

  std::string flipped = bytes;
  flipped[bytes.size() - 20] ^= 0x40;  // inside the last entry's data
  writeFile(shard, flipped);
  CheckpointReader reader(stepDir);
  expectError([&] { reader.readGlobal(rows_.tensor, rows_.kind); },
              {shard.string(), "corrupt shard", "checksum"});
  // A failed check is not remembered: repaired, the shard reads.
  writeFile(shard, bytes);
  EXPECT_TRUE(sameBits(reader.readGlobal(bias_.tensor, bias_.kind), bias_.values));
}

TEST_F(HarnessCheckpoint, BadPiecesAreRefusedWhenWritten) {
  const fs::path stepDir = prepareStepDir(dir_, 1);
  const fs::path shard = stepDir / "shard-1-of-2.bin";
  const std::vector<float> data(6);
  expectError(
      [&] {
        writeShard(stepDir, 1, 2, {{"b", "param", {6}, {{3, 6}}, data}});
      },
      {shard.string(), "'b' (param)", "run {3, 6} falls outside global shape [6]"});
  expectError(
      [&] {
        writeShard(stepDir, 1, 2, {{"b", "param", {6}, {{0, 5}}, data}});
      },
      {shard.string(), "runs count 5 values, its data holds 6"});
  expectError([&] { writeShard(stepDir, 2, 2, {}); }, {"shard-2-of-2.bin", "rank 2 of 2"});
  EXPECT_FALSE(fs::exists(shard));
  EXPECT_EQ(std::distance(fs::directory_iterator(stepDir), fs::directory_iterator()), 0);
}

TEST_F(HarnessCheckpoint, AnIncompleteOrInconsistentSaveIsRefusedByWriteIndex) {
  const fs::path stepDir = prepareStepDir(dir_, 2);
  const fs::path index = stepDir / "index.json";
  std::vector<Rank> mesh = tensorParallel();
  mesh[1].entries.erase(mesh[1].entries.begin());  // rank 1's rows of h0.mlp.fc.w
  std::vector<ShardInfo> shards;
  for (int r = 0; r < 2; ++r) shards.push_back(writeShard(stepDir, r, 2, mesh[r].entries));
  expectError([&] { writeIndex(stepDir, 2, {}, shards); },
              {index.string(), "'h0.mlp.fc.w' (param) is not fully covered: element [2, 0]"});
  expectError([&] { writeIndex(stepDir, 2, {}, {shards[0]}); }, {index.string(), "1 shards"});
  shards[1].entries.back().globalShape = {2, 3};
  expectError(
      [&] { writeIndex(stepDir, 2, {}, shards); },
      {index.string(), "global shape [2, 3] in 'shard-1-of-2.bin', [6] in 'shard-0-of-2.bin'"});
  EXPECT_FALSE(fs::exists(index));
}

TEST_F(HarnessCheckpoint, AMalformedIndexIsNamedWithItsLine) {
  const fs::path stepDir = save(dir_, 1, tensorParallel());
  const fs::path index = stepDir / "index.json";
  const std::string good = readFile(index);
  const auto expectBad = [&](const std::string& text, const std::vector<std::string>& parts) {
    writeFile(index, text);
    std::vector<std::string> all = {index.string(), "malformed index"};
    all.insert(all.end(), parts.begin(), parts.end());
    expectError([&] { CheckpointReader{stepDir}; }, all);
  };
  expectBad(good.substr(0, good.find("\"shards\"")), {"unexpected end"});
  expectBad(replaced(good, "\"step\": 1,", "\"step\": 1,,"), {"line 4", "expected a member"});
  expectBad(replaced(good, "\"step\": 1", "\"step\": 1.5"), {"line 4", "fraction"});
  expectBad(replaced(good, "\"step\": 1", "\"step\": 1, \"step\": 2"), {"duplicate member"});
  expectBad(replaced(good, "\"dtype\": \"f32\"", "\"dtype\": 32"),
            {"shards[0].entries[0].dtype: expected a string"});
  expectBad(replaced(good, "\"dtype\": \"f32\"", "\"dtype\": \"bf16\""), {"not f32"});
  expectBad(replaced(good, "\"rank\": 1", "\"rank\": 2"), {"shards[1].rank: 2 is outside [0, 1]"});
  expectBad(replaced(good, "\"file\": \"shard-1-of-2.bin\"", "\"file\": \"../x.bin\""),
            {"shards[1].file", "not a file name"});
  expectBad(replaced(good, "\"meta\"", "\"mesh\""), {"missing member \"meta\""});
  expectBad(good + "x", {"after the end"});
}

TEST_F(HarnessCheckpoint, AnIndexEntryOutsideItsShapeOrFileIsNamed) {
  const fs::path stepDir = save(dir_, 1, tensorParallel());
  const fs::path index = stepDir / "index.json";
  const std::string good = readFile(index);
  writeFile(index, replaced(good, "\"runs\": [[0, 12]]", "\"runs\": [[20, 12]]"));
  expectError(
      [&] { CheckpointReader{stepDir}; },
      {index.string(), "shards[0].entries[0]", "run {20, 12} falls outside global shape [4, 6]"});
  writeFile(index, replaced(good, "\"runs\": [[0, 6]]", "\"runs\": [[0, 6], [0, 1]]"));
  expectError([&] { CheckpointReader{stepDir}; },
              {index.string(), "do not fit in 'shard-0-of-2.bin'"});
  // Rank 1's rows gone from the index: read, the tensor has a hole.
  std::string text = good;
  const size_t rank1 = text.find("shard-1-of-2.bin");
  const size_t line = text.find("{\"tensor\": \"h0.mlp.fc.w\"", rank1);
  text.erase(line, text.find('\n', line) + 1 - line);
  writeFile(index, text);
  CheckpointReader reader(stepDir);
  expectError([&] { reader.readGlobal(rows_.tensor, rows_.kind); },
              {index.string(), "'h0.mlp.fc.w' (param) is not fully covered: element [2, 0]"});
  expectError([&] { reader.readGlobal("h0.mlp.fc.w", "adam.v"); },
              {index.string(), "no tensor 'h0.mlp.fc.w' (adam.v)"});
}

TEST_F(HarnessCheckpoint, ShapesThatDisagreeBetweenShardsAreNamed) {
  const fs::path stepDir = save(dir_, 1, tensorParallel());
  const fs::path index = stepDir / "index.json";
  std::string text = readFile(index);
  const size_t rank1 = text.find("shard-1-of-2.bin");
  const size_t at = text.find("\"shape\": [6]", rank1);
  text.replace(at, 12, "\"shape\": [7]");
  writeFile(index, text);
  expectError([&] { CheckpointReader{stepDir}; },
              {index.string(),
               "'h0.attn.proj.b' (param): global shape [6] in 'shard-0-of-2.bin', "
               "[7] in 'shard-1-of-2.bin'"});
}

TEST_F(HarnessCheckpoint, AnIndexFromAnotherRunIsNamed) {
  const fs::path ours = save(dir_ / "a", 1, tensorParallel());
  std::vector<Rank> other(2);
  for (int r = 0; r < 2; ++r) {
    const Global wide = global(rows_.tensor, rows_.kind, {4, 8});
    other[r].add(wide, rowSplit(wide, r, 2));
    other[r].add(global(bias_.tensor, bias_.kind, {8}), {{0, 8}});
  }
  const fs::path theirs = save(dir_ / "b", 1, other);
  fs::copy_file(theirs / "index.json", ours / "index.json", fs::copy_options::overwrite_existing);
  CheckpointReader reader(ours);
  expectError([&] { reader.readGlobal(rows_.tensor, rows_.kind); },
              {(ours / "shard-0-of-2.bin").string(), "not the shard the index describes",
               "another checkpoint"});
}

TEST_F(HarnessCheckpoint, ReplicasThatDisagreeAreNamed) {
  std::vector<Rank> mesh = tensorParallel();
  std::vector<float>& rank1Bias = mesh[1].storage.back();
  rank1Bias[3] = std::nextafter(rank1Bias[3], 1e9f);  // one ulp
  const fs::path stepDir = save(dir_, 1, mesh);
  CheckpointReader reader(stepDir);
  expectError([&] { reader.readGlobal(bias_.tensor, bias_.kind); },
              {(stepDir / "shard-1-of-2.bin").string(), (stepDir / "shard-0-of-2.bin").string(),
               "element [3]", "bit for bit"});
  EXPECT_TRUE(sameBits(reader.readGlobal(rows_.tensor, rows_.kind), rows_.values));
}

}  // namespace
}  // namespace gyre::harness::test
