// What checkpoint.cc (writing) and checkpoint_reader.cc (reading) share: the
// shard file's layout, the failure messages, the checks of a piece against
// its global shape, and file descriptors. Not for callers of checkpoint.h.
//
// The shard file, all fields little-endian:
//
//   offset  size  field
//        0     8  magic "GYRECKPT"
//        8     4  version (1)
//       12     4  entry count
//       16     4  rank
//       20     4  ranks
//       24     8  header size H: where the data starts (a multiple of 8)
//       32        per entry: tensor, kind and dtype (u32 length + bytes each),
//                 u32 dimensions + i64 each, u64 runs + (u64 offset, u64
//                 count) each, u64 data offset; zeros up to H
//        H        each entry's float32 values, in entry order, back to back
//   end - 8    8  FNV-1a 64 of every byte before it
//
// The header repeats what the index says of the shard, so the index writer
// can read every shard's description without communication, and the
// checksum at the end lets it take the checksum without reading the data.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/checkpoint.h"

namespace gyre::harness::checkpoint_detail {

static_assert(std::endian::native == std::endian::little,
              "shards hold little-endian data, written from and read into memory as it is");

inline constexpr std::array<uint8_t, 8> kMagic = {'G', 'Y', 'R', 'E', 'C', 'K', 'P', 'T'};
inline constexpr char kIndexName[] = "index.json";
inline constexpr char kFormatName[] = "gyre-checkpoint";
inline constexpr char kDtype[] = "f32";
// The shard file's fixed header (magic to header size) and its trailer, the
// checksum: the smallest possible shard is one with no entries.
inline constexpr uint64_t kFixedHeaderBytes = 32;
inline constexpr uint64_t kTrailerBytes = 8;

// "checkpoint: '<file>': <what>", thrown as CheckpointError.
[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what);
// The same with ": <strerror(errno)>" appended.
[[noreturn]] void failErrno(const std::filesystem::path& file, const std::string& what);

// "[2, 3]"
std::string shapeString(const std::vector<int64_t>& shape);
// Element `flat` of `shape` as its multi-index, "[1, 2]".
std::string elementString(const std::vector<int64_t>& shape, uint64_t flat);
// "'h0.w' (param)"
std::string tensorString(const std::string& tensor, const std::string& kind);

// Checks a piece: dimensions non-negative, the element count within int64,
// every run inside it and the runs' total count within 2^62 (so its bytes fit
// uint64). Returns the total count, or sets `problem` and returns nullopt.
std::optional<uint64_t> checkPiece(const std::vector<int64_t>& shape, const std::vector<Run>& runs,
                                   std::string& problem);
// The number of elements of a shape checkPiece accepted.
uint64_t elementCount(const std::vector<int64_t>& shape);
// The first element of [0, count) that no run covers, or nullopt.
std::optional<uint64_t> firstUncovered(uint64_t count, std::vector<Run> runs);

// Closes on every path out, including the throws.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
};

// Reads exactly n bytes at `offset`; a short read is a truncated file.
void readAt(int fd, uint64_t offset, void* dst, size_t n, const std::filesystem::path& file);

}  // namespace gyre::harness::checkpoint_detail
