// The token file: a text tokenized once (byte-level, so a token is a byte and
// the vocabulary is 256) and then memory-mapped by every training process.
// Tokenizing ahead of time keeps the training loop to a read of the tokens it
// samples, and mapping the file read-only lets the ranks on a host share one
// copy in the page cache instead of each holding its own.
//
// Format (docs/harness.md, "Data"): a 64-byte header, all fields
// little-endian, then the tokens, one byte each.
//
//   offset  size  field
//        0     8  magic "GYRETOK\0"
//        8     4  version (1)
//       12     4  vocabulary (256)
//       16     8  token count n
//       24     8  source size in bytes
//       32     8  source checksum (FNV-1a 64 of the source's bytes)
//       40     8  token checksum (FNV-1a 64 of the n token bytes)
//       48     8  reserved (0)
//       56     8  header checksum (FNV-1a 64 of bytes 0..55)
//
// The source's size and checksum say which text the tokens came from, so a
// changed text is noticed; the two other checksums catch a file damaged after
// it was written. It is written under a temporary name and renamed when
// complete, so a crash never leaves a half file under the real name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>

namespace gyre::harness {

// Every failure of the data path: the message names the file.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kByteVocab = 256;
inline constexpr size_t kTokenHeaderBytes = 64;
inline constexpr uint32_t kTokenFileVersion = 1;

// FNV-1a 64: simple, portable, and enough to tell one text from another or
// a damaged file from a sound one (not a defence against forgery).
uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t hash = 0xcbf29ce484222325ull);

// Makes sure `tokens` holds the tokens of `source`: tokenizes when the file
// is missing, damaged or made from another text (an older version of the
// source is re-tokenized), and leaves it alone when it already matches.
// Returns whether it wrote the file. Refuses to overwrite a file that is not
// a token file, a missing source and an empty one. Ranks that call this at
// once each write their own temporary file and rename it; the renames are
// atomic and the contents identical, so the last one wins harmlessly.
bool prepareTokens(const std::filesystem::path& source, const std::filesystem::path& tokens);

// A token file, verified and mapped read-only. Move-only: it owns the mapping.
class TokenFile {
 public:
  // Checks the header, the size and the token checksum (one pass over the
  // file) and throws DataError naming the file when any is wrong.
  static TokenFile open(const std::filesystem::path& tokens);
  // Also checks that the tokens were made from `source` as it is now.
  static TokenFile open(const std::filesystem::path& tokens, const std::filesystem::path& source);

  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  std::span<const uint8_t> tokens() const { return {base_ + kTokenHeaderBytes, count_}; }
  size_t size() const { return count_; }
  uint64_t sourceSize() const { return sourceSize_; }
  uint64_t sourceChecksum() const { return sourceChecksum_; }
  // What error messages name: the source when it was given, else the tokens.
  const std::string& name() const { return name_; }

 private:
  TokenFile() = default;
  void unmap();

  const uint8_t* base_ = nullptr;
  size_t mapped_ = 0;
  size_t count_ = 0;
  uint64_t sourceSize_ = 0;
  uint64_t sourceChecksum_ = 0;
  std::string name_;
};

// prepareTokens, then open with the source checked: what a training run calls.
TokenFile openText(const std::filesystem::path& source, const std::filesystem::path& tokens);

}  // namespace gyre::harness
