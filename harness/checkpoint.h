// Sharded checkpoints: the file format, knowing nothing of the model
// (docs/harness.md, "Checkpoints: the format"). Under data, ZeRO, tensor and
// pipeline parallelism each rank holds pieces of global tensors; it saves
// them as entries of its own shard file, and one index names every shard
// and every piece. Reading assembles whole global tensors from whichever
// shards hold their pieces, so a run resumes with the same mesh bit for bit
// or with another one (each rank then cuts its own pieces from the whole).
//
//   DIR/step-<N>/shard-<rank>-of-<ranks>.bin   one per rank, written by it
//   DIR/step-<N>/index.json                    written last, by one rank
//
// A piece is a list of runs {offset, count} in the global tensor's row-major
// flat index space; its float32 values are stored in run order. A row split
// is one run, a column split one run per row, a flat (ZeRO) split one run per
// tensor it touches.
//
// Writing is collective-free: every rank calls prepareStepDir and writeShard;
// after a barrier one rank calls writeIndex (readShardInfos gives it every
// rank's ShardInfo from the files' headers). Every file is written under a
// temporary name, synced and renamed, and the index comes last: a step
// directory without index.json is incomplete and never loaded. Every failure
// is a CheckpointError whose message names the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gyre::harness {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr uint32_t kCheckpointVersion = 1;

// Elements [offset, offset + count) of a global tensor, flat and row-major.
struct Run {
  uint64_t offset = 0;
  uint64_t count = 0;
  bool operator==(const Run&) const = default;
};

// What a rank saves: a piece of one global tensor of one kind ("param",
// "adam.m", ...); `data` holds sum(runs' counts) values in run order.
struct Entry {
  std::string tensor, kind;
  std::vector<int64_t> globalShape;
  std::vector<Run> runs;
  std::span<const float> data;
};

// An entry as the index describes it: where its data lies in the shard file.
struct EntryInfo {
  std::string tensor, kind, dtype;  // dtype: "f32"
  std::vector<int64_t> globalShape{};
  std::vector<Run> runs{};
  uint64_t dataOffset = 0;  // bytes from the start of the shard file
  bool operator==(const EntryInfo&) const = default;
};

// A written shard as the index records it. The checksum is FNV-1a 64 of the
// whole file but its last 8 bytes, which hold it.
struct ShardInfo {
  std::string file;  // name inside the step directory
  int rank = 0, ranks = 0;
  uint64_t bytes = 0, checksum = 0;
  std::vector<EntryInfo> entries{};
  bool operator==(const ShardInfo&) const = default;
};

// "shard-<rank>-of-<ranks>.bin" and DIR/step-<step>.
std::string shardFileName(int rank, int ranks);
std::filesystem::path stepDirectory(const std::filesystem::path& dir, int64_t step);

// Creates DIR/step-<step> if needed and removes its index.json if there is
// one, so a step saved again is incomplete until its new index is written.
// Shards a crashed earlier attempt left are harmless: writeShard replaces a
// file atomically and writeIndex deletes those it does not list. Safe to
// call on every rank at once. Returns the step directory.
std::filesystem::path prepareStepDir(const std::filesystem::path& dir, int64_t step);

// Writes this rank's shard into the step directory (temporary name, fsync,
// rename). Checks every entry (runs inside the global shape, counts adding up
// to the data's size) and throws CheckpointError naming the shard otherwise.
ShardInfo writeShard(const std::filesystem::path& stepDir, int rank, int ranks,
                     const std::vector<Entry>& entries);

// A written shard's ShardInfo from its header and trailer, without reading
// its data: what the index writer uses for the other ranks' shards.
ShardInfo readShardInfo(const std::filesystem::path& shardFile);
// readShardInfo of shardFileName(r, ranks) for every r, in rank order.
std::vector<ShardInfo> readShardInfos(const std::filesystem::path& stepDir, int ranks);

// Writes index.json, which completes the step. Checks that `shards` are one
// per rank of the same rank count, that every (tensor, kind) has one global
// shape and is covered whole by its pieces; then deletes the step
// directory's shard and temporary files it does not list.
void writeIndex(const std::filesystem::path& stepDir, int64_t step,
                const std::map<std::string, std::string>& meta,
                const std::vector<ShardInfo>& shards);

// The highest N with a complete DIR/step-<N> (one holding index.json), or
// nullopt when there is none (DIR missing included).
std::optional<int64_t> latestCompleteStep(const std::filesystem::path& dir);

// A complete step directory, for reading whole global tensors.
class CheckpointReader {
 public:
  // Reads and checks index.json (syntax, fields, every entry's runs inside
  // its global shape and data inside its shard, one global shape per tensor).
  explicit CheckpointReader(const std::filesystem::path& stepDir);

  int64_t step() const { return step_; }
  const std::map<std::string, std::string>& meta() const { return meta_; }
  const std::vector<ShardInfo>& shards() const { return shards_; }
  // Every (tensor, kind) present, sorted.
  std::vector<std::pair<std::string, std::string>> tensors() const;
  std::vector<int64_t> globalShape(const std::string& tensor, const std::string& kind) const;

  // The whole global tensor, from every shard holding a piece of it. Checks
  // that the pieces cover every element, verifies each shard it reads
  // (size and checksum, once per reader), and that pieces saved by several
  // ranks agree bit for bit.
  std::vector<float> readGlobal(const std::string& tensor, const std::string& kind);

 private:
  struct Piece {
    size_t shard, entry;
  };
  const std::vector<Piece>& piecesOf(const std::string& tensor, const std::string& kind) const;
  void verifyShard(size_t shard);
  // The file of the first of pieces[0, before) that holds `element`.
  std::string holderOf(const std::vector<Piece>& pieces, size_t before, uint64_t element) const;

  std::filesystem::path dir_, index_;
  int64_t step_ = 0;
  std::map<std::string, std::string> meta_;
  std::vector<ShardInfo> shards_;
  std::vector<bool> verified_;
  std::map<std::pair<std::string, std::string>, std::vector<Piece>> pieces_;
};

}  // namespace gyre::harness
