#include "harness/checkpoint_detail.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gyre::harness::checkpoint_detail {

namespace fs = std::filesystem;

void fail(const fs::path& file, const std::string& what) {
  throw CheckpointError("checkpoint: '" + file.string() + "': " + what);
}

void failErrno(const fs::path& file, const std::string& what) {
  fail(file, what + ": " + std::strerror(errno));
}

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string elementString(const std::vector<int64_t>& shape, uint64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const auto extent = static_cast<uint64_t>(shape[d]);
    index[d] = static_cast<int64_t>(flat % extent);
    flat /= extent;
  }
  return shapeString(index);
}

std::string tensorString(const std::string& tensor, const std::string& kind) {
  return "'" + tensor + "' (" + kind + ")";
}

std::optional<uint64_t> checkPiece(const std::vector<int64_t>& shape, const std::vector<Run>& runs,
                                   std::string& problem) {
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      problem = "global shape " + shapeString(shape) + " has a negative dimension";
      return std::nullopt;
    }
    if (d != 0 && count > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(d)) {
      problem = "global shape " + shapeString(shape) + " has more than 2^63 elements";
      return std::nullopt;
    }
    count *= static_cast<uint64_t>(d);
  }
  uint64_t total = 0;
  for (const Run& r : runs) {
    if (r.offset > count || r.count > count - r.offset) {
      problem = "run {" + std::to_string(r.offset) + ", " + std::to_string(r.count) +
                "} falls outside global shape " + shapeString(shape) + " (" +
                std::to_string(count) + " elements)";
      return std::nullopt;
    }
    total += r.count;
    if (total > (uint64_t{1} << 62)) {
      problem = "its runs count more than 2^62 values";
      return std::nullopt;
    }
  }
  return total;
}

uint64_t elementCount(const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t d : shape) count *= static_cast<uint64_t>(d);
  return count;
}

std::optional<uint64_t> firstUncovered(uint64_t count, std::vector<Run> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.offset < b.offset; });
  uint64_t covered = 0;  // [0, covered) is covered
  for (const Run& r : runs) {
    if (r.count == 0) continue;
    if (r.offset > covered) return covered;
    covered = std::max(covered, r.offset + r.count);
  }
  if (covered < count) return covered;
  return std::nullopt;
}

Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

void readAt(int fd, uint64_t offset, void* dst, size_t n, const fs::path& file) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) failErrno(file, "cannot read");
    if (got == 0) fail(file, "truncated: the file ends at byte " + std::to_string(offset));
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

}  // namespace gyre::harness::checkpoint_detail
