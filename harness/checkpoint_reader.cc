// Reading a checkpoint: a shard's header (readShardInfo), the index, and
// whole global tensors assembled from their pieces (docs/harness.md,
// "Checkpoints: the format").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include "harness/checkpoint.h"
#include "harness/checkpoint_detail.h"
#include "harness/json.h"
#include "harness/token_file.h"

namespace gyre::harness {

using namespace checkpoint_detail;
namespace fs = std::filesystem;

namespace {

// Reads the header's fields in order; running past its end means a damaged
// header, reported against `file`.
class Cursor {
 public:
  Cursor(const std::vector<uint8_t>& bytes, size_t pos, const fs::path& file)
      : bytes_(bytes), pos_(pos), file_(file) {}
  uint64_t get(int n) {
    need(static_cast<size_t>(n));
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{bytes_[pos_++]} << (8 * i);
    return v;
  }
  std::string string() {
    const uint64_t n = get(4);
    need(n);
    std::string s(bytes_.begin() + static_cast<ptrdiff_t>(pos_),
                  bytes_.begin() + static_cast<ptrdiff_t>(pos_ + n));
    pos_ += n;
    return s;
  }

 private:
  void need(uint64_t n) const {
    if (n > bytes_.size() - pos_) fail(file_, "corrupt shard header: it ends inside an entry");
  }
  const std::vector<uint8_t>& bytes_;
  size_t pos_;
  const fs::path& file_;
};

// Reads index.json's fields, naming the file, the line and the field of
// whatever is wrong ("shards[1].entries[0].runs").
class IndexFields {
 public:
  explicit IndexFields(const fs::path& file) : file_(file) {}

  [[noreturn]] void bad(const json::Value& v, const std::string& field,
                        const std::string& what) const {
    fail(file_, "malformed index: line " + std::to_string(v.line) + ", " + field + ": " + what);
  }
  // An object with exactly the members `keys`.
  void object(const json::Value& v, const std::string& field,
              std::initializer_list<std::string_view> keys) const {
    if (v.type != json::Value::Type::Object) bad(v, field, "expected an object");
    for (std::string_view k : keys)
      if (v.find(k) == nullptr) bad(v, field, "missing member \"" + std::string(k) + "\"");
    for (const auto& [name, member] : v.members)
      if (std::find(keys.begin(), keys.end(), name) == keys.end())
        bad(member, field, "unknown member \"" + name + "\"");
  }
  const std::vector<json::Value>& array(const json::Value& v, const std::string& field) const {
    if (v.type != json::Value::Type::Array) bad(v, field, "expected an array");
    return v.items;
  }
  const std::string& string(const json::Value& v, const std::string& field) const {
    if (v.type != json::Value::Type::String) bad(v, field, "expected a string");
    return v.string;
  }
  int64_t integer(const json::Value& v, const std::string& field, int64_t min,
                  int64_t max = INT64_MAX) const {
    if (v.type == json::Value::Type::Number)
      bad(v, field, "expected an integer, found a number with a fraction or an exponent");
    if (v.type != json::Value::Type::Integer) bad(v, field, "expected an integer");
    if (v.integer < min || v.integer > max)
      bad(v, field,
          std::to_string(v.integer) + " is outside [" + std::to_string(min) + ", " +
              std::to_string(max) + "]");
    return v.integer;
  }

 private:
  const fs::path& file_;
};

std::string readWholeFile(const fs::path& file) {
  Fd in{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0 && errno == ENOENT)
    fail(file,
         "missing index: the step is incomplete (a save that did not finish) or not a "
         "checkpoint");
  if (in.fd < 0) failErrno(file, "cannot open the index");
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) failErrno(file, "cannot stat the index");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  readAt(in.fd, 0, text.data(), text.size(), file);
  return text;
}

// A file name inside the step directory, not a path that leaves it.
bool plainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

}  // namespace

ShardInfo readShardInfo(const fs::path& file) {
  Fd in{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0 && errno == ENOENT) failErrno(file, "missing shard");
  if (in.fd < 0) failErrno(file, "cannot open the shard");
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) failErrno(file, "cannot stat the shard");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kFixedHeaderBytes + kTrailerBytes)
    fail(file, "truncated shard: " + std::to_string(size) + " bytes, less than an empty shard");
  std::vector<uint8_t> header(kFixedHeaderBytes);
  readAt(in.fd, 0, header.data(), header.size(), file);
  if (!std::equal(kMagic.begin(), kMagic.end(), header.begin()))
    fail(file, "not a gyre checkpoint shard (bad magic)");
  Cursor fixed(header, kMagic.size(), file);
  if (const uint64_t v = fixed.get(4); v != kCheckpointVersion)
    fail(file, "shard format version " + std::to_string(v) + ", this build reads version " +
                   std::to_string(kCheckpointVersion));
  const uint64_t count = fixed.get(4);
  ShardInfo info{.file = file.filename().string()};
  info.rank = static_cast<int>(fixed.get(4));
  info.ranks = static_cast<int>(fixed.get(4));
  const uint64_t headerBytes = fixed.get(8);
  if (info.ranks < 1 || info.rank < 0 || info.rank >= info.ranks)
    fail(file, "corrupt shard header: rank " + std::to_string(info.rank) + " of " +
                   std::to_string(info.ranks));
  if (headerBytes < kFixedHeaderBytes || headerBytes > size - kTrailerBytes)
    fail(file, "corrupt or truncated shard: its header says the data starts at byte " +
                   std::to_string(headerBytes) + ", the file has " + std::to_string(size));
  header.resize(headerBytes);
  readAt(in.fd, kFixedHeaderBytes, header.data() + kFixedHeaderBytes,
         headerBytes - kFixedHeaderBytes, file);

  Cursor c(header, kFixedHeaderBytes, file);
  uint64_t end = headerBytes;  // where the next entry's data must start
  for (uint64_t i = 0; i < count; ++i) {
    EntryInfo e{.tensor = c.string(), .kind = c.string(), .dtype = c.string()};
    const std::string what = "entry " + std::to_string(i) + " " + tensorString(e.tensor, e.kind);
    for (uint64_t d = 0, n = c.get(4); d < n; ++d)
      e.globalShape.push_back(static_cast<int64_t>(c.get(8)));
    for (uint64_t r = 0, n = c.get(8); r < n; ++r) e.runs.push_back({c.get(8), c.get(8)});
    e.dataOffset = c.get(8);
    if (e.dtype != kDtype) fail(file, what + ": dtype '" + e.dtype + "', this build reads f32");
    std::string problem;
    const std::optional<uint64_t> values = checkPiece(e.globalShape, e.runs, problem);
    if (!values) fail(file, "corrupt shard header: " + what + ": " + problem);
    if (e.dataOffset != end)
      fail(file, "corrupt shard header: " + what + ": its data at byte " +
                     std::to_string(e.dataOffset) + ", where byte " + std::to_string(end) +
                     " was expected");
    if (*values > (size - kTrailerBytes - end) / sizeof(float))
      fail(file, "truncated shard: " + std::to_string(size) + " bytes, " + what +
                     "'s data ends past them");
    end += *values * sizeof(float);
    info.entries.push_back(std::move(e));
  }
  if (size != end + kTrailerBytes)
    fail(file, "overlong shard: " + std::to_string(size) + " bytes, its header describes " +
                   std::to_string(end + kTrailerBytes));
  info.bytes = size;
  readAt(in.fd, size - kTrailerBytes, &info.checksum, sizeof info.checksum, file);
  return info;
}

std::vector<ShardInfo> readShardInfos(const fs::path& stepDir, int ranks) {
  std::vector<ShardInfo> shards;
  for (int r = 0; r < ranks; ++r)
    shards.push_back(readShardInfo(stepDir / shardFileName(r, ranks)));
  return shards;
}

CheckpointReader::CheckpointReader(const fs::path& stepDir)
    : dir_(stepDir), index_(stepDir / kIndexName) {
  json::Value doc;
  try {
    doc = json::parse(readWholeFile(index_));
  } catch (const json::ParseError& e) {
    fail(index_, std::string("malformed index: ") + e.what());
  }
  const IndexFields f(index_);
  f.object(doc, "the index", {"format", "version", "step", "meta", "shards"});
  if (f.string(*doc.find("format"), "format") != kFormatName)
    f.bad(doc, "format", "not \"" + std::string(kFormatName) + "\": not a gyre checkpoint index");
  if (const int64_t v = f.integer(*doc.find("version"), "version", 0); v != kCheckpointVersion)
    fail(index_, "index format version " + std::to_string(v) + ", this build reads version " +
                     std::to_string(kCheckpointVersion));
  step_ = f.integer(*doc.find("step"), "step", 0);
  const json::Value& meta = *doc.find("meta");
  if (meta.type != json::Value::Type::Object) f.bad(meta, "meta", "expected an object");
  for (const auto& [key, value] : meta.members) meta_[key] = f.string(value, "meta." + key);

  std::set<std::string> files;
  for (const json::Value& s : f.array(*doc.find("shards"), "shards")) {
    const std::string at = "shards[" + std::to_string(shards_.size()) + "]";
    f.object(s, at, {"file", "rank", "ranks", "bytes", "checksum", "entries"});
    ShardInfo info{.file = f.string(*s.find("file"), at + ".file")};
    if (!plainName(info.file) || !files.insert(info.file).second)
      f.bad(s, at + ".file", "'" + info.file + "' is not a file name, or listed twice");
    info.ranks = static_cast<int>(f.integer(*s.find("ranks"), at + ".ranks", 1, INT32_MAX));
    info.rank = static_cast<int>(f.integer(*s.find("rank"), at + ".rank", 0, info.ranks - 1));
    info.bytes = static_cast<uint64_t>(
        f.integer(*s.find("bytes"), at + ".bytes", kFixedHeaderBytes + kTrailerBytes));
    const std::string& sum = f.string(*s.find("checksum"), at + ".checksum");
    const auto [end, err] = std::from_chars(sum.data(), sum.data() + sum.size(), info.checksum, 16);
    if (sum.size() != 16 || err != std::errc() || end != sum.data() + sum.size())
      f.bad(s, at + ".checksum", "expected 16 hexadecimal digits");
    for (const json::Value& e : f.array(*s.find("entries"), at + ".entries")) {
      const std::string field = at + ".entries[" + std::to_string(info.entries.size()) + "]";
      f.object(e, field, {"tensor", "kind", "dtype", "shape", "offset", "runs"});
      EntryInfo entry{.tensor = f.string(*e.find("tensor"), field + ".tensor"),
                      .kind = f.string(*e.find("kind"), field + ".kind"),
                      .dtype = f.string(*e.find("dtype"), field + ".dtype")};
      if (entry.dtype != kDtype) f.bad(e, field + ".dtype", "'" + entry.dtype + "', not f32");
      for (const json::Value& d : f.array(*e.find("shape"), field + ".shape"))
        entry.globalShape.push_back(f.integer(d, field + ".shape", 0));
      entry.dataOffset =
          static_cast<uint64_t>(f.integer(*e.find("offset"), field + ".offset", kFixedHeaderBytes));
      for (const json::Value& r : f.array(*e.find("runs"), field + ".runs")) {
        const std::vector<json::Value>& pair = f.array(r, field + ".runs");
        if (pair.size() != 2) f.bad(r, field + ".runs", "expected [offset, count]");
        entry.runs.push_back({static_cast<uint64_t>(f.integer(pair[0], field + ".runs", 0)),
                              static_cast<uint64_t>(f.integer(pair[1], field + ".runs", 0))});
      }
      std::string problem;
      const std::optional<uint64_t> values = checkPiece(entry.globalShape, entry.runs, problem);
      if (!values) f.bad(e, field, tensorString(entry.tensor, entry.kind) + ": " + problem);
      const uint64_t dataEnd = info.bytes - kTrailerBytes;
      if (entry.dataOffset > dataEnd || *values > (dataEnd - entry.dataOffset) / sizeof(float))
        f.bad(e, field,
              tensorString(entry.tensor, entry.kind) + ": " + std::to_string(*values) +
                  " values at byte " + std::to_string(entry.dataOffset) + " do not fit in '" +
                  info.file + "' of " + std::to_string(info.bytes) + " bytes");
      pieces_[{entry.tensor, entry.kind}].push_back({shards_.size(), info.entries.size()});
      info.entries.push_back(std::move(entry));
    }
    shards_.push_back(std::move(info));
  }
  verified_.assign(shards_.size(), false);

  for (const auto& [key, pieces] : pieces_) {
    const ShardInfo& first = shards_[pieces.front().shard];
    const EntryInfo& a = first.entries[pieces.front().entry];
    for (const Piece& p : pieces) {
      const EntryInfo& b = shards_[p.shard].entries[p.entry];
      if (b.globalShape != a.globalShape)
        fail(index_, tensorString(key.first, key.second) + ": global shape " +
                         shapeString(a.globalShape) + " in '" + first.file + "', " +
                         shapeString(b.globalShape) + " in '" + shards_[p.shard].file + "'");
    }
  }
}

std::vector<std::pair<std::string, std::string>> CheckpointReader::tensors() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, pieces] : pieces_) out.push_back(key);
  return out;
}

const std::vector<CheckpointReader::Piece>& CheckpointReader::piecesOf(
    const std::string& tensor, const std::string& kind) const {
  const auto it = pieces_.find({tensor, kind});
  if (it == pieces_.end())
    fail(index_, "no tensor " + tensorString(tensor, kind) + " in this checkpoint (it holds " +
                     std::to_string(pieces_.size()) + " tensors)");
  return it->second;
}

std::vector<int64_t> CheckpointReader::globalShape(const std::string& tensor,
                                                   const std::string& kind) const {
  const Piece& p = piecesOf(tensor, kind).front();
  return shards_[p.shard].entries[p.entry].globalShape;
}

// Size first, then the checksum; a file whose own trailer matches its bytes
// is sound, so when it still differs from the index it is another shard
// (another checkpoint's, or the index is).
void CheckpointReader::verifyShard(size_t shard) {
  if (verified_[shard]) return;
  const ShardInfo& want = shards_[shard];
  const fs::path file = dir_ / want.file;
  Fd in{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0 && errno == ENOENT)
    fail(file, "missing shard: the index lists it (rank " + std::to_string(want.rank) + " of " +
                   std::to_string(want.ranks) + ")");
  if (in.fd < 0) failErrno(file, "cannot open the shard");
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) failErrno(file, "cannot stat the shard");
  const auto size = static_cast<uint64_t>(st.st_size);
  uint64_t sum = fnv1a64({}), trailer = 0;
  std::vector<uint8_t> buf(size_t{1} << 20);
  for (uint64_t at = 0, body = size < kTrailerBytes ? 0 : size - kTrailerBytes; at < body;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), body - at));
    readAt(in.fd, at, buf.data(), n, file);
    sum = fnv1a64({buf.data(), n}, sum);
    at += n;
  }
  if (size >= kTrailerBytes) readAt(in.fd, size - kTrailerBytes, &trailer, sizeof trailer, file);
  const bool sound = size >= kFixedHeaderBytes + kTrailerBytes && trailer == sum;
  const std::string another =
      " (the file is sound by its own checksum: is the index from another checkpoint?)";
  if (size != want.bytes)
    fail(file, std::string(!sound && size < want.bytes ? "truncated shard: "
                           : !sound                    ? "overlong shard: "
                                                       : "not the shard the index describes: ") +
                   std::to_string(size) + " bytes, the index says " + std::to_string(want.bytes) +
                   (sound ? another : ""));
  if (sum != want.checksum)
    fail(file, std::string(sound ? "not the shard the index describes: " : "corrupt shard: ") +
                   "checksum mismatch" +
                   (sound ? another : " (the data changed since it was written)"));
  const ShardInfo header = readShardInfo(file);
  if (header.rank != want.rank || header.ranks != want.ranks || header.entries != want.entries)
    fail(file, "its header describes other entries than the index does for it");
  verified_[shard] = true;
}

std::vector<float> CheckpointReader::readGlobal(const std::string& tensor,
                                                const std::string& kind) {
  const std::vector<Piece>& pieces = piecesOf(tensor, kind);
  const std::vector<int64_t> shape = globalShape(tensor, kind);
  const uint64_t count = elementCount(shape);
  std::vector<Run> runs;
  for (const Piece& p : pieces) {
    const EntryInfo& e = shards_[p.shard].entries[p.entry];
    runs.insert(runs.end(), e.runs.begin(), e.runs.end());
  }
  if (const auto gap = firstUncovered(count, runs))
    fail(index_, tensorString(tensor, kind) + " is not fully covered: element " +
                     elementString(shape, *gap) + " is in no shard");
  // Covered by verified data, so the tensor is no larger than the files.
  for (const Piece& p : pieces) verifyShard(p.shard);

  std::vector<float> out(count);
  std::vector<bool> have(count);
  std::vector<float> data;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ShardInfo& shard = shards_[pieces[i].shard];
    const EntryInfo& e = shard.entries[pieces[i].entry];
    const fs::path file = dir_ / shard.file;
    uint64_t values = 0;
    for (const Run& r : e.runs) values += r.count;
    data.resize(values);
    Fd in{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
    if (in.fd < 0) failErrno(file, "cannot open the shard");
    readAt(in.fd, e.dataOffset, data.data(), values * sizeof(float), file);
    const float* v = data.data();
    for (const Run& r : e.runs) {
      for (uint64_t k = r.offset; k < r.offset + r.count; ++k, ++v) {
        if (!have[k]) {
          out[k] = *v;
          have[k] = true;
        } else if (std::memcmp(&out[k], v, sizeof(float)) != 0) {
          fail(file, tensorString(tensor, kind) + ": element " + elementString(shape, k) + " is " +
                         std::to_string(*v) + " here, " + std::to_string(out[k]) + " in '" +
                         (dir_ / holderOf(pieces, i, k)).string() +
                         "': pieces saved by several ranks must agree bit for bit");
        }
      }
    }
  }
  return out;
}

std::string CheckpointReader::holderOf(const std::vector<Piece>& pieces, size_t before,
                                       uint64_t element) const {
  for (size_t i = 0; i < before; ++i) {
    const ShardInfo& shard = shards_[pieces[i].shard];
    for (const Run& r : shard.entries[pieces[i].entry].runs)
      if (element >= r.offset && element - r.offset < r.count) return shard.file;
  }
  return "?";
}

}  // namespace gyre::harness
