// FNV-1a, 64-bit: the one hash gyre uses where a stable, cheap,
// non-cryptographic fingerprint is wanted (host identities, job ids, model
// files, configuration checks). Stable across builds and machines, so two
// processes that hash the same bytes agree; not for anything an attacker
// must not forge (the session secret is random, not hashed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gyre {

inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

// Continues hash h over bytes, so a value can be hashed in pieces.
constexpr uint64_t fnv1a(const void* bytes, size_t n, uint64_t h = kFnv1aBasis) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
constexpr uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aBasis) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// splitmix64: the next value of a fixed generator from `state` (advanced).
// Where every process must draw the same numbers from the same seed (peer
// averaging's random pairings) or a seed needs spreading (ids).
constexpr uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace gyre
