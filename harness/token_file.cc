#include "harness/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace gyre::harness {
namespace {

namespace fs = std::filesystem;

constexpr std::array<uint8_t, 8> kMagic = {'G', 'Y', 'R', 'E', 'T', 'O', 'K', 0};
constexpr size_t kChunk = size_t{1} << 20;

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

[[noreturn]] void fail(const fs::path& p, const std::string& what) {
  throw DataError("harness data: " + quoted(p) + ": " + what);
}

[[noreturn]] void failErrno(const fs::path& p, const std::string& what) {
  fail(p, what + ": " + std::strerror(errno));
}

// Explicit little-endian fields, so a token file means the same on any host.
void put(uint8_t* at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get(const uint8_t* at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{at[i]} << (8 * i);
  return v;
}

// Closes on every path out, including the throws.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct SourceId {
  uint64_t size = 0;
  uint64_t checksum = fnv1a64({});
};

// Reads `source` in chunks, handing each to `sink`; returns its size and checksum.
template <typename Sink>
SourceId readSource(const fs::path& source, Sink&& sink) {
  Fd in{::open(source.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) failErrno(source, "cannot open the source text");
  std::vector<uint8_t> buf(kChunk);
  SourceId id;
  for (;;) {
    const ssize_t got = ::read(in.fd, buf.data(), buf.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) failErrno(source, "cannot read the source text");
    if (got == 0) return id;
    const std::span<const uint8_t> chunk(buf.data(), static_cast<size_t>(got));
    id.size += chunk.size();
    id.checksum = fnv1a64(chunk, id.checksum);
    sink(chunk);
  }
}

void writeAll(int fd, const uint8_t* data, size_t n, const fs::path& p) {
  while (n > 0) {
    const ssize_t wrote = ::write(fd, data, n);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) failErrno(p, "cannot write");
    data += wrote;
    n -= static_cast<size_t>(wrote);
  }
}

// Byte-level tokenization: the tokens are the source's bytes. The file is
// written whole under a name of this process's own, then renamed.
void writeTokens(const fs::path& source, const fs::path& tokens) {
  fs::path tmp = tokens;
  tmp += ".tmp." + std::to_string(::getpid());
  Fd out{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (out.fd < 0) failErrno(tmp, "cannot create the token file");
  try {
    std::array<uint8_t, kTokenHeaderBytes> header{};
    writeAll(out.fd, header.data(), header.size(), tmp);  // the real one once the count is known
    uint64_t tokenSum = fnv1a64({});
    const SourceId id = readSource(source, [&](std::span<const uint8_t> chunk) {
      tokenSum = fnv1a64(chunk, tokenSum);
      writeAll(out.fd, chunk.data(), chunk.size(), tmp);
    });
    if (id.size == 0) fail(source, "the source text is empty: nothing to train on");
    std::memcpy(header.data(), kMagic.data(), kMagic.size());
    put(&header[8], kTokenFileVersion, 4);
    put(&header[12], kByteVocab, 4);
    put(&header[16], id.size, 8);  // one token per byte
    put(&header[24], id.size, 8);
    put(&header[32], id.checksum, 8);
    put(&header[40], tokenSum, 8);
    put(&header[56], fnv1a64({header.data(), 56}), 8);
    if (::pwrite(out.fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()))
      failErrno(tmp, "cannot write the header");
    // Durable before it gets the real name, so the name never points at a
    // file whose blocks a crash could still lose.
    if (::fsync(out.fd) != 0) failErrno(tmp, "cannot sync");
    ::close(std::exchange(out.fd, -1));
    std::error_code ec;
    fs::rename(tmp, tokens, ec);
    if (ec) fail(tokens, "cannot rename " + quoted(tmp) + " to it: " + ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

bool startsWithMagic(const fs::path& p) {
  Fd in{::open(p.c_str(), O_RDONLY | O_CLOEXEC)};
  std::array<uint8_t, kMagic.size()> head{};
  return in.fd >= 0 &&
         ::read(in.fd, head.data(), head.size()) == static_cast<ssize_t>(head.size()) &&
         head == kMagic;
}

}  // namespace

uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t hash) {
  for (uint8_t b : bytes) hash = (hash ^ b) * 0x100000001b3ull;
  return hash;
}

bool prepareTokens(const fs::path& source, const fs::path& tokens) {
  std::error_code ec;
  if (fs::exists(tokens, ec)) {
    // A token file is derived data and may be replaced; anything else at
    // that path is someone's file, probably a mistyped argument.
    if (!startsWithMagic(tokens))
      fail(tokens, "exists and is not a gyre token file; refusing to overwrite it");
    try {
      TokenFile::open(tokens, source);
      return false;  // already the tokens of this text
    } catch (const DataError&) {
      // Damaged, or made from another version of the source: fall through and
      // tokenize again. A missing source is reported by writeTokens below.
    }
  }
  writeTokens(source, tokens);
  return true;
}

TokenFile TokenFile::open(const fs::path& tokens) {
  Fd in{::open(tokens.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) failErrno(tokens, "cannot open the token file");
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) failErrno(tokens, "cannot stat the token file");
  const auto fileSize = static_cast<uint64_t>(st.st_size);
  if (fileSize < kTokenHeaderBytes)
    fail(tokens, "not a token file or truncated: " + std::to_string(fileSize) +
                     " bytes, shorter than the " + std::to_string(kTokenHeaderBytes) +
                     "-byte header");
  void* map = ::mmap(nullptr, fileSize, PROT_READ, MAP_PRIVATE, in.fd, 0);
  if (map == MAP_FAILED) failErrno(tokens, "cannot map the token file");
  TokenFile f;
  f.base_ = static_cast<const uint8_t*>(map);
  f.mapped_ = fileSize;
  f.name_ = tokens.string();
  const uint8_t* h = f.base_;
  // f unmaps itself if a check below throws.
  if (std::memcmp(h, kMagic.data(), kMagic.size()) != 0)
    fail(tokens, "not a gyre token file (bad magic)");
  if (get(h + 56, 8) != fnv1a64({h, 56}))
    fail(tokens, "corrupt token file: the header's checksum does not match");
  if (const uint64_t v = get(h + 8, 4); v != kTokenFileVersion)
    fail(tokens, "token file version " + std::to_string(v) + ", this build reads version " +
                     std::to_string(kTokenFileVersion) + "; delete it to tokenize again");
  if (const uint64_t v = get(h + 12, 4); v != kByteVocab)
    fail(tokens, "vocabulary of " + std::to_string(v) + ", the byte-level loader needs 256");
  const uint64_t count = get(h + 16, 8);
  if (fileSize - kTokenHeaderBytes != count)
    fail(tokens, (fileSize - kTokenHeaderBytes < count ? "truncated token file: "
                                                       : "token file too long: ") +
                     std::string("the header says ") + std::to_string(count) +
                     " tokens, the file holds " + std::to_string(fileSize - kTokenHeaderBytes));
  f.count_ = count;
  if (fnv1a64(f.tokens()) != get(h + 40, 8))
    fail(tokens, "corrupt token file: the tokens' checksum does not match");
  f.sourceSize_ = get(h + 24, 8);
  f.sourceChecksum_ = get(h + 32, 8);
  return f;
}

TokenFile TokenFile::open(const fs::path& tokens, const fs::path& source) {
  TokenFile f = open(tokens);
  const SourceId now = readSource(source, [](std::span<const uint8_t>) {});
  if (now.size != f.sourceSize_ || now.checksum != f.sourceChecksum_)
    fail(tokens, "made from another text than " + quoted(source) +
                     " (the source changed, or it is another file's tokens); prepareTokens "
                     "tokenizes it again");
  f.name_ = source.string();
  return f;
}

TokenFile::TokenFile(TokenFile&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)),
      count_(other.count_),
      sourceSize_(other.sourceSize_),
      sourceChecksum_(other.sourceChecksum_),
      name_(std::move(other.name_)) {}

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    unmap();
    base_ = std::exchange(other.base_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    count_ = other.count_;
    sourceSize_ = other.sourceSize_;
    sourceChecksum_ = other.sourceChecksum_;
    name_ = std::move(other.name_);
  }
  return *this;
}

TokenFile::~TokenFile() { unmap(); }

void TokenFile::unmap() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), mapped_);
  base_ = nullptr;
}

TokenFile openText(const fs::path& source, const fs::path& tokens) {
  prepareTokens(source, tokens);
  return TokenFile::open(tokens, source);
}

}  // namespace gyre::harness
