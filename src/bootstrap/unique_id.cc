#include "bootstrap/unique_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/hash.h"

namespace gyre::bootstrap {

namespace {

constexpr uint32_t kIdMagic = 0x47594944;  // "GYID"
constexpr uint16_t kIdVersion = 1;
constexpr uint16_t kFlagFromEnvironment = 1;
constexpr uint16_t kFlagRankZeroHostsRoot = 2;
constexpr uint16_t kFlagSecretDerived = 4;

struct PackedId {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;  // kFlag* (0 in ids made before there were flags)
  uint8_t root[SockAddr::kPackedBytes];
  uint8_t secret[32];
};
static_assert(sizeof(PackedId) <= GYRE_UNIQUE_ID_BYTES);

}  // namespace

Secret randomSecret() {
  Secret s{};
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = getrandom(s.data() + got, s.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throwSystemError("getrandom()", errno);
    got += static_cast<size_t>(n);
  }
  return s;
}

Secret deriveSecret(const std::string& jobIdentity) {
  uint64_t h = fnv1a(jobIdentity);  // then expanded
  Secret s{};
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t v = splitmix64(h);
    std::memcpy(s.data() + i, &v, 8);
  }
  return s;
}

Secret parseSecretHex(const std::string& hex) {
  Secret s{};
  if (hex.size() != 2 * s.size())
    throwError(gyreInvalidArgument, "GYRE_SECRET must be 64 hex digits");
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned v = 0;
    for (int k = 0; k < 2; ++k) {
      char c = hex[2 * i + k];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) throwError(gyreInvalidArgument, "GYRE_SECRET must be 64 hex digits");
      v = v * 16 + static_cast<unsigned>(d);
    }
    s[i] = static_cast<uint8_t>(v);
  }
  return s;
}

std::string secretHex(const Secret& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : s) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool secretsEqual(const Secret& a, const Secret& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

void encodeUniqueId(const UniqueIdContents& c, gyreUniqueId* out) {
  std::memset(out, 0, sizeof(*out));
  PackedId p{};
  p.magic = kIdMagic;
  p.version = kIdVersion;
  p.flags = static_cast<uint16_t>((c.fromEnvironment ? kFlagFromEnvironment : 0) |
                                  (c.rankZeroHostsRoot ? kFlagRankZeroHostsRoot : 0) |
                                  (c.secretDerived ? kFlagSecretDerived : 0));
  c.root.pack(p.root);
  std::memcpy(p.secret, c.secret.data(), c.secret.size());
  std::memcpy(out->internal, &p, sizeof(p));
}

UniqueIdContents decodeUniqueId(const gyreUniqueId& id) {
  PackedId p;
  std::memcpy(&p, id.internal, sizeof(p));
  if (p.magic != kIdMagic)
    throwError(gyreInvalidArgument, "the unique id was not made by gyreGetUniqueId (bad magic)");
  if (p.version != kIdVersion)
    throwError(gyreInvalidArgument, "the unique id has version " + std::to_string(p.version) +
                                        "; this gyre understands version " +
                                        std::to_string(kIdVersion));
  UniqueIdContents c;
  c.root = SockAddr::unpack(p.root);
  if (c.root.len == 0) throwError(gyreInvalidArgument, "the unique id holds no root address");
  std::memcpy(c.secret.data(), p.secret, c.secret.size());
  c.fromEnvironment = (p.flags & kFlagFromEnvironment) != 0;
  c.rankZeroHostsRoot = (p.flags & kFlagRankZeroHostsRoot) != 0;
  c.secretDerived = (p.flags & kFlagSecretDerived) != 0;
  return c;
}

}  // namespace gyre::bootstrap
