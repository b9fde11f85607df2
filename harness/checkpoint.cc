// Writing a checkpoint: the step directory, the shard files (their layout is
// in checkpoint_detail.h), the index, and finding the latest complete step
// (docs/harness.md, "Checkpoints: the format").
#include "harness/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <set>
#include <utility>

#include "harness/checkpoint_detail.h"
#include "harness/json.h"
#include "harness/token_file.h"

namespace gyre::harness {

using namespace checkpoint_detail;
namespace fs = std::filesystem;

namespace {

void put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
// Fills in a field reserved earlier with put.
void set(std::vector<uint8_t>& out, size_t at, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void putString(std::vector<uint8_t>& out, const std::string& s) {
  put(out, s.size(), 4);
  out.insert(out.end(), s.begin(), s.end());
}

// Syncs a directory, so that the names created or renamed in it survive a
// crash. Some filesystems cannot sync a directory (EINVAL); they get nothing.
void syncDir(const fs::path& dir) {
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd < 0) failErrno(dir, "cannot open the directory to sync it");
  if (::fsync(d.fd) != 0 && errno != EINVAL) failErrno(dir, "cannot sync the directory");
}

// A file written under "<target>.tmp.<pid>" and renamed to `target` by
// commit() once it is whole and synced; dropped uncommitted (a throw), the
// temporary is removed.
class AtomicFile {
 public:
  explicit AtomicFile(fs::path target) : target_(std::move(target)), tmp_(target_) {
    tmp_ += ".tmp." + std::to_string(::getpid());
    out_.fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_.fd < 0) failErrno(tmp_, "cannot create");
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (committed_) return;
    std::error_code ignored;
    fs::remove(tmp_, ignored);
  }

  // Writes n bytes and adds them to the checksum.
  void write(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    checksum_ = fnv1a64({p, n}, checksum_);
    bytes_ += n;
    while (n > 0) {
      const ssize_t wrote = ::write(out_.fd, p, n);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote < 0) failErrno(tmp_, "cannot write");
      p += wrote;
      n -= static_cast<size_t>(wrote);
    }
  }
  uint64_t checksum() const { return checksum_; }
  uint64_t bytes() const { return bytes_; }

  // Durable before it gets the real name, so the name never points at a
  // file whose blocks a crash could still lose.
  void commit() {
    if (::fsync(out_.fd) != 0) failErrno(tmp_, "cannot sync");
    if (::close(std::exchange(out_.fd, -1)) != 0) failErrno(tmp_, "cannot close");
    std::error_code ec;
    fs::rename(tmp_, target_, ec);
    if (ec) fail(target_, "cannot rename '" + tmp_.string() + "' to it: " + ec.message());
    committed_ = true;
    syncDir(target_.parent_path());
  }

 private:
  fs::path target_, tmp_;
  Fd out_;
  uint64_t checksum_ = fnv1a64({});
  uint64_t bytes_ = 0;
  bool committed_ = false;
};

// The paths in `dir`, listed whole before the caller removes any.
std::vector<fs::path> listDir(const fs::path& dir) {
  std::vector<fs::path> paths;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    paths.push_back(it->path());
  if (ec) fail(dir, "cannot list the directory: " + ec.message());
  return paths;
}

bool isTemporary(const std::string& name) { return name.find(".tmp.") != std::string::npos; }

void writeIndexJson(AtomicFile& out, int64_t step, const std::map<std::string, std::string>& meta,
                    const std::vector<ShardInfo>& shards);

}  // namespace

std::string shardFileName(int rank, int ranks) {
  return "shard-" + std::to_string(rank) + "-of-" + std::to_string(ranks) + ".bin";
}

fs::path stepDirectory(const fs::path& dir, int64_t step) {
  return dir / ("step-" + std::to_string(step));
}

fs::path prepareStepDir(const fs::path& dir, int64_t step) {
  if (step < 0) fail(dir, "step " + std::to_string(step) + " is negative");
  const fs::path stepDir = stepDirectory(dir, step);
  std::error_code ec;
  fs::create_directories(stepDir, ec);
  if (ec) fail(stepDir, "cannot create the step directory: " + ec.message());
  fs::remove(stepDir / kIndexName, ec);  // many ranks may race here: missing is fine
  if (ec) fail(stepDir / kIndexName, "cannot remove the previous index: " + ec.message());
  syncDir(stepDir);
  syncDir(stepDir.parent_path());
  return stepDir;
}

ShardInfo writeShard(const fs::path& stepDir, int rank, int ranks,
                     const std::vector<Entry>& entries) {
  const fs::path file = stepDir / shardFileName(rank, ranks);
  if (ranks < 1 || rank < 0 || rank >= ranks)
    fail(file, "rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " is no rank");
  ShardInfo info{.file = file.filename().string(), .rank = rank, .ranks = ranks};
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> shapes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const std::string what = "entry " + std::to_string(i) + " " + tensorString(e.tensor, e.kind);
    if (e.tensor.empty() || e.kind.empty()) fail(file, what + ": empty tensor or kind name");
    std::string problem;
    const std::optional<uint64_t> count = checkPiece(e.globalShape, e.runs, problem);
    if (!count) fail(file, what + ": " + problem);
    if (*count != e.data.size())
      fail(file, what + ": its runs count " + std::to_string(*count) + " values, its data holds " +
                     std::to_string(e.data.size()));
    const auto [it, added] = shapes.emplace(std::pair(e.tensor, e.kind), e.globalShape);
    if (!added && it->second != e.globalShape)
      fail(file, what + ": global shape " + shapeString(e.globalShape) + ", an earlier entry of " +
                     "the same tensor has " + shapeString(it->second));
    info.entries.push_back({.tensor = e.tensor,
                            .kind = e.kind,
                            .dtype = kDtype,
                            .globalShape = e.globalShape,
                            .runs = e.runs});
  }

  std::vector<uint8_t> header(kMagic.begin(), kMagic.end());
  put(header, kCheckpointVersion, 4);
  put(header, entries.size(), 4);
  put(header, static_cast<uint64_t>(rank), 4);
  put(header, static_cast<uint64_t>(ranks), 4);
  put(header, 0, 8);             // the header size, known below
  std::vector<size_t> offsetAt;  // where each entry's data offset goes
  for (const EntryInfo& e : info.entries) {
    putString(header, e.tensor);
    putString(header, e.kind);
    putString(header, e.dtype);
    put(header, e.globalShape.size(), 4);
    for (int64_t d : e.globalShape) put(header, static_cast<uint64_t>(d), 8);
    put(header, e.runs.size(), 8);
    for (const Run& r : e.runs) {
      put(header, r.offset, 8);
      put(header, r.count, 8);
    }
    offsetAt.push_back(header.size());
    put(header, 0, 8);
  }
  header.resize((header.size() + 7) / 8 * 8, 0);
  uint64_t offset = header.size();
  set(header, 24, offset);
  for (size_t i = 0; i < entries.size(); ++i) {
    info.entries[i].dataOffset = offset;
    set(header, offsetAt[i], offset);
    offset += entries[i].data.size_bytes();
  }

  AtomicFile out(file);
  out.write(header.data(), header.size());
  for (const Entry& e : entries) out.write(e.data.data(), e.data.size_bytes());
  info.checksum = out.checksum();
  out.write(&info.checksum, sizeof info.checksum);
  info.bytes = out.bytes();
  out.commit();
  return info;
}

void writeIndex(const fs::path& stepDir, int64_t step,
                const std::map<std::string, std::string>& meta,
                const std::vector<ShardInfo>& shards) {
  const fs::path index = stepDir / kIndexName;
  if (step < 0) fail(index, "step " + std::to_string(step) + " is negative");
  if (shards.empty()) fail(index, "no shards to index");
  const int ranks = shards.front().ranks;
  if (static_cast<size_t>(ranks) != shards.size())
    fail(index, std::to_string(shards.size()) + " shards given for " + std::to_string(ranks) +
                    " ranks (" + shards.front().file + ")");
  std::vector<bool> seen(shards.size());
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<int64_t>, std::string>> shape;
  std::map<std::pair<std::string, std::string>, std::vector<Run>> runs;
  for (const ShardInfo& s : shards) {
    if (s.ranks != ranks || s.rank < 0 || s.rank >= ranks || s.file != shardFileName(s.rank, ranks))
      fail(index, "shard '" + s.file + "' (rank " + std::to_string(s.rank) + " of " +
                      std::to_string(s.ranks) + ") does not belong with " + shards.front().file);
    if (seen[static_cast<size_t>(s.rank)]) fail(index, "shard '" + s.file + "' given twice");
    seen[static_cast<size_t>(s.rank)] = true;
    for (const EntryInfo& e : s.entries) {
      const auto key = std::pair(e.tensor, e.kind);
      const auto [it, added] = shape.emplace(key, std::pair(e.globalShape, s.file));
      if (!added && it->second.first != e.globalShape)
        fail(index, tensorString(e.tensor, e.kind) + ": global shape " +
                        shapeString(e.globalShape) + " in '" + s.file + "', " +
                        shapeString(it->second.first) + " in '" + it->second.second + "'");
      runs[key].insert(runs[key].end(), e.runs.begin(), e.runs.end());
    }
  }
  for (const auto& [key, pieceRuns] : runs) {
    const std::vector<int64_t>& globalShape = shape.at(key).first;
    if (const auto gap = firstUncovered(elementCount(globalShape), pieceRuns))
      fail(index, tensorString(key.first, key.second) + " is not fully covered: element " +
                      elementString(globalShape, *gap) + " is in no shard");
  }

  // What a crashed earlier save of this step may have left.
  std::set<std::string> listed;
  for (const ShardInfo& s : shards) listed.insert(s.file);
  for (const fs::path& f : listDir(stepDir)) {
    const std::string name = f.filename().string();
    const bool staleShard =
        name.starts_with("shard-") && name.ends_with(".bin") && !listed.contains(name);
    std::error_code ec;
    if (fs::is_regular_file(f, ec) && (staleShard || isTemporary(name))) fs::remove(f, ec);
    if (ec) fail(f, "cannot remove this leftover of an earlier save: " + ec.message());
  }

  AtomicFile out(index);
  writeIndexJson(out, step, meta, shards);
  out.commit();
}

std::optional<int64_t> latestCompleteStep(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return std::nullopt;
  std::optional<int64_t> latest;
  for (const fs::path& d : listDir(dir)) {
    const std::string name = d.filename().string();
    if (!name.starts_with("step-")) continue;
    const std::string digits = name.substr(5);
    int64_t step = 0;
    const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    // "step-<N>" exactly as stepDirectory spells it: no sign, no leading zero.
    if (err != std::errc() || end != digits.data() + digits.size() ||
        digits != std::to_string(step) || step < 0)
      continue;
    if (fs::is_directory(d, ec) && fs::is_regular_file(d / kIndexName, ec))
      latest = std::max(latest.value_or(step), step);
  }
  return latest;
}

namespace {

// One line per entry, so a shard's pieces can be read (and diffed) by eye.
void writeIndexJson(AtomicFile& out, int64_t step, const std::map<std::string, std::string>& meta,
                    const std::vector<ShardInfo>& shards) {
  std::string j = "{\n  \"format\": \"" + std::string(kFormatName) + "\",\n";
  j += "  \"version\": " + std::to_string(kCheckpointVersion) + ",\n";
  j += "  \"step\": " + std::to_string(step) + ",\n";
  j += "  \"meta\": {";
  for (auto it = meta.begin(); it != meta.end(); ++it)
    j += (it == meta.begin() ? "\n    " : ",\n    ") + json::quote(it->first) + ": " +
         json::quote(it->second);
  j += meta.empty() ? "},\n" : "\n  },\n";
  j += "  \"shards\": [";
  for (size_t s = 0; s < shards.size(); ++s) {
    const ShardInfo& sh = shards[s];
    char sum[17];
    std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(sh.checksum));
    j += std::string(s == 0 ? "\n" : ",\n") + "    {\n      \"file\": " + json::quote(sh.file) +
         ",\n      \"rank\": " + std::to_string(sh.rank) +
         ",\n      \"ranks\": " + std::to_string(sh.ranks) +
         ",\n      \"bytes\": " + std::to_string(sh.bytes) + ",\n      \"checksum\": \"" + sum +
         "\",\n      \"entries\": [";
    for (size_t i = 0; i < sh.entries.size(); ++i) {
      const EntryInfo& e = sh.entries[i];
      j += std::string(i == 0 ? "\n" : ",\n") + "        {\"tensor\": " + json::quote(e.tensor) +
           ", \"kind\": " + json::quote(e.kind) + ", \"dtype\": " + json::quote(e.dtype) +
           ", \"shape\": " + shapeString(e.globalShape) +
           ", \"offset\": " + std::to_string(e.dataOffset) + ", \"runs\": [";
      for (size_t r = 0; r < e.runs.size(); ++r)
        j += (r == 0 ? "[" : ", [") + std::to_string(e.runs[r].offset) + ", " +
             std::to_string(e.runs[r].count) + "]";
      j += "]}";
    }
    j += sh.entries.empty() ? "]\n    }" : "\n      ]\n    }";
  }
  j += "\n  ]\n}\n";
  out.write(j.data(), j.size());
}

}  // namespace

}  // namespace gyre::harness
